"""The reranker's starting point: the threshold rule, fitted on the training prefixes, before any step.

With ``--bm25-prior --abstain`` the untrained model scores a passage ``w * z`` (its BM25 prior; the encoder
head starts at 0) and the empty passage ``w * z_top + b + c * t`` (anchor ``top``, ``RerankerModule``),
t the prefix's best BM25 score standardised over the training prefixes. So with ``c = -k`` and
``b = k * (T - mean) / std`` the model abstains exactly when the best BM25 score is below T: at step 0 it
*is* the rule "BM25's top-1 when its score is at least T" (``ralm.train.selection.bm25_threshold``, T
fitted here on the training prefixes only), and training can only move it away where the loss says so;
checkpoint selection keeps step 0 when no later step does better on the selection prefixes. The
sharpness k (how soft the rule is for the loss) is the one of ``SHARPNESS`` whose training loss is lowest
with the encoder at 0: a fit of one scalar on the training prefixes, no encoder pass.

Pure functions over a dataset's columns; ``ralm.train.fit`` fits T once and calls ``threshold_start``.

T of the threshold rule and the reranker's start, fitted once on the training prefixes before training
(``ralm.train.fit``): the export decision and the start both use this one T (``ralm.train.scalar_init``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ralm.passage_rules import BM25_ABOVE
from ralm.rerank.inputs import bm25_prior
from ralm.train.dataset import RerankData, bm25_top_stats
from ralm.train.losses import MASKED, rerank_loss
from ralm.train.selection import bm25_threshold
from ralm.train.settings import OptimOptions

TIE_MARGIN = 1e-5
"""Subtracted from b: moves the boundary k / std x 1e-5 below T, far below any difference of BM25
scores, far above float32's rounding of b + c t near T."""
SHARPNESS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""The k tried: from nearly flat (the loss hedges between top-1 and no passage) to nearly hard."""


@dataclass(frozen=True)
class RuleColumns:
    """What the rules need of some rows of a ``ralm data-gen`` dataset, row by row."""

    bm25: list[list[float]]
    """BM25 scores of the candidates, BM25 order."""
    logprobs: list[list[float]]
    """LM log-prob of the target given each candidate."""
    none: np.ndarray
    """LM log-prob of the target given no passage."""
    docs: list[str]
    """Each row's source document (a threshold's fit resamples whole documents)."""

    @property
    def best_bm25(self) -> np.ndarray:
        return np.array([max(s, default=-math.inf) for s in self.bm25], dtype=np.float64)

    @property
    def top1(self) -> np.ndarray:
        return np.array([lp[0] for lp in self.logprobs], dtype=np.float64)

    def with_candidates(self) -> RuleColumns:
        """The rows that have at least one candidate passage (a threshold needs a BM25 score)."""
        keep = [i for i, s in enumerate(self.bm25) if s]
        return RuleColumns(
            [self.bm25[i] for i in keep],
            [self.logprobs[i] for i in keep],
            self.none[keep],
            [self.docs[i] for i in keep],
        )

    def above(self, threshold: float) -> np.ndarray:
        """The threshold rule's log-prob per row: BM25's top-1 when its score is at least T, else none."""
        return np.where(self.best_bm25 >= threshold, self.top1, self.none)


def read_rule_columns(path: str, rows: list[int] | None = None) -> RuleColumns:
    """The rows' BM25 scores and LM log-probs (None: every row; rows with no candidate are the caller's to
    drop)."""
    from ralm.train.dataset import open_dataset

    ds = open_dataset(path, abstain=True, bm25_prior=True)
    ds = ds if rows is None else ds.select(rows)
    return RuleColumns(
        bm25=[[float(x) for x in s] for s in ds["bm25_scores"]],
        logprobs=[[float(x) for x in lp] for lp in ds["lm_logprobs"]],
        none=np.asarray(ds["no_retrieval_logprob"], dtype=np.float64),
        docs=[str(d) for d in ds["doc_id"]],
    )


def fit_threshold(columns: RuleColumns) -> float:
    """T on these rows (``bm25_threshold``: the summed gain of top-1 over no passage above T is largest)."""
    return bm25_threshold(columns.best_bm25.tolist(), (columns.top1 - columns.none).tolist(), columns.docs)


def fit_bm25_threshold(data_dir: str) -> float:
    """T on every row of a ``ralm data-gen`` dataset that has a candidate (the pipeline's eval rule), read
    and fitted as ``ralm train`` fits it on its training rows."""
    return fit_threshold(read_rule_columns(data_dir).with_candidates())


def threshold_scalars(threshold: float, mean: float, std: float, sharpness: float) -> tuple[float, float]:
    """(b, c) of the anchor-``top`` empty passage so that abstaining wins exactly when t < T: the margin of
    no passage over BM25's top-1 is k (T - best) / std, less ``TIE_MARGIN`` so that a best score of exactly
    T (T is an observed score) retrieves, as the rule does, whatever float32 rounding makes of the two
    terms. T infinite (never retrieve): b = k, c = 0."""
    if not math.isfinite(threshold):
        return (sharpness if threshold > 0 else -sharpness), 0.0
    return sharpness * (threshold - mean) / std - TIE_MARGIN, -sharpness


def start_loss(
    columns: RuleColumns, scalars: tuple[float, float], mean: float, std: float, loss: str, temperature: float
) -> float:
    """The training loss of the untrained model (encoder at 0, prior weight 1) with these (b, c)."""
    b, c = scalars
    k = max(len(s) for s in columns.bm25) + 1
    scores = torch.full((len(columns.bm25), k), MASKED, dtype=torch.float64)
    lm = torch.zeros_like(scores)
    mask = torch.zeros_like(scores, dtype=torch.bool)
    for i, (bm25, logprobs) in enumerate(zip(columns.bm25, columns.logprobs, strict=True)):
        z = bm25_prior(bm25)
        n = len(z)
        scores[i, :n] = torch.tensor(z, dtype=torch.float64)
        t = (max(bm25) - mean) / std
        scores[i, n] = b + c * t + max(z)
        lm[i, :n] = torch.tensor(logprobs, dtype=torch.float64)
        lm[i, n] = columns.none[i]
        mask[i, : n + 1] = True
    return float(rerank_loss(loss, scores, lm, mask, temperature))


def threshold_start(
    columns: RuleColumns, threshold: float, mean: float, std: float, loss: str, temperature: float = 1.0
) -> dict:
    """The fitted start on the training prefixes' `columns` and their T (``fit_threshold``): the sharpness
    k and the scalars (b, c), with the loss at each k tried (summary.json's ``start``)."""
    losses = {
        k: start_loss(columns, threshold_scalars(threshold, mean, std, k), mean, std, loss, temperature)
        for k in SHARPNESS
    }
    sharpness = min(losses, key=losses.get)
    bias, slope = threshold_scalars(threshold, mean, std, sharpness)
    return {
        "rule": BM25_ABOVE,
        "threshold": threshold if math.isfinite(threshold) else None,
        "sharpness": sharpness,
        "abstain_init": [bias, slope],
        "loss_by_sharpness": {str(k): v for k, v in losses.items()},
        "prefixes": len(columns.bm25),
    }


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
    # the untrained model is the threshold rule fitted on the training prefixes (ralm.train.scalar_init)
    start = threshold_start(rule_columns, threshold, mean, std, optim.loss, optim.temperature)
    hparams = {
        "bm25_top_mean": mean,
        "bm25_top_std": std,
        "abstain_anchor": "top",
        "abstain_init": tuple(start["abstain_init"]),
    }
    return FittedStart(threshold, start, hparams)
