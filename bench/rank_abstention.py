"""When to retrieve: BM25's score against the LM's own y' gain, each a threshold fitted on other documents.

    .venv/bin/python bench/rank_abstention.py RUN/rerank-data-XXXXXXXX [--folds 5] [--repeats 5] \
        [--train-seeds 0 1 2] [--tables RUN/eval-*/candidates.jsonl]

Two abstention rules of the export decision, judged on data-gen's rows alone (training books; no LM runs:
the rows hold every label they need):

- ``bm25-above``: BM25's top-1 when its score is at least T;
- ``zero-shot-above``: the zero-shot pick (the candidate under which the LM finds the prefix's last tokens
  y' most likely) when it raises y's log-prob over no passage by at least M nats.

Each threshold is fitted (``ralm.train.selection.bagged_threshold``, the decision's own fit) on the other
folds of documents and applied to its own fold, so every prefix is judged by a threshold that never saw its
document. Printed in nats per target against no retrieval and between the rules, with paired bootstrap 95%
intervals (documents as blocks), beside the share of prefixes each rule retrieves on, the zero-shot rule
without abstention and the best of k or none (a bound), and how well each rule's score predicts its pick's
gain (the correlation over prefixes). A diagnostic on training books: it chooses nothing.

The fit itself, bagged against plain (``best_threshold``, the argmax of the summed gain): the cross-fitted
mean of each over `--repeats` shuffles of the folds, with the thresholds each fold got; and for each
`--train-seeds` split of ``ralm train`` (the demo's fractions), the thresholds fitted on its training
prefixes and on its training and selection prefixes, beside what each gives on its decision prefixes.

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
from ralm.pipeline.scale import FULL
from ralm.train.dataset import load_rerank_data
from ralm.train.scalar_init import rank_gain_columns, read_rule_columns
from ralm.train.selection import bagged_threshold, best_threshold

FITS = {
    "bagged": bagged_threshold,
    "plain": lambda scores, gains, docs: best_threshold(scores, gains),
}
"""The decision's fit and the one it replaced, each (scores, gains, documents) -> threshold."""


def make_folds(docs: np.ndarray, folds: int, seed: int) -> list[np.ndarray]:
    """`folds` sets of prefix indices, whole documents each, in a seeded order."""
    names = sorted(set(docs))
    np.random.default_rng(seed).shuffle(names)
    fold_of = {d: i % folds for i, d in enumerate(names)}
    return [np.array([j for j, d in enumerate(docs) if fold_of[d] == f]) for f in range(folds)]


def cross_fitted(score, value, none, docs, folds: list[np.ndarray], fit=bagged_threshold) -> tuple:
    """Per prefix, the rule "value where score >= T else none" with T fitted on the other folds, where it
    retrieved, and each fold's T."""
    out, retrieved, thresholds = none.copy(), np.zeros(len(none), bool), []
    for held in folds:
        train = np.ones(len(none), bool)
        train[held] = False
        threshold = fit(score[train].tolist(), (value[train] - none[train]).tolist(), docs[train].tolist())
        thresholds.append(threshold)
        retrieved[held] = score[held] >= threshold
        out[held] = np.where(retrieved[held], value[held], none[held])
    return out, retrieved, thresholds


def compare_fits(rules: dict, none: np.ndarray, docs: np.ndarray, folds: int, repeats: int) -> None:
    """Bagged against plain, cross-fitted over `repeats` fold shuffles: each one's mean gain over no
    retrieval and the thresholds its folds got."""
    print(
        f"the fit, cross-fitted on {folds} folds x {repeats} shuffles (nats per target against no retrieval):"
    )
    for rule, (score, value) in rules.items():
        means = {name: [] for name in FITS}
        for seed in range(repeats):
            split = make_folds(docs, folds, seed)
            for name, fit in FITS.items():
                out, _, thresholds = cross_fitted(score, value, none, docs, split, fit)
                means[name].append(float((out - none).mean()))
                print(
                    f"  {rule:16s} {name:6s} shuffle {seed}: {means[name][-1]:+.3f}   thresholds "
                    + " ".join(f"{t:.2f}" for t in thresholds)
                )
        wins = sum(b > p for b, p in zip(means["bagged"], means["plain"], strict=True))
        print(
            f"  {rule:16s} mean: bagged {np.mean(means['bagged']):+.3f}, plain {np.mean(means['plain']):+.3f}"
            f" (bagged higher on {wins} of {repeats} shuffles)"
        )


def compare_splits(path: str, rows: list[int], rules: dict, none, docs, seeds: list[int]) -> None:
    """Per ``ralm train`` seed's split (the full demo's fractions): each rule's threshold fitted on its
    training prefixes and on its training and selection prefixes, by each fit, and that threshold's mean
    gain over no retrieval and share retrieved on the split's decision prefixes."""
    at = {r: j for j, r in enumerate(rows)}
    print("per training seed's split: threshold, then on its decision prefixes mean gain and share retrieved")
    for seed in seeds:
        data = load_rerank_data(
            path,
            abstain=True,
            val_fraction=FULL.val_fraction,
            decision_fraction=FULL.decision_fraction,
            seed=seed,
        )
        parts = {
            "training": np.array([at[r] for r in data.train_rows if r in at]),
            "training+selection": np.array([at[r] for r in data.train_rows + data.val_rows if r in at]),
        }
        decision = np.array([at[r] for r in data.decision_rows if r in at])
        for rule, (score, value) in rules.items():
            cells = []
            for part, f in parts.items():
                for name, fit in FITS.items():
                    t = fit(score[f].tolist(), (value[f] - none[f]).tolist(), docs[f].tolist())
                    on = score[decision] >= t
                    gain = np.where(on, value[decision], none[decision]) - none[decision]
                    cells.append(f"{part}/{name} {t:.2f}: {gain.mean():+.3f}, {on.mean():.0%}")
            print(f"  seed {seed} {rule}: " + " | ".join(cells))


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
    parser.add_argument("--seed", type=int, default=0, help="the folds' shuffle for the main table")
    parser.add_argument("--repeats", type=int, default=5, help="fold shuffles comparing the fits")
    parser.add_argument("--train-seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--tables", nargs="*", default=[], help="eval tables (candidates.jsonl) to read M on")
    args = parser.parse_args()

    import datasets

    ds = datasets.load_from_disk(args.data)
    rows = [i for i, s in enumerate(ds["bm25_scores"]) if s]  # a threshold needs a candidate
    docs = np.array([str(ds["doc_id"][i]) for i in rows])
    rank = rank_gain_columns(args.data, rows)
    if rank is None:
        raise SystemExit(f"{args.data}: no y' columns (format ralm-rerank-data/1)")
    bm25 = read_rule_columns(args.data, rows)
    none = bm25.none
    folds = make_folds(docs, args.folds, args.seed)
    above, above_at, _ = cross_fitted(bm25.best_bm25, bm25.top1, none, docs, folds)
    ranked, ranked_at, _ = cross_fitted(rank.gain, rank.picked, none, docs, folds)
    bound = np.maximum(np.array([max(lp) for lp in bm25.logprobs]), none)
    docs = docs.tolist()
    print(
        f"{len(rows)} prefixes of {len(set(docs))} documents, {args.folds} folds of them (seed {args.seed})"
    )
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
    every = rank.fit()
    print(f"M fitted on every prefix: {every:.3f}")
    for path in args.tables:
        print_table_gains(path, every)
    rules = {"zero-shot-above": (rank.gain, rank.picked), "bm25-above": (bm25.best_bm25, bm25.top1)}
    compare_fits(rules, none, np.array(docs), args.folds, args.repeats)
    compare_splits(args.data, rows, rules, none, np.array(docs), args.train_seeds)


if __name__ == "__main__":
    main()
