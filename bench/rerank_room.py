"""How much a reranker could learn beyond BM25 from a data-gen folder, and whether cheap text features find it
(why the trained reranker does not beat BM25's top-1 at the demo's scale).

    .venv/bin/python bench/rerank_room.py RUN/rerank-data-XXXXXXXX [--folds 5] [--seed 0]

Reads the reranking data (``ralm-rerank-data/1``: per prefix, its k BM25 candidates with their BM25 scores
and the frozen LM's log-prob of the target given each) and prints, in nats per target:

- the room: the best of k against BM25's top-1, and how often BM25's top-1 is the LM's best;
- how much BM25's own order says about the LM's gain: the within-prefix correlation of the BM25 score and
  the target log-prob, and the top-1 against the top-2 where their scores are close or far apart;
- cross-fitted rules over text features a small learner could find (BM25 z-score, rank, word overlap of
  the passage with the whole prefix, passage length, how many candidates share its book), each a linear
  score fitted with the paper's marginal loss (-log sum_i softmax(w.f)_i p_LM(y|d_i)) on the other folds
  of documents and judged on its own fold: its pick against BM25's top-1, with a paired bootstrap 95%
  interval whose blocks are documents.

Only data-gen's training text is read (no dev or test book): a diagnostic, it chooses nothing the demo uses.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

import datasets
import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from ralm.rerank.inputs import bm25_prior
from ralm.statistics import paired_mean_difference

WORD = re.compile(r"[a-z]+")
FEATURES = ("bm25 z", "bm25 rank", "prefix overlap", "length", "same book")


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def features(row: dict) -> np.ndarray:
    """(k, len(FEATURES)) features of one prefix's candidates, none of which reads the target."""
    z = bm25_prior(row["bm25_scores"])  # the trained reranker's own prior: z within the group
    prefix = words(row["prefix"])
    books = Counter(row["candidate_doc_ids"])
    k = len(z)
    out = []
    for i, text in enumerate(row["candidate_texts"]):
        passage = words(text)
        overlap = len(passage & prefix) / max(len(prefix), 1)
        out.append([z[i], -i / k, overlap, len(text.split()) / 100.0, books[row["candidate_doc_ids"][i]] / k])
    return np.asarray(out, np.float64)


def marginal_loss(w: np.ndarray, feats: np.ndarray, logprobs: np.ndarray, l2: float) -> float:
    """The mean of -log sum_i softmax(feats @ w)_i exp(logprobs_i) over prefixes, plus an L2 penalty."""
    s = feats @ w
    picked = logsumexp(s - logsumexp(s, axis=1, keepdims=True) + logprobs, axis=1)
    return -float(picked.mean()) + l2 * float(w @ w)


def fit(feats: np.ndarray, logprobs: np.ndarray, columns: list[int], l2: float) -> np.ndarray:
    args = (feats[:, :, columns], logprobs, l2)
    return minimize(marginal_loss, np.zeros(len(columns)), args=args, method="L-BFGS-B").x


def cross_fitted_picks(
    feats: np.ndarray, logprobs: np.ndarray, docs: list[str], columns: list[int], folds: int, seed: int
) -> np.ndarray:
    """Each prefix's pick by the rule fitted on the other folds of documents."""
    names = sorted(set(docs))
    fold_of = dict(zip(names, np.random.default_rng(seed).permutation(len(names)) % folds, strict=True))
    fold = np.array([fold_of[d] for d in docs])
    picks = np.zeros(len(docs), int)
    for f in range(folds):
        w = fit(feats[fold != f], logprobs[fold != f], columns, l2=1e-3)
        picks[fold == f] = np.argmax(feats[fold == f][:, :, columns] @ w, axis=1)
    return picks


def interval(a: np.ndarray, b: np.ndarray, docs: list[str]) -> str:
    d = paired_mean_difference(a, b, blocks=docs, resamples=2000, seed=0, level=0.95)
    return f"{d.difference:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"


def load_groups(path: str) -> tuple[list[dict], list[str], np.ndarray, int]:
    """The prefixes with a full group of k candidates (the rules' arrays are dense), their documents, their
    (prefixes, k) target log-probs, and how many prefixes the folder holds."""
    table = datasets.load_from_disk(path)
    table = table.remove_columns(["lm_token_logprobs", "no_retrieval_token_logprobs"])
    k = max(len(r) for r in table["lm_logprobs"])
    rows = [r for r in table if len(r["lm_logprobs"]) == k]
    logprobs = np.array([r["lm_logprobs"] for r in rows], np.float64)
    return rows, [r["doc_id"] for r in rows], logprobs, len(table)


def within_prefix_correlations(scores, logprobs: np.ndarray) -> list[float]:
    """Per prefix, the correlation of a score of its k candidates with their target log-probs; prefixes
    whose k scores are all equal (NaN) are left out."""
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = [np.corrcoef(s, lp)[0, 1] for s, lp in zip(scores, logprobs, strict=True)]
    return [c for c in corr if np.isfinite(c)]


def print_pick(label: str, picks: np.ndarray, logprobs: np.ndarray, docs: list[str]) -> None:
    """A rule's pick per prefix against BM25's top-1, with its interval and how often it keeps the top-1."""
    chosen = logprobs[np.arange(len(picks)), picks]
    print(
        f"  {label:24s} {interval(chosen, logprobs[:, 0], docs)}  (top-1 kept on {np.mean(picks == 0):.0%})"
    )


def print_bm25_order(rows: list[dict], docs: list[str], logprobs: np.ndarray) -> None:
    """What BM25's order among its top k says about the LM's gain."""
    top1_best = np.mean(np.argmax(logprobs, axis=1) == 0)
    print(f"BM25 top-1 is the LM's best on {top1_best:.0%} of prefixes")
    corr = within_prefix_correlations([r["bm25_scores"] for r in rows], logprobs)
    print(
        f"within-prefix correlation of BM25 score and target log-prob: mean {np.mean(corr):+.3f} "
        f"({len(corr)} prefixes)"
    )
    gap = np.array([r["bm25_scores"][0] - r["bm25_scores"][1] for r in rows])
    cut = float(np.median(gap))
    for name, inside in (("close", gap < cut), ("far apart", gap >= cut)):
        picked = [d for d, keep in zip(docs, inside, strict=True) if keep]
        change = interval(logprobs[inside, 0], logprobs[inside, 1], picked)
        print(
            f"top-1 - top-2 where their BM25 scores are {name} (median gap {cut:.2f}, "
            f"{inside.sum()} prefixes): {change}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", help="a data-gen output folder")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows, docs, logprobs, total = load_groups(args.data)
    top1, best = logprobs[:, 0], logprobs.max(axis=1)
    print(
        f"{len(rows)} prefixes with all {logprobs.shape[1]} candidates (of {total}), {len(set(docs))} "
        "documents; nats per target, 95% intervals"
    )
    print(f"room: best of k - BM25 top-1 {interval(best, top1, docs)}")
    print_bm25_order(rows, docs, logprobs)
    feats = np.stack([features(r) for r in rows])
    print(f"cross-fitted feature rules ({args.folds} folds of documents), pick - BM25 top-1:")
    rules = [(FEATURES[0], [0]), ("all five", list(range(len(FEATURES))))]
    rules += [(f"bm25 z + {FEATURES[c]}", [0, c]) for c in range(2, len(FEATURES))]
    for label, columns in rules:
        print_pick(
            label, cross_fitted_picks(feats, logprobs, docs, columns, args.folds, args.seed), logprobs, docs
        )


if __name__ == "__main__":
    main()
