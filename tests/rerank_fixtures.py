"""Reranking datasets built in the test: the synthetic key-word task, in format ralm-rerank-data/1.

Each prefix is ordinary words with one key word in it; its k candidates are ordinary words too, each
with a different key word, and exactly one carries the prefix's key word. The "LM" log-prob is high
for that candidate and low for the others, so a reranker can only agree with the LM by matching a
word of the prefix inside the passage. BM25 order is random, so BM25's top-1 is right 1/k of the time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

KEYWORD_LOGPROB = -3.0
OTHER_LOGPROB = -9.0
NO_RETRIEVAL_LOGPROB = -6.0


def vocabulary(real_documents: list[dict], n_keywords: int = 40) -> tuple[list[str], list[str]]:
    """(key words, filler words) from the real documents: distinct lowercase words, keys not among fillers."""
    counts: dict[str, int] = {}
    for doc in real_documents:
        for word in re.findall(r"[a-z]{4,9}", doc["text"].lower()):
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))
    return words[200 : 200 + n_keywords], words[:200]


def keyword_rows(
    real_documents: list[dict],
    n_prefixes: int,
    *,
    k: int = 4,
    seed: int = 0,
    prefixes_per_doc: int = 5,
    prefix_words: int = 12,
    passage_words: int = 8,
) -> list[dict]:
    """Rows with every column of docs/formats.md §4."""
    keys, fillers = vocabulary(real_documents)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_prefixes):
        chosen = rng.choice(len(keys), size=k, replace=False)
        key = keys[chosen[0]]
        words = list(rng.choice(fillers, size=prefix_words))
        words.insert(int(rng.integers(0, prefix_words + 1)), key)
        order = rng.permutation(k)  # BM25 order: the right candidate lands anywhere
        texts, logprobs = [], []
        for slot in order:
            body = list(rng.choice(fillers, size=passage_words))
            body.insert(int(rng.integers(0, passage_words + 1)), keys[chosen[slot]])
            texts.append(f"Title {i}-{slot}\n" + " ".join(body))
            logprobs.append((KEYWORD_LOGPROB if slot == 0 else OTHER_LOGPROB) + float(rng.normal(0, 0.3)))
        rows.append(
            {
                "prefix_index": i,
                "doc_id": f"doc{i // prefixes_per_doc}",
                "position": 32 * (i % prefixes_per_doc),
                "prefix": " ".join(words),
                "target": " next words",
                "query": " ".join(words[-8:]),
                "candidate_ids": [f"p{i}-{slot}" for slot in order],
                "candidate_doc_ids": [f"other{slot}" for slot in order],
                "candidate_texts": texts,
                "bm25_scores": sorted(rng.uniform(1, 10, size=k).tolist(), reverse=True),
                "lm_logprobs": logprobs,
                "lm_token_logprobs": [[lp / 2, lp / 2] for lp in logprobs],
                "no_retrieval_logprob": NO_RETRIEVAL_LOGPROB,
                "no_retrieval_token_logprobs": [NO_RETRIEVAL_LOGPROB / 2] * 2,
            }
        )
    return rows


def save_rows(
    rows: list[dict], folder: Path, *, meta: dict | None = None, drop: tuple[str, ...] = ()
) -> Path:
    """Save as ``datasets`` does for `ralm data-gen` (with ralm_data_gen.json), optionally without columns."""
    import datasets

    columns = {name: [row[name] for row in rows] for name in rows[0] if name not in drop}
    datasets.Dataset.from_dict(columns).save_to_disk(str(folder))
    info = {
        "format": "ralm-rerank-data/1",
        "lm": "synthetic-keyword",
        "k": len(rows[0]["candidate_texts"]),
        "complete": True,
        **(meta or {}),
    }
    (folder / "ralm_data_gen.json").write_text(json.dumps(info))
    return folder


def keyword_dataset(real_documents: list[dict], folder: Path, n_prefixes: int, **kwargs) -> Path:
    return save_rows(keyword_rows(real_documents, n_prefixes, **kwargs), folder)


CPU_TRAINER = {"accelerator": "cpu", "devices": 1, "enable_progress_bar": False}
"""The Trainer of every tiny fit: one CPU process, no bar."""


def tiny_fit_options(
    encoder_dir: Path,
    *,
    max_steps: int,
    val_every: int | None = None,
    encoder: dict | None = None,
    loader: dict | None = None,
    optim: dict | None = None,
    run: dict | None = None,
    trainer: dict | None = None,
) -> dict:
    """``fit_reranker``'s option groups for a tiny encoder on CPU: 40-token pairs (12 prefix tokens),
    batches of 4 with a quarter of the prefixes validating, lr 1e-3 after one warmup step, validation and a
    checkpoint every `val_every` steps (default: once, at `max_steps`), no wandb; the fields given in a
    group's dict replace these (any other field keeps its class default)."""
    from ralm.train.settings import EncoderOptions, LoaderOptions, OptimOptions, RunOptions

    every = val_every or max_steps
    return {
        "encoder": EncoderOptions(
            **{"name": str(encoder_dir), "max_pair_tokens": 40, "max_prefix_tokens": 12, **(encoder or {})}
        ),
        "loader": LoaderOptions(**{"batch_size": 4, "val_fraction": 0.25, **(loader or {})}),
        "optim": OptimOptions(**{"lr": 1e-3, "warmup_steps": 1, "max_steps": max_steps, **(optim or {})}),
        "run": RunOptions(**{"val_every": every, "save_every": every, "wandb": "off", **(run or {})}),
        "trainer": {**CPU_TRAINER, **(trainer or {})},
    }


def fit_tiny_reranker(data: Path, output: Path, encoder_dir: Path, *, max_steps: int, **options) -> dict:
    """``fit_reranker`` with `tiny_fit_options` (its keyword groups in `options`); the other keyword
    arguments (``bm25_prior``, ``abstain``, ``seed``, ...) go to ``fit_reranker`` as they are. Its summary."""
    from ralm.train.fit import fit_reranker

    groups = ("val_every", "encoder", "loader", "optim", "run", "trainer")
    chosen = {k: options.pop(k) for k in groups if k in options}
    return fit_reranker(
        str(data), str(output), **tiny_fit_options(encoder_dir, max_steps=max_steps, **chosen), **options
    )


# ------------------------------------------------------ shared by test_rerank_training_*

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, real_documents) -> Path:
    return keyword_dataset(real_documents, tmp_path_factory.mktemp("rerank_data") / "data", 80, k=4, seed=7)


_CPU = {"accelerator": "cpu", "devices": 1, "log_every_n_steps": 1, "enable_progress_bar": False}


def _settings(encoder_dir, accumulate=1, max_steps=10, **optim):
    return tiny_fit_options(
        encoder_dir,
        max_steps=max_steps,
        val_every=4,
        encoder={"max_pair_tokens": 48, "max_prefix_tokens": 24},
        loader={"val_batch_size": 16},
        optim={"warmup_steps": 2, **optim},
        run={"save_every": 2},
        trainer={**_CPU, "accumulate_grad_batches": accumulate},
    )
