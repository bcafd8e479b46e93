"""Abstention without the LM: the reranker's untrained encoder as a threshold rule, fitted on data-gen's
prefixes and played on an eval set's windows beside the rules the demo exports.

    .venv/bin/python bench/encoder_abstention.py RUN/rerank-data-KEY EVAL_FOLDER [--encoder FOLDER]

The rule (``cosine-above``): the candidate whose mean-pooled, normalised embedding is closest to the BM25
query's (the window's last ℓ tokens), prepended only when that cosine is at least C. It reads k + 1 encoder
inputs per retrieval and no LM, so it competes with the threshold rule (``bm25-above``, BM25's top-1 when
its score is at least T) for the no-LM export, and with the LM's own abstention (``zero-shot-above``: the
zero-shot pick when it raises the log-prob of the prefix's last 16 tokens by at least M nats over no
passage; k + 1 LM inputs) for the export.

1. On every prefix of the data-gen folder (training books) each rule's feature is fitted as ralm fits T and
   M (``ralm.train.selection.bagged_threshold``: the median over document-bootstrap resamples of the
   threshold that maximises the summed target gain over no passage), and judged cross-fitted: fitted on
   four folds of documents, scored on the fifth (nats per target against no passage, 95% intervals over
   documents).
2. On EVAL_FOLDER (an ``ralm eval ppl --compare`` output with all k candidates: its ``candidates.jsonl``),
   the rules fitted on all the data-gen prefixes are played on the retrieving windows, whose candidates'
   texts are rebuilt from the eval's retrieval cache and index in its passage form: token perplexity
   changes with paired 95% bootstrap intervals over blocks of windows (the demo report's block length,
   from the BM25 − no retrieval difference).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from ralm.eval.ppl.outputs import read_config
from ralm.passage_rules import BM25
from ralm.retrieval.dense_encoder import DenseEncoder
from ralm.retrieval.passage_forms import CONTINUATION, continued, passage_store
from ralm.retrieval.types import Hit
from ralm.statistics import dependent_blocks, format_change, paired_bootstrap, paired_mean_difference
from ralm.train.decision import decision_blocks
from ralm.train.scalar_init import rank_gain_columns, read_rule_columns
from ralm.train.selection import bagged_threshold

FOLDS = 5


def cosines(encoder: DenseEncoder, queries: list[str], candidates: list[list[str]]) -> np.ndarray:
    """(queries, k) cosines of each candidate's embedding with its query's."""
    k = len(candidates[0])
    vectors = encoder.encode([*queries, *(t for texts in candidates for t in texts)], batch_size=64)
    query_vectors, passage_vectors = vectors[: len(queries)], vectors[len(queries) :]
    return np.einsum("nd,nkd->nk", query_vectors, passage_vectors.reshape(len(queries), k, -1))


def training_features(path: Path, rows, encoder: DenseEncoder) -> tuple[dict, list[str]]:
    """Per rule, (feature, the targets' gain over no passage under its pick) per data-gen prefix; the two
    pipeline rules' columns read as ralm reads them to fit T and M (``ralm.train.scalar_init``)."""
    rule, rank = read_rule_columns(str(path)), rank_gain_columns(str(path))
    if rank is None:
        raise SystemExit(f"{path}: no y' columns (ralm-rerank-data/1): the zero-shot rule cannot be fitted")
    if rule.docs != [str(d) for d in rows["doc_id"]]:
        raise SystemExit(f"{path}: the rule columns are not in the dataset's row order")
    logprobs = np.asarray(rows["lm_logprobs"])
    cos = cosines(encoder, rows["query"], rows["candidate_texts"])
    cosine_gain = logprobs[np.arange(len(logprobs)), cos.argmax(1)] - rule.none
    features = {
        "bm25-above": (rule.best_bm25, rule.top1 - rule.none),
        "zero-shot-above": (rank.gain, rank.picked - rank.none),
        "cosine-above": (cos.max(1), cosine_gain),
    }
    return features, rule.docs


def cross_fitted(feature: np.ndarray, gain: np.ndarray, docs: list[str]) -> np.ndarray:
    """Each prefix's gain under the rule fitted on the other folds' documents (0 where it abstains)."""
    order = sorted(set(docs))
    np.random.default_rng(0).shuffle(order)
    fold = np.array([order.index(d) % FOLDS for d in docs])
    out = np.zeros_like(gain)
    for held in range(FOLDS):
        fit = fold != held
        threshold = bagged_threshold(feature[fit], gain[fit], list(np.asarray(docs)[fit]))
        out[~fit] = np.where(feature[~fit] >= threshold, gain[~fit], 0.0)
    return out


def eval_windows(folder: Path, k: int) -> tuple[list[dict], list[str], list[list[str]]]:
    """The retrieving windows of a ``--compare`` folder with all k candidates scored, their BM25 queries and
    their candidates' texts as the eval handed them to the LM."""
    from ralm.retrieval.index import open_index

    config = read_config(folder / BM25)  # a condition that retrieves records the cache and the index
    table = [json.loads(line) for line in (folder / "candidates.jsonl").open()]
    windows = [w for w in table if len(w["candidates"]) == k]
    cache = [json.loads(line) for line in Path(config["retrieval_cache"]).open()][1:]
    store = passage_store(open_index(config["index"]["dir"]))
    following: dict = {}
    queries, texts, at = [], [], 0
    for window in windows:  # the cache holds every window's query in order; match each by its candidates
        wanted = [c["id"] for c in window["candidates"]]
        while True:
            entry = cache[at]
            at += 1
            hits = [Hit(**{f: h[f] for f in Hit.__dataclass_fields__}) for h in entry["hits"][:k]]
            if config["passage_form"] == CONTINUATION:
                hits = continued(hits, entry["query"], store, following)
            if [h.id for h in hits] == wanted:
                break
        queries.append(entry["query"])
        texts.append([h.contents for h in hits])
    return windows, queries, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="a finished ralm data-gen folder (with y')")
    parser.add_argument("eval", type=Path, help="an ralm eval ppl --compare folder with all k candidates")
    parser.add_argument("--encoder", default=None, help="default: the demo's all-MiniLM-L6-v2")
    args = parser.parse_args()
    from datasets import load_from_disk

    from ralm.pipeline.models import default_encoder

    encoder = DenseEncoder(args.encoder or default_encoder(), pooling="mean", normalize=True)
    rows = load_from_disk(str(args.data))
    features, docs = training_features(args.data, rows, encoder)
    n, k = len(docs), len(rows[0]["lm_logprobs"])
    print(f"{args.data}: {n} prefixes of {len(set(docs))} documents, k = {k}")
    print(f"{'rule':<16} {'threshold':>9}  {'cross-fitted vs no passage, nats per target':<44} retrieves")
    thresholds = {}
    for name, (feature, gain) in features.items():
        thresholds[name] = bagged_threshold(feature, gain, docs)
        out = cross_fitted(feature, gain, docs)
        blocks, _ = decision_blocks(out, docs)
        change = paired_mean_difference(out, np.zeros(n), blocks=blocks)
        interval = f"{change.difference:+.3f} [{change.low:+.3f}, {change.high:+.3f}]"
        print(f"{name:<16} {thresholds[name]:9.3f}  {interval:<44} {np.mean(out != 0):.0%}")

    windows, queries, texts = eval_windows(args.eval, k)
    m = len(windows)
    nll = np.array([[c["nll"] for c in w["candidates"]] for w in windows])
    nll_none = np.array([w["no_passage_nll"] for w in windows])
    rank = np.array([[c["rank_logprob"] for c in w["candidates"]] for w in windows])
    rank_none = np.array([w["no_passage_rank_logprob"] for w in windows])
    bm25 = np.array([[c["bm25"] for c in w["candidates"]] for w in windows])
    cos = cosines(encoder, queries, texts)
    targets = [w["num_targets"] for w in windows]
    at = np.arange(m)
    played = {
        "no retrieval": (nll_none, np.zeros(m, dtype=bool)),
        "BM25 top-1": (nll[:, 0], np.ones(m, dtype=bool)),
    }
    for name, (feature, pick) in {
        "bm25-above": (bm25[:, 0], np.zeros(m, dtype=int)),
        "zero-shot-above": ((rank - rank_none[:, None]).max(1), rank.argmax(1)),
        "cosine-above": (cos.max(1), cos.argmax(1)),
    }.items():
        retrieves = feature >= thresholds[name]
        played[f"{name} ({thresholds[name]:.3f})"] = (np.where(retrieves, nll[at, pick], nll_none), retrieves)
    blocks = dependent_blocks(nll[:, 0] - nll_none)
    bases = ["no retrieval", *(f"{r} ({thresholds[r]:.3f})" for r in ("bm25-above", "cosine-above"))]
    print(f"\n{args.eval}: {m} retrieving windows; token ppl changes, 95% paired block-bootstrap intervals")
    print(f"{'rule':<26} {'retrieves':>9}  " + "  ".join(f"{'vs ' + b:<30}" for b in bases))
    for name, (values, retrieves) in played.items():
        changes = [
            format_change(paired_bootstrap(values, played[b][0], targets, blocks=blocks).as_dict())
            if b != name
            else ""
            for b in bases
        ]
        print(f"{name:<26} {np.mean(retrieves):9.0%}  " + "  ".join(f"{c:<30}" for c in changes))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
