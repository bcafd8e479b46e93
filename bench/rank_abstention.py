"""When to retrieve: BM25's score against the LM's own y' gain, each a threshold fitted on other documents.

    .venv/bin/python bench/rank_abstention.py RUN/rerank-data-XXXXXXXX [--folds 5] [--seed 0] \
        [--tables RUN/eval-*/candidates.jsonl]

Two abstention rules of the export decision, judged on data-gen's rows alone (training books; no LM runs:
the rows hold every label they need):

- ``bm25-above``: BM25's top-1 when its score is at least T;
- ``zero-shot-above``: the zero-shot pick (the candidate under which the LM finds the prefix's last tokens
  y' most likely) when it raises y's log-prob over no passage by at least M nats.

Each threshold is fitted (``ralm.train.selection.best_threshold``, the decision's own fit) on the other
folds of documents and applied to its own fold, so every prefix is judged by a threshold that never saw its
document. Printed in nats per target against no retrieval and between the rules, with paired bootstrap 95%
intervals (documents as blocks), beside the share of prefixes each rule retrieves on, the zero-shot rule
without abstention and the best of k or none (a bound), and how well each rule's score predicts its pick's
gain (the correlation over prefixes). A diagnostic on training books: it chooses nothing.

With ``--tables`` (``ralm eval ppl --compare`` tables that ranked, format 4), per table: on its retrieving
windows, the median y' gain of the zero-shot pick and the windows where it reaches M fitted on every
data-gen prefix (the rule's row in the demo's table reads the same M).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from rerank_room import interval  # bench/ runs as the script folder: its siblings import by name

from ralm.eval.ppl.records import WindowScores
from ralm.passage_rules import rank_gain
from ralm.train.decision import rank_gain_columns
from ralm.train.scalar_init import read_rule_columns
from ralm.train.selection import best_threshold


def cross_fitted(score: np.ndarray, value: np.ndarray, none: np.ndarray, folds: list[np.ndarray]) -> tuple:
    """Per prefix, the rule "value where score >= T else none" with T fitted on the other folds, and where
    it retrieved."""
    out, retrieved = none.copy(), np.zeros(len(none), bool)
    for held in folds:
        train = np.ones(len(none), bool)
        train[held] = False
        threshold = best_threshold(score[train].tolist(), (value[train] - none[train]).tolist())
        retrieved[held] = score[held] >= threshold
        out[held] = np.where(retrieved[held], value[held], none[held])
    return out, retrieved


def print_table_gains(path: str, threshold: float) -> None:
    """On an eval table's retrieving windows: the zero-shot pick's median y' gain and where it reaches M."""
    with open(path) as f:
        rows = [WindowScores.from_json(json.loads(line)) for line in f]
    if any(r.candidates and r.no_passage_rank_logprob is None for r in rows):
        raise SystemExit(f"{path}: no y' with no passage (a table of format 3, or one that did not rank)")
    gains = np.array([rank_gain(r) for r in rows if r.candidates])
    print(
        f"{path}: {len(gains)} retrieving windows, median y' gain {np.median(gains):.2f} nats, "
        f"{int((gains >= threshold).sum())} reach M"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="a ralm data-gen folder (format ralm-rerank-data/2)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tables", nargs="*", default=[], help="eval tables (candidates.jsonl) to read M on")
    args = parser.parse_args()

    import datasets

    ds = datasets.load_from_disk(args.data)
    rows = [i for i, s in enumerate(ds["bm25_scores"]) if s]  # a threshold needs a candidate
    docs = [ds["doc_id"][i] for i in rows]
    rank = rank_gain_columns(args.data, rows)
    if rank is None:
        raise SystemExit(f"{args.data}: no y' columns (format ralm-rerank-data/1)")
    bm25 = read_rule_columns(args.data, rows)
    none = bm25.none
    names = sorted(set(docs))
    np.random.default_rng(args.seed).shuffle(names)
    fold_of = {d: i % args.folds for i, d in enumerate(names)}
    folds = [np.array([j for j, d in enumerate(docs) if fold_of[d] == f]) for f in range(args.folds)]
    above, above_at = cross_fitted(bm25.best_bm25, bm25.top1, none, folds)
    ranked, ranked_at = cross_fitted(rank.gain, rank.picked, none, folds)
    bound = np.maximum(np.array([max(lp) for lp in bm25.logprobs]), none)
    print(f"{len(rows)} prefixes of {len(names)} documents, {args.folds} folds of them (seed {args.seed})")
    print("nats per target against no retrieval, 95% CI (blocks: documents); share of prefixes retrieved")
    for label, values, share in (
        ("BM25 top-1", bm25.top1, 1.0),
        ("zero-shot", rank.picked, 1.0),
        ("bm25-above (T cross-fitted)", above, above_at.mean()),
        ("zero-shot-above (M cross-fitted)", ranked, ranked_at.mean()),
        ("bound: best of k or none", bound, None),
    ):
        shown = "" if share is None else f"   retrieves {share:.0%}"
        print(f"  {label:34s} {interval(values, none, docs)}{shown}")
    print(f"zero-shot-above - bm25-above: {interval(ranked, above, docs)}")
    corr_rank = np.corrcoef(rank.gain[np.isfinite(rank.gain)], (rank.picked - none)[np.isfinite(rank.gain)])
    corr_bm25 = np.corrcoef(bm25.best_bm25, bm25.top1 - none)
    print(
        f"correlation of each score with its pick's gain: y' gain {corr_rank[0, 1]:.2f}, "
        f"BM25 {corr_bm25[0, 1]:.2f}"
    )
    every = best_threshold(rank.gain.tolist(), (rank.picked - none).tolist())
    print(f"M fitted on every prefix: {every:.3f}")
    for path in args.tables:
        print_table_gains(path, every)


if __name__ == "__main__":
    main()
