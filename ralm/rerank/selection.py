"""What ``ralm train`` exports: the best checkpoint, BM25 itself, or no retrieval, decided on validation.

Every validation step logs the mean LM log-prob of the target given the reranker's pick, given BM25's
top-1 and (``--abstain``) given no passage. The best step (by gain recovered, as the checkpoint callback
keeps it) then competes with the two fixed rules on the same validation prefixes:

- ``trained``: the best checkpoint, used as trained;
- ``bm25``: the untrained ``--bm25-prior`` model, which ranks exactly as BM25 (only with the prior);
- ``no-retrieval``: never prepend a passage (only with ``--abstain``, where validation has its log-prob).

A rule replaces the simpler ones (no retrieval, then BM25, then trained) only when it beats each of them
on the validation prefixes with a paired bootstrap 95% interval of the mean log-prob difference above zero
(``ralm.statistics.paired_mean_difference``); inside the interval it is a tie, and a tie goes to the simpler
rule: a trained model that did not clearly beat a fixed rule on held-out prefixes has no evidence for its
picks. The comparisons and the number of prefixes are recorded with the decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback

from ralm.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED, paired_mean_difference

CHOICES = ("no-retrieval", "bm25", "trained")
"""In order of preference at a tie."""


def export_decision(
    values: dict[str, Sequence[float] | None], *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> tuple[str, dict[str, dict]]:
    """The rule to export and the comparisons behind it.

    `values` maps names of CHOICES to per-prefix log-probs on the same validation prefixes (None: the rule
    is not available). The most complex available rule that beats every simpler available one (interval
    above zero) wins; with none, the simplest available; "trained" when nothing can be compared.
    """
    available = [name for name in CHOICES if values.get(name) is not None]
    comparisons: dict[str, dict] = {}
    choice = available[0] if available else "trained"
    for i, name in enumerate(available[1:], start=1):
        wins = True
        for simpler in available[:i]:
            diff = paired_mean_difference(values[name], values[simpler], resamples=resamples, seed=seed)
            comparisons[f"{name} - {simpler}"] = diff.as_dict()
            wins = wins and diff.better
        if wins:
            choice = name
    return choice, comparisons


class ValidationHistory(Callback):
    """Keeps every validation step's ``val/`` metrics (the Trainer only keeps the last ones)."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, dict[str, float]]] = []
        self.per_prefix: dict[int, torch.Tensor] = {}
        """Step -> (prefixes, 3) log-probs given the pick, BM25's top-1, no passage (RerankerModule)."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        self.steps.append((trainer.global_step, metrics))
        rows = getattr(pl_module, "val_per_prefix", None)
        if rows is not None:
            self.per_prefix[trainer.global_step] = rows

    # Kept in every checkpoint (Lightning saves a callback's state): after a resume, the decision still
    # has the per-prefix rows of steps validated before the kill.
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
        step = self.step_at_score(monitor, score)
        return next((metrics for s, metrics in self.steps if s == step), {})

    def decision_values(
        self, step: int | None, *, trained: bool, bm25: bool, none: bool
    ) -> dict[str, list[float] | None]:
        """Per-prefix log-probs of the three rules at `step` (the pick's is that step's; BM25's and no
        retrieval's are the same at every step), each None when not available."""
        rows = self.per_prefix.get(step)
        if rows is None:  # no best step: the fixed rules only, from any step
            trained = False
            rows = next(reversed(self.per_prefix.values()), None)
        if rows is None:
            return dict.fromkeys(CHOICES)
        columns = {"trained": (trained, 0), "bm25": (bm25, 1), "no-retrieval": (none, 2)}
        return {name: rows[:, col].tolist() if ok else None for name, (ok, col) in columns.items()}


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
    """``bm25_threshold`` on every row of a ``ralm data-gen`` dataset (gain: summed log-probs of the target)."""
    import datasets

    ds = datasets.load_from_disk(data_dir).select_columns(
        ["bm25_scores", "lm_logprobs", "no_retrieval_logprob"]
    )
    rows = [r for r in ds if r["bm25_scores"]]
    return bm25_threshold(
        [max(r["bm25_scores"]) for r in rows], [r["lm_logprobs"][0] - r["no_retrieval_logprob"] for r in rows]
    )
