"""Checkpoint selection's record (``ValidationHistory``) and the reviewer's threshold rule.

The held-out documents are split in two (``ralm.train.dataset``): the *selection* prefixes are validated
every ``--val-every`` steps (and at step 0, the model before any step) and choose the best checkpoint by
gain recovered; the *decision* prefixes, from other documents, are scored once at the end for that
checkpoint and decide the export (``ralm.train.decision``). Choosing the best of
many steps on the prefixes that then judge it would fool itself: with a reranker of no skill, the old
same-prefix flow exported "trained" in 6% of runs with one validation step, 16% with six and 35% with
fifteen.

``bm25_threshold`` fits the rule "BM25's top-1 only when its score is at least T" on training prefixes:
a rule of the export decision, the reranker's starting point (``ralm.train.scalar_init``) and a row of
every report. ``best_threshold`` is the fit for any score, ``bagged_threshold`` its stable form, which
every rule's threshold uses (T here, M of the zero-shot rule's abstention in ``ralm.train.decision``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

BAGS = 201
"""Resamples of documents in ``bagged_threshold``: odd, so its median is one resample's fit."""


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


def best_threshold(scores: Sequence[float], gains: Sequence[float]) -> float:
    """The T that maximises the summed `gains` of the prefixes whose score is at least T (one gain and one
    score per prefix): T is one of the observed scores, ``math.inf`` (never act) when no T gains anything.
    Of equal sums the highest T (the first cut from the top)."""
    if len(scores) != len(gains):
        raise ValueError(f"{len(scores)} scores but {len(gains)} gains")
    score = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-score, kind="stable")
    ranked = score[order]
    totals = np.cumsum(np.asarray(gains, dtype=np.float64)[order])  # sequential, as a loop would add
    # Only cut between distinct scores: prefixes with equal scores are on the same side of any T.
    cuts = ranked > np.append(ranked[1:], -math.inf)
    if not cuts.any():
        return math.inf
    best = int(np.argmax(np.where(cuts, totals, -math.inf)))
    return float(ranked[best]) if totals[best] > 0 else math.inf


def bagged_threshold(
    scores: Sequence[float],
    gains: Sequence[float],
    groups: Sequence[str],
    *,
    resamples: int = BAGS,
    seed: int = 0,
) -> float:
    """``best_threshold`` made stable: the median of its fits on `resamples` bootstrap resamples of whole
    `groups` (documents; prefixes of one document are not independent), seeded, so the same rows give the
    same T. One group: the plain fit.

    Why: the plain fit is the argmax of a sum of heavy-tailed gains, and a few documents the corpus retells
    decide it. On the full demo's 150 training prefixes per seed it gave M = 3, 26 and 4.4 nats with the
    split; bagging (Breiman 1996) averages that choice over resamples. The median, not the mean: it is one
    resample's fit (an observed score, which ``ralm.train.scalar_init`` relies on) and may be ``math.inf``
    (never act) when most resamples gain nothing."""
    if len(groups) != len(scores):
        raise ValueError(f"{len(scores)} scores but {len(groups)} groups")
    if len(set(groups)) < 2:
        return best_threshold(scores, gains)
    score, gain = np.asarray(scores, dtype=np.float64), np.asarray(gains, dtype=np.float64)
    names, group_of = np.unique(np.asarray(list(groups), dtype=str), return_inverse=True)
    members = [np.flatnonzero(group_of == g) for g in range(len(names))]
    rng = np.random.default_rng(seed)
    fits = []
    for _ in range(resamples):
        rows = np.concatenate([members[g] for g in rng.integers(0, len(names), len(names))])
        fits.append(best_threshold(score[rows], gain[rows]))
    return float(sorted(fits)[(resamples - 1) // 2])


def bm25_threshold(best_bm25: Sequence[float], gains: Sequence[float], documents: Sequence[str]) -> float:
    """The reviewer's rule fitted on training prefixes: retrieve BM25's top-1 only when the best BM25 score
    is at least T, with T maximising the summed gain of top-1 over no retrieval (`gains`, one per prefix;
    ``bagged_threshold`` over the prefixes' `documents`). The rule is what a reranker with abstention must
    beat to have learned more than "strong match"."""
    return bagged_threshold(best_bm25, gains, documents)
