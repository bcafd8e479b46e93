"""Retrieval results of an eval run, cached in a JSONL file keyed by query *text*.

Keys are characters, not token offsets (the authors' ``prepare_retrieval_data.py`` stores token offsets,
tying its file to one tokenizer), so a second LM, reranker, stride or sweep point reuses every query it
shares with an earlier run. The file is tied to one index: its first line records the index identity and
``k``; a file for another index or a smaller ``k`` is not reused. Writes go to a temporary name first.

Line 1: ``{"format": "ralm-eval-retrieval/1", "index": {...}, "index_key": str, "k": int}``;
then one line per query: ``{"query": str, "hits": [{"id", "score", "contents", "title", "doc_id"}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ralm.atomic_files import atomic_path
from ralm.jsonl import parse_json_object
from ralm.retrieval.index_meta import index_fingerprint as index_key  # the name eval results import
from ralm.retrieval.run_files import hit_record
from ralm.retrieval.types import Hit, Retriever

FORMAT = "ralm-eval-retrieval/1"


def default_cache_path(meta: dict) -> Path:
    from ralm.lm.loading import cache_root

    return cache_root() / "retrieval" / f"{index_key(meta)}.jsonl"


def read_cache(path: Path, meta: dict, k: int) -> dict[str, list[Hit]]:
    """Cached hits by query (each query's first k), or {} when the file is missing, for another index, or
    holds fewer than k hits."""
    stored, depth = _stored(path, meta)
    return {} if depth < k else {query: hits[:k] for query, hits in stored.items()}


def _stored(path: Path, meta: dict) -> tuple[dict[str, list[Hit]], int]:
    """Every query's hits as the file holds them and its k; ({}, 0) when it is missing or for another
    index."""
    if not path.is_file():
        return {}, 0
    with open(path, encoding="utf-8") as f:
        try:
            header = json.loads(f.readline())
        except json.JSONDecodeError:
            return {}, 0
        if header.get("format") != FORMAT or header.get("index_key") != index_key(meta):
            return {}, 0
        stored = {}
        for lineno, line in enumerate(f, start=2):
            if not line.strip():
                continue
            row = parse_json_object(line, path, lineno)
            stored[row["query"]] = [Hit(**h) for h in row["hits"]]
    return stored, int(header.get("k", 0))


def write_cache(path: Path, meta: dict, k: int, results: dict[str, list[Hit]]) -> None:
    """Write all `results` atomically (temporary file in the same folder, then rename)."""
    header = {"format": FORMAT, "index": meta, "index_key": index_key(meta), "k": k}
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, default=str) + "\n")
        for query, hits in results.items():
            f.write(json.dumps({"query": query, "hits": [hit_record(h) for h in hits]}) + "\n")


def retrieve_cached(
    retriever: Retriever,
    queries: Sequence[str],
    k: int,
    cache_path: Path | None,
    threads: int = 1,
) -> tuple[dict[str, list[Hit]], int]:
    """Top-k hits for every distinct query; the missing ones in ONE batched search call.

    A file holding more than k hits per query keeps its depth: the missing queries are searched that deep,
    so a run with a smaller k (the pipeline's forward-looking rows read BM25's top-1) never truncates what a
    run with the larger k shares. Returns (hits by query, number of queries searched now). With
    `cache_path` None nothing is cached.
    """
    stored, depth = _stored(cache_path, retriever.meta) if cache_path is not None else ({}, 0)
    if depth < k:
        stored, depth = {}, k
    missing = list(dict.fromkeys(q for q in queries if q not in stored))
    if missing:
        found = retriever.search(missing, depth, threads=threads)
        for query, hits in zip(missing, found, strict=True):
            stored[query] = list(hits)
        if cache_path is not None:
            write_cache(cache_path, retriever.meta, depth, stored)
    return {q: stored[q][:k] for q in dict.fromkeys(queries)}, len(missing)
