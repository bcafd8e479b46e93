"""Helpers for the retrieval tests: real documents written to disk, passages and queries made from them."""

from __future__ import annotations

import json
import random
from pathlib import Path

from ralm.retrieval.passages import read_documents, split_passages, write_passages


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def real_passages_file(tmp_path: Path, documents: list[dict], words: int = 100) -> Path:
    """The real documents as a passages JSONL (100-word passages)."""
    docs = write_jsonl(tmp_path / "docs.jsonl", documents)
    out = tmp_path / "passages.jsonl"
    write_passages(split_passages(read_documents(docs), words=words), out)
    return out


def word_window_queries(documents: list[dict], count: int, words: int = 32, seed: int = 0) -> list[str]:
    """`count` queries of `words` consecutive words from random places in the documents (as the paper's
    32-token BM25 queries are taken from the text being evaluated)."""
    rng = random.Random(seed)
    tokens = [d["text"].split() for d in documents]
    queries = []
    while len(queries) < count:
        doc = rng.choice(tokens)
        start = rng.randrange(0, max(1, len(doc) - words))
        queries.append(" ".join(doc[start : start + words]))
    return queries
