"""What ``ralm train`` exports: the selected checkpoint, BM25 itself, or no retrieval, decided on prefixes
that chose nothing.

The held-out documents are split in two (``ralm.rerank.dataset``): the *selection* prefixes are validated
every ``--val-every`` steps and choose the best checkpoint (by gain recovered); the *decision* prefixes,
from other documents, are scored once at the end, for that checkpoint only (``ralm.rerank.decision``).
Choosing the best of many steps on the prefixes that then judge it would fool itself: with a reranker of
no skill, the old same-prefix flow exported "trained" in 6% of runs with one validation step, 16% with six
and 35% with fifteen (issue 23); on disjoint prefixes the rate stays at the interval's own 2.5%
(tests/test_rerank_decision.py). The decision compares three rules on the decision prefixes:

- ``trained``: the selected checkpoint's picks;
- ``bm25``: BM25's top-1 (candidate 0), always available (with ``--bm25-prior`` the export holds the
  step-0 model, which ranks exactly as BM25);
- ``no-retrieval``: never prepend a passage (only with ``--abstain``).

A rule replaces the simpler ones (no retrieval, then BM25, then trained) only when it beats each of them
with a paired 95% bootstrap interval of the mean log-prob difference above zero
(``ralm.statistics.paired_mean_difference``, the prefixes of one document drawn together:
``decision_blocks``). Inside the interval it is a tie, and a tie goes to the simpler rule: a tie
between BM25 and no retrieval exports no retrieval, a tie between trained and BM25 exports BM25. The rule
is fixed before any run; the comparisons are recorded with the decision, each with the smallest
difference it could detect (``detectable_difference``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import NormalDist

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from ralm.statistics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    MIN_BLOCKS,
    dependent_blocks,
    paired_mean_difference,
)

CHOICES = ("no-retrieval", "bm25", "trained")
"""In order of preference at a tie."""
POWER = 0.8
"""The power at which ``detectable_difference`` is stated (with the interval's two-sided level)."""


def detectable_difference(low: float, high: float, level: float = 0.95, power: float = POWER) -> float:
    """The smallest true mean difference a comparison detects with probability `power`: (z_{1-α/2} + z_power)
    x SE, 2.80 x SE for 80% power at a two-sided 5% level, with SE = (high - low) / (2 z_{1-α/2}) read off
    the bootstrap interval [low, high] (its width in standard errors under a normal sampling distribution)."""
    z_level = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)
    if not (math.isfinite(low) and math.isfinite(high)):
        return math.nan
    return (z_level + NormalDist().inv_cdf(power)) * (high - low) / (2.0 * z_level)


def decision_blocks(differences: np.ndarray, documents: Sequence[Hashable] | None) -> tuple[list | None, str]:
    """Block labels for the decision's bootstrap, and what they follow: whole ``documents`` (a cluster
    bootstrap) when there are at least ``MIN_BLOCKS``; with fewer, runs of neighbouring prefixes within a
    document, their length sized from the differences (``dependent_blocks``); ``items`` without documents.

    Whole documents, not data-sized runs, because prefixes sampled from one document share its topic and
    how much retrieval helps there, more than they depend on their neighbours: in a simulation of a
    skill-less reranker with a per-document effect (20 documents of 5 prefixes, the document effect a
    fifth of the variance) the one-sided false-export rate was 3.7% with documents as blocks, 7.5% with
    data-sized runs (their length estimated at 1 from 100 prefixes) and 8.0% per prefix (nominal 2.5%)."""
    if documents is None:
        return None, "items"
    if len(set(documents)) >= MIN_BLOCKS:
        return list(documents), "documents"
    return dependent_blocks(differences, documents), "neighbours"


def export_decision(
    values: dict[str, Sequence[float] | None],
    *,
    documents: Sequence[Hashable] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[str, dict[str, dict]]:
    """The rule to export and the comparisons behind it.

    `values` maps names of CHOICES to per-prefix log-probs on the same decision prefixes (None: the rule
    is not available), ordered by (document, position); `documents` gives each prefix's document, and the
    bootstrap then draws prefixes of one document together (``decision_blocks``; None: each prefix alone).
    The most complex available rule that beats every simpler available one (interval above zero) wins;
    with none, the simplest available (a tie goes to the simpler rule); "trained" when nothing can be
    compared.
    """
    available = [name for name in CHOICES if values.get(name) is not None]
    comparisons: dict[str, dict] = {}
    choice = available[0] if available else "trained"
    for i, name in enumerate(available[1:], start=1):
        wins = True
        for simpler in available[:i]:
            a, b = np.asarray(values[name], np.float64), np.asarray(values[simpler], np.float64)
            blocks, blocked_by = decision_blocks(a - b, documents)
            diff = paired_mean_difference(a, b, blocks=blocks, resamples=resamples, seed=seed)
            comparisons[f"{name} - {simpler}"] = {
                **diff.as_dict(),
                "blocked_by": blocked_by,
                "detectable_difference": detectable_difference(diff.low, diff.high, diff.level),
            }
            wins = wins and diff.better
        if wins:
            choice = name
    return choice, comparisons


class ValidationHistory(Callback):
    """Keeps every validation step's ``val/`` metrics (the Trainer only keeps the last ones)."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, dict[str, float]]] = []
        self.per_prefix: dict[int, torch.Tensor] = {}
        """Step -> (selection prefixes, 3) log-probs given the pick, BM25's top-1, no passage
        (RerankerModule): what each validation saw, kept with the run (the export is decided on other
        prefixes)."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        self.steps.append((trainer.global_step, metrics))
        rows = getattr(pl_module, "val_per_prefix", None)
        if rows is not None:
            self.per_prefix[trainer.global_step] = rows

    # Kept in every checkpoint (Lightning saves a callback's state): after a resume, the history still
    # has the steps validated before the kill (the checkpoint callback's best may be one of them).
    def state_dict(self) -> dict:
        return {
            "steps": self.steps,
            "per_prefix": {step: rows.tolist() for step, rows in self.per_prefix.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.steps = [(int(step), dict(metrics)) for step, metrics in state.get("steps", [])]
        rows = state.get("per_prefix", {})
        self.per_prefix = {int(step): torch.tensor(r, dtype=torch.float64) for step, r in rows.items()}

    def last(self, key: str) -> float | None:
        """The latest logged value of `key` (validation baselines are the same at every step)."""
        for _, metrics in reversed(self.steps):
            if key in metrics:
                return metrics[key]
        return None

    def step_at_score(self, monitor: str, score: float | None) -> int | None:
        """The first step whose `monitor` equals `score` (the checkpoint callback's best)."""
        if score is None:
            return None
        for step, metrics in self.steps:
            if abs(metrics.get(monitor, float("nan")) - score) <= 1e-9:
                return step
        return None

    def at_score(self, monitor: str, score: float | None) -> dict[str, float]:
        """The metrics of the step `step_at_score` finds ({} when none)."""
        return self.at_step(self.step_at_score(monitor, score))

    def at_step(self, step: int | None) -> dict[str, float]:
        """The metrics validated at `step` ({} when none)."""
        return next((metrics for s, metrics in self.steps if s == step), {})


def bm25_threshold(best_bm25: Sequence[float], gains: Sequence[float]) -> float:
    """The reviewer's rule fitted on training prefixes: retrieve BM25's top-1 only when the best BM25 score
    is at least T, with T maximising the summed gain of top-1 over no retrieval (`gains`, one per prefix).

    T is one of the observed scores; ``math.inf`` (never retrieve) when no threshold gains anything.
    The rule is what a reranker with abstention must beat to have learned more than "strong match".
    """
    if len(best_bm25) != len(gains):
        raise ValueError(f"{len(best_bm25)} scores but {len(gains)} gains")
    order = sorted(range(len(gains)), key=lambda i: -best_bm25[i])
    best_total, threshold, total = 0.0, math.inf, 0.0
    for rank, i in enumerate(order):
        total += gains[i]
        # Only cut between distinct scores: prefixes with equal scores are on the same side of any T.
        next_score = best_bm25[order[rank + 1]] if rank + 1 < len(order) else -math.inf
        if next_score < best_bm25[i] and total > best_total:
            best_total, threshold = total, best_bm25[i]
    return threshold


def fit_bm25_threshold(data_dir: str) -> float:
    """``bm25_threshold`` on every row of a ``ralm data-gen`` dataset (gain: summed log-probs of the
    target)."""
    import datasets

    ds = datasets.load_from_disk(data_dir).select_columns(
        ["bm25_scores", "lm_logprobs", "no_retrieval_logprob"]
    )
    rows = [r for r in ds if r["bm25_scores"]]
    return bm25_threshold(
        [max(r["bm25_scores"]) for r in rows], [r["lm_logprobs"][0] - r["no_retrieval_logprob"] for r in rows]
    )
