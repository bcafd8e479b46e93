"""Helpers for the perplexity tests: a tiny GPT-2 with a longer context, a real bm25s index, a naive
reference.

The reference is deliberately naive and written from eval_lm.py's description, not from ralm's code: one
unbatched forward per window (and per candidate), full logits, ``CrossEntropyLoss`` on the scored
positions, its own queries (``decode(tokens[:prev_end][-ℓ:])``) and its own passage tokenization. The two
places where it departs from eval_lm.py are the two bugs the issue names (text shorter than one window;
a passage longer than the window's context).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ralm.testing import target_losses

EVAL_DOCS = 3  # the first documents form the evaluation text; all documents form the retrieval corpus


def build_tiny_lm(tokenizer_dir: Path, out: Path, n_positions: int = 512, seed: int = 0) -> Path:
    """A 2-layer GPT-2 (width 64) with `n_positions` context and the shared fixture's trained tokenizer."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=64,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_bm25_index(documents: list[dict], root: Path, words: int = 60) -> tuple[Path, Path]:
    """Passages of `words` words from `documents`, indexed with the real bm25s backend; (index, passages)."""
    from ralm.retrieval.index import build_index
    from ralm.retrieval.passages import split_passages, write_passages

    passages = root / "passages.jsonl"
    write_passages(split_passages(documents, words=words), passages)
    index = root / "index"
    build_index(passages, index, backend="bm25s")
    return index, passages


def reference_total_nll(
    model,
    tokenizer,
    tokens: list[int],
    *,
    input_length: int,
    stride: int,
    strategy: str = "none",
    retriever=None,
    k: int = 1,
    query_tokens: int = 32,
    max_passage_tokens: int = 256,
    rank_tokens: int = 16,
    pick=None,
    passage_special_tokens: bool = False,
    lead: tuple[int, ...] = (),
) -> tuple[float, int]:
    """(total NLL, scored tokens) the slow way. strategy: none | first | oracle | zero-shot | given.

    ``given`` asks ``pick(begin, prev_end, hits)`` for the chosen hit's index (or None: no passage).
    ``passage_special_tokens``: encode passages as eval_lm.py does, ``tokenizer.encode(text)`` (BOS first
    for a tokenizer that adds one). ``lead``: what a window without a passage starts with (its BOS in
    ``--special-tokens every-input``): the lead, then the window's last ``input_length - len(lead)`` tokens.
    """
    x = torch.tensor(tokens)
    total, scored, prev_end, idx = 0.0, 0, 0, 0
    with torch.no_grad():
        for begin in range(0, len(tokens), stride):
            end = min(begin + input_length, len(tokens))
            trg = end - prev_end
            window = x[begin:end]
            docs = []
            if idx > 0 and strategy != "none":
                query = tokenizer.decode(tokens[:prev_end][-query_tokens:])
                hits = retriever.search([query], k)[0]
                docs = [
                    tokenizer(h.contents, add_special_tokens=passage_special_tokens)["input_ids"][
                        :max_passage_tokens
                    ]
                    for h in hits
                ]
                docs = docs[:1] if strategy == "first" else docs
                if strategy == "given" and hits:
                    chosen = pick(begin, prev_end, hits)
                    docs = [] if chosen is None else [docs[chosen]]
            if not docs:
                n = min(trg, len(window) - 1)  # the window's first token has no context
                kept = window[max(0, len(lead) + len(window) - input_length) :]
                inp = torch.cat([torch.tensor(lead, dtype=torch.long), kept])
                total += float(target_losses(model, inp, n).sum())
                scored += n
            else:
                target_nlls, rank_losses = [], []
                for d in docs:
                    context = len(window) - trg
                    rest = window[len(d) :] if len(d) <= context else window[-trg:]
                    inp = torch.cat([torch.tensor(d, dtype=torch.long), rest])
                    # The rank_tokens just before the targets come from the same forward (zero-shot).
                    ranked = rank_tokens if strategy == "zero-shot" else 0
                    losses = target_losses(model, inp, trg + ranked)
                    target_nlls.append(losses[ranked:].sum())
                    rank_losses.append(losses[:ranked].sum())
                if strategy in ("first", "given"):
                    best = 0
                elif strategy == "oracle":
                    best = int(torch.argmin(torch.stack(target_nlls)))
                else:
                    best = int(torch.argmin(torch.stack(rank_losses)))
                total += float(target_nlls[best])
                scored += trg
            prev_end = end
            idx += 1
            if end == len(tokens):
                break
    return total, scored


def train_other_tokenizer(texts: list[str], out: Path, vocab_size: int = 600) -> None:
    """A second byte-level BPE with a different vocabulary, for reranking LMs with another tokenizer."""
    from transformers import PreTrainedTokenizerFast

    from ralm.testing import train_byte_bpe

    raw = train_byte_bpe(texts, vocab_size, ["<eos>"])
    PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eos>").save_pretrained(out)


def export_untrained_reranker(
    encoder_dir: Path, out: Path, abstain: bool, max_length: int = 128, seed: int = 3
) -> Path:
    """A reranker folder in the documented format (docs/formats.md §5) with a fresh scoring head."""
    import json

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(encoder_dir, num_labels=1)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(encoder_dir).save_pretrained(out)
    info = {
        "format": "ralm-reranker/1",
        "base_model": str(encoder_dir),
        "max_length": max_length,
        "max_prefix_tokens": 64,
        "input_format": "prefix-tail/passage",
        "abstain": abstain,
        "loss": "marginal",
        "trained_on": {},
    }
    (out / "ralm_reranker.json").write_text(json.dumps(info))
    return out


@pytest.fixture(scope="session")
def ppl_setup(tiny_lm_dir, real_documents, tmp_path_factory) -> dict:
    """Tiny LM (512 context), two real bm25s indexes (40- and 250-word passages) and an eval text file."""
    from ralm.lm.loading import load_lm

    root = tmp_path_factory.mktemp("ppl")
    lm_dir = build_tiny_lm(tiny_lm_dir, root / "lm", n_positions=512)
    # Passages of 250 words run to ~350 tokens, longer than the 256-token passage cut.
    long_index, long_passages = build_bm25_index(real_documents, root / "long", words=250)
    index, passages = build_bm25_index(real_documents, root / "short", words=40)
    text = root / "eval.txt"
    text.write_text("\n\n".join(d["text"] for d in real_documents[:EVAL_DOCS]))
    lm = load_lm(lm_dir, device="cpu", dtype="float32")
    return {
        "root": root,
        "lm_dir": lm_dir,
        "lm": lm,
        "index": index,
        "passages": passages,
        "long_index": long_index,
        "long_passages": long_passages,
        "text": text,
    }


def bos_adding_copy(lm_dir, out, extra: tuple[str, ...] = ()):
    """The tiny LM with a tokenizer that puts a BOS first, as OPT's, LLaMA's and Gemma's do (OPT's BOS is its
    EOS); `extra` tokens (added as special tokens) follow the BOS, for a prefix of more than one token."""
    import shutil

    from tokenizers import processors
    from transformers import AutoTokenizer

    shutil.copytree(lm_dir, out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    bos = tokenizer.eos_token
    tokenizer.bos_token = bos
    if extra:  # new ids past the model's embeddings: for tokenizer-only tests
        tokenizer.add_special_tokens({"additional_special_tokens": list(extra)})
    lead = " ".join([bos, *extra])
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{lead} $A",
        pair=f"{lead} $A $B",
        special_tokens=[(t, tokenizer.convert_tokens_to_ids(t)) for t in dict.fromkeys([bos, *extra])],
    )
    tokenizer.save_pretrained(out)
    return out
