"""What the reranker's encoder knows before training: its bi-encoder cosine as a passage rule of its own, on
data-gen's labels, beside BM25's top-1, the LM's zero-shot rule and the bound.

    .venv/bin/python bench/encoder_rules.py RUN/rerank-data-KEY [--encoder FOLDER] [--prefix-words 150]

all-MiniLM-L6-v2, the demo's encoder, was trained as a bi-encoder for similarity; ``ralm train`` builds a
cross-encoder from it with a fresh head. Untrained, it can already pick a passage: the candidate whose
mean-pooled, normalised embedding is closest to the query's, at the cost of k + 1 encoder inputs per
retrieval and no LM. Two queries: data-gen's BM25 query (the prefix's last ℓ tokens) and the prefix's last
`--prefix-words` words (the cross-encoder's side of a pair reads the prefix). Nothing here is fitted, so
every prefix of the folder (the training documents: none is a dev or test text) judges every rule.

For each rule: the mean change of the targets' log-prob against BM25's top-1, in nats per target, with a
95% bootstrap interval over blocks of prefixes (``ralm.train.decision.decision_blocks``: whole documents,
or runs of neighbours within one where fewer than 8 documents; prefixes of one document are not
independent); the share of the bound's gain over BM25 it recovers; how often it picks
BM25's top-1 and the zero-shot rule's pick.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from ralm.retrieval.dense_encoder import DenseEncoder
from ralm.statistics import paired_mean_difference
from ralm.train.decision import decision_blocks


def cosine_picks(encoder: DenseEncoder, queries: list[str], candidates: list[list[str]]) -> list[int]:
    """Per prefix, the candidate whose embedding is closest to its query's (ties: the higher BM25 one)."""
    flat = [text for texts in candidates for text in texts]
    vectors = encoder.encode([*queries, *flat], batch_size=64)
    query_vectors, passage_vectors = vectors[: len(queries)], vectors[len(queries) :]
    picks, at = [], 0
    for query, texts in zip(query_vectors, candidates, strict=True):
        similarity = passage_vectors[at : at + len(texts)] @ query
        picks.append(int(np.argmax(similarity)))  # argmax keeps the first of equal values
        at += len(texts)
    return picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="a finished ralm data-gen folder")
    parser.add_argument("--encoder", default=None, help="default: the demo's all-MiniLM-L6-v2")
    parser.add_argument("--prefix-words", type=int, default=150)
    args = parser.parse_args()
    from datasets import load_from_disk

    from ralm.pipeline.models import default_encoder

    rows = load_from_disk(str(args.data))
    columns = ["doc_id", "query", "prefix", "candidate_texts", "lm_logprobs", "lm_rank_logprobs"]
    table = {name: rows[name] for name in columns}
    logprobs = [np.asarray(v, dtype=np.float64) for v in table["lm_logprobs"]]
    encoder = DenseEncoder(args.encoder or default_encoder(), pooling="mean", normalize=True)
    started = time.perf_counter()
    prefix_tails = [" ".join(p.split()[-args.prefix_words :]) for p in table["prefix"]]
    picks = {
        "BM25 top-1": [0] * len(logprobs),
        "zero-shot LM rule": [int(np.argmax(r)) for r in table["lm_rank_logprobs"]],
        "encoder cosine, BM25 query": cosine_picks(encoder, table["query"], table["candidate_texts"]),
        "encoder cosine, prefix tail": cosine_picks(encoder, prefix_tails, table["candidate_texts"]),
        "bound: best of k": [int(np.argmax(v)) for v in logprobs],
    }
    seconds = time.perf_counter() - started
    chosen = {name: np.array([v[p] for v, p in zip(logprobs, ps, strict=True)]) for name, ps in picks.items()}
    bm25, bound = chosen["BM25 top-1"], chosen["bound: best of k"]
    k = len(logprobs[0])
    print(
        f"{args.data}: {len(logprobs)} prefixes of {len(set(table['doc_id']))} documents, k = {k}; encoder "
        f"{encoder.model.name_or_path} ({2 * len(logprobs) * (k + 1)} encoder inputs in {seconds:.0f} s)"
    )
    print(
        f"{'rule':<30} {'vs BM25, nats per target [95% CI]':<36} {'gain recovered':>14} "
        f"{'= BM25':>7} {'= zero-shot':>11}"
    )
    for name, values in chosen.items():
        blocks, blocked_by = decision_blocks(values - bm25, table["doc_id"])
        change = paired_mean_difference(values, bm25, blocks=blocks)
        recovered = change.difference / float(np.mean(bound - bm25))
        same_bm25 = np.mean(np.array(picks[name]) == 0)
        same_zero = np.mean(np.array(picks[name]) == np.array(picks["zero-shot LM rule"]))
        interval = f"{change.difference:+.3f} [{change.low:+.3f}, {change.high:+.3f}]"
        print(f"{name:<30} {interval:<36} {recovered:14.2f} {same_bm25:7.0%} {same_zero:11.0%}")
    print(f"(intervals: blocks by {blocked_by})")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
