"""Checkpoint selection's record (``ValidationHistory``) and the reviewer's threshold rule.

The held-out documents are split in two (``ralm.train.dataset``): the *selection* prefixes are validated
every ``--val-every`` steps (and at step 0, the model before any step) and choose the best checkpoint by
gain recovered; the *decision* prefixes, from other documents, are scored once at the end for that
checkpoint and decide the export (``ralm.train.decision``). Choosing the best of
many steps on the prefixes that then judge it would fool itself: with a reranker of no skill, the old
same-prefix flow exported "trained" in 6% of runs with one validation step, 16% with six and 35% with
fifteen (issue 23).

``bm25_threshold`` fits the rule "BM25's top-1 only when its score is at least T" on training prefixes:
a rule of the export decision, the reranker's starting point (``ralm.train.scalar_init``) and a row of
every report. ``best_threshold`` is its fit for any score (the zero-shot rule's y' gain,
``ralm.train.decision``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback


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
    score per prefix): T is one of the observed scores, ``math.inf`` (never act) when no T gains anything."""
    if len(scores) != len(gains):
        raise ValueError(f"{len(scores)} scores but {len(gains)} gains")
    order = sorted(range(len(gains)), key=lambda i: -scores[i])
    best_total, threshold, total = 0.0, math.inf, 0.0
    for rank, i in enumerate(order):
        total += gains[i]
        # Only cut between distinct scores: prefixes with equal scores are on the same side of any T.
        next_score = scores[order[rank + 1]] if rank + 1 < len(order) else -math.inf
        if next_score < scores[i] and total > best_total:
            best_total, threshold = total, scores[i]
    return threshold


def bm25_threshold(best_bm25: Sequence[float], gains: Sequence[float]) -> float:
    """The reviewer's rule fitted on training prefixes: retrieve BM25's top-1 only when the best BM25 score
    is at least T, with T maximising the summed gain of top-1 over no retrieval (`gains`, one per prefix;
    ``best_threshold``). The rule is what a reranker with abstention must beat to have learned more than
    "strong match"."""
    return best_threshold(best_bm25, gains)


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
