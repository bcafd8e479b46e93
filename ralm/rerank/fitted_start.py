"""T of the threshold rule and the reranker's start, fitted once on the training prefixes before training
(``ralm.rerank.fit``): the export decision and the start both use this one T (``ralm.rerank.scalar_init``)."""

from __future__ import annotations

from typing import NamedTuple

from ralm.rerank.dataset import RerankData, bm25_top_stats
from ralm.rerank.scalar_init import fit_threshold, read_rule_columns, threshold_start
from ralm.rerank.settings import OptimOptions


class FittedStart(NamedTuple):
    """What the training prefixes fix before training: T of the threshold rule (``--abstain``), and with
    ``--bm25-prior`` too the untrained model's start and the module arguments that carry it."""

    threshold: float | None
    start: dict | None
    hparams: dict


def fit_start(
    data: str, rerank_data: RerankData, optim: OptimOptions, *, abstain: bool, bm25_prior: bool
) -> FittedStart:
    """T, fitted once on the training prefixes: both a rule of the export decision and (with the prior)
    the start, so neither reads and fits the same rows again."""
    if not abstain:
        return FittedStart(None, None, {})
    rule_columns = read_rule_columns(data, rerank_data.train_rows).with_candidates()
    threshold = fit_threshold(rule_columns)
    if not bm25_prior:
        return FittedStart(threshold, None, {})
    mean, std = bm25_top_stats(data, rerank_data.train_rows)
    # the untrained model is the threshold rule fitted on the training prefixes (ralm.rerank.scalar_init)
    start = threshold_start(rule_columns, threshold, mean, std, optim.loss, optim.temperature)
    hparams = {
        "bm25_top_mean": mean,
        "bm25_top_std": std,
        "abstain_anchor": "top",
        "abstain_init": tuple(start["abstain_init"]),
    }
    return FittedStart(threshold, start, hparams)
