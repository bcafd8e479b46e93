"""What ``ralm train`` exports: the best checkpoint, BM25 itself, or no retrieval, decided on validation.

Every validation step logs the mean LM log-prob of the target given the reranker's pick, given BM25's
top-1 and (``--abstain``) given no passage. The best step (by gain recovered, as the checkpoint callback
keeps it) then competes with the two fixed rules on the same validation prefixes:

- ``trained``: the best checkpoint, used as trained;
- ``bm25``: the untrained ``--bm25-prior`` model, which ranks exactly as BM25 (only with the prior);
- ``no-retrieval``: never prepend a passage (only with ``--abstain``, where validation has its log-prob).

The highest mean log-prob wins; a tie goes to the simpler rule (no retrieval, then BM25): a trained
model that did not beat a fixed rule on held-out prefixes has no evidence for its picks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

CHOICES = ("no-retrieval", "bm25", "trained")
"""In order of preference at a tie."""


def export_choice(trained: float | None, bm25: float | None, none: float | None) -> str:
    """The rule with the highest validation mean log-prob among those available (None: not available)."""
    values = dict(zip(CHOICES, (none, bm25, trained), strict=True))
    # (value, preference): at equal values the earlier entry of CHOICES wins.
    available = [(v, -CHOICES.index(name), name) for name, v in values.items() if v is not None]
    if not available:
        return "trained"
    return max(available)[2]


class ValidationHistory(Callback):
    """Keeps every validation step's ``val/`` metrics (the Trainer only keeps the last ones)."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, dict[str, float]]] = []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        self.steps.append((trainer.global_step, metrics))

    def last(self, key: str) -> float | None:
        """The latest logged value of `key` (validation baselines are the same at every step)."""
        for _, metrics in reversed(self.steps):
            if key in metrics:
                return metrics[key]
        return None

    def at_score(self, monitor: str, score: float | None) -> dict[str, float]:
        """The metrics of the first step whose `monitor` equals `score` (the checkpoint callback's best)."""
        if score is None:
            return {}
        for _, metrics in self.steps:
            if abs(metrics.get(monitor, float("nan")) - score) <= 1e-9:
                return metrics
        return {}


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
