"""The reranker's starting point, a rule fitted on the training prefixes before any step, and the columns
the rules read (BM25 scores, y' gains).

With ``--bm25-prior --abstain`` the untrained model scores a passage ``w * z`` (its BM25 prior; the encoder
head starts at 0) and the empty passage ``w * z_top + b + c * t`` (anchor ``top``, ``RerankerModule``),
t the prefix's best BM25 score standardised over the training prefixes. So with ``c = -k`` and
``b = k * (T - mean) / std`` the model abstains exactly when the best BM25 score is below T: at step 0 it
*is* the rule "BM25's top-1 when its score is at least T" (``ralm.train.selection.bm25_threshold``, T
fitted here on the training prefixes only), and training can only move it away where the loss says so;
checkpoint selection keeps step 0 when no later step does better on the selection prefixes. The
sharpness k (how soft the rule is for the loss) is the one of ``SHARPNESS`` whose training loss is lowest
with the encoder at 0: a fit of one scalar on the training prefixes, no encoder pass.

With ``--zero-shot-prior`` (the stacked reranker) a passage scores ``a * y'`` and the empty passage
``a * y'_none + b`` (y' the LM's log-prob of the prefix's last tokens; the encoder head at 0). With
``b = a * M`` the untrained model is ``zero-shot-above`` at M, fitted here on the training prefixes only
(``RankGainColumns.fit``; the export decision's own M also reads the selection prefixes), and a is the
sharpness of ``SHARPNESS`` whose training loss is lowest (``zero_shot_start``).

Pure functions over a dataset's columns; ``ralm.train.fit`` fits T once and calls ``fit_start``.

T of the threshold rule and the reranker's start, fitted once on the training prefixes before training
(``ralm.train.fit``): the export decision and the start both use this one T (``ralm.train.scalar_init``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ralm.passage_rules import BM25_ABOVE, ZERO_SHOT, ZERO_SHOT_ABOVE, Scored, ScoredRow, picks
from ralm.rerank.inputs import bm25_prior
from ralm.train.dataset import RerankData, bm25_top_stats
from ralm.train.losses import MASKED, rerank_loss
from ralm.train.selection import bagged_threshold, bm25_threshold
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


def zero_shot_picks(rank_logprobs: list[list[float]]) -> list[int]:
    """The zero-shot rule's candidate per row (``ralm.passage_rules``: the highest log p(y' | [d_i; x]), the
    earlier, higher-BM25, candidate on a tie, as ``ralm eval ppl``'s zero-shot condition)."""
    rows = [
        ScoredRow(i, tuple(Scored(rank_logprob=v) for v in values)) for i, values in enumerate(rank_logprobs)
    ]
    return picks(ZERO_SHOT, rows)


@dataclass(frozen=True)
class RankGainColumns:
    """Per row, what the ``zero-shot-above`` rule reads and gives: the zero-shot pick's y' gain over no
    passage (nats), the target's log-prob under that pick and with no passage."""

    gain: np.ndarray
    picked: np.ndarray
    none: np.ndarray
    docs: list[str]
    """Each row's source document (the fit resamples whole documents)."""

    def fit(self) -> float:
        """M on these rows: the y' gain from which retrieving gains most in sum (``bagged_threshold``)."""
        return bagged_threshold(self.gain.tolist(), (self.picked - self.none).tolist(), self.docs)

    def above(self, threshold: float) -> np.ndarray:
        """The rule's log-prob per row: the zero-shot pick when its y' gain is at least M, else none."""
        return np.where(self.gain >= threshold, self.picked, self.none)


def rank_gain_columns(path: str, rows: list[int] | None = None) -> RankGainColumns | None:
    """``RankGainColumns`` of `rows` (in their order; None: every row); None for data without y' scored with
    no passage."""
    import datasets

    ds = datasets.load_from_disk(path)
    needed = ["lm_logprobs", "lm_rank_logprobs", "no_retrieval_rank_logprob", "no_retrieval_logprob"]
    if any(c not in ds.column_names for c in needed):
        return None
    table = ds.select_columns([*needed, "doc_id"])
    table = table if rows is None else table.select(rows)
    ranks, none_rank, none = (table[c] for c in needed[1:])
    # A prefix whose query found nothing has no pick: the rule prepends nothing there, whatever M.
    chosen = [zero_shot_picks([r])[0] if r else None for r in ranks]
    gain = [-math.inf if i is None else r[i] - n for r, i, n in zip(ranks, chosen, none_rank, strict=True)]
    picked = [n if i is None else lp[i] for lp, i, n in zip(table["lm_logprobs"], chosen, none, strict=True)]
    docs = [str(d) for d in table["doc_id"]]
    return RankGainColumns(
        gain=np.asarray(gain, dtype=np.float64),
        picked=np.asarray(picked, dtype=np.float64),
        none=np.asarray(none, dtype=np.float64),
        docs=docs,
    )


def fit_rank_threshold(data_dir: str) -> float | None:
    """M of ``zero-shot-above`` on every row of a ``ralm data-gen`` dataset (``RankGainColumns.fit``; the
    pipeline's eval rule, as ``fit_bm25_threshold`` is for T); None for data without y'."""
    columns = rank_gain_columns(data_dir)
    return None if columns is None else columns.fit()


@dataclass(frozen=True)
class ZeroShotColumns:
    """What the stacked start reads of some rows (``--zero-shot-prior``), row by row, BM25 order."""

    rank: list[list[float]]
    """The LM's log-prob of y' given each candidate."""
    logprobs: list[list[float]]
    """The LM's log-prob of the target given each candidate."""
    none_rank: np.ndarray | None
    """y' given no passage; None without ``--abstain``."""
    none: np.ndarray | None
    """The target given no passage; None without ``--abstain``."""


def read_zero_shot_columns(path: str, rows: list[int], *, abstain: bool) -> ZeroShotColumns:
    """The rows' y' and target log-probs, each candidate's and (with `abstain`) no passage's."""
    from ralm.train.dataset import open_dataset

    table = open_dataset(path, abstain=abstain, rank_target=True).select(rows)
    return ZeroShotColumns(
        rank=[[float(x) for x in values] for values in table["lm_rank_logprobs"]],
        logprobs=[[float(x) for x in values] for values in table["lm_logprobs"]],
        none_rank=np.asarray(table["no_retrieval_rank_logprob"], dtype=np.float64) if abstain else None,
        none=np.asarray(table["no_retrieval_logprob"], dtype=np.float64) if abstain else None,
    )


def zero_shot_scalars(threshold: float | None, sharpness: float) -> tuple[float, float]:
    """(a, b) of the stacked start: a = the sharpness, b = a * M less ``TIE_MARGIN`` (a gain of exactly M
    retrieves, as the rule does; passages come before the empty one on a tie anyway). M None (without
    --abstain): b = 0, unused."""
    return sharpness, (sharpness * threshold - TIE_MARGIN) if threshold is not None else 0.0


def zero_shot_start_loss(
    columns: ZeroShotColumns, scalars: tuple[float, float], loss: str, temperature: float
) -> float:
    """The training loss of the untrained stacked model (encoder at 0) with these (a, b)."""
    a, b = scalars
    abstain = columns.none is not None
    k = max(len(r) for r in columns.rank) + int(abstain)
    scores = torch.full((len(columns.rank), k), MASKED, dtype=torch.float64)
    lm = torch.zeros_like(scores)
    mask = torch.zeros_like(scores, dtype=torch.bool)
    for i, (rank, logprobs) in enumerate(zip(columns.rank, columns.logprobs, strict=True)):
        n = len(rank)
        scores[i, :n] = a * torch.tensor(rank, dtype=torch.float64)
        lm[i, :n] = torch.tensor(logprobs, dtype=torch.float64)
        if abstain:
            scores[i, n] = a * columns.none_rank[i] + b
            lm[i, n] = columns.none[i]
        mask[i, : n + int(abstain)] = True
    return float(rerank_loss(loss, scores, lm, mask, temperature))


def zero_shot_start(
    columns: ZeroShotColumns, threshold: float | None, loss: str, temperature: float = 1.0
) -> dict:
    """The stacked start on the training prefixes' `columns`: ``zero-shot-above`` with M = `threshold`
    (``RankGainColumns.fit`` on the training prefixes; None without --abstain: ``zero-shot``), the
    sharpness a among ``SHARPNESS`` whose loss is lowest, and (a, b) (summary.json's ``start``)."""
    losses = {
        a: zero_shot_start_loss(columns, zero_shot_scalars(threshold, a), loss, temperature)
        for a in SHARPNESS
    }
    sharpness = min(losses, key=losses.get)
    return {
        "rule": ZERO_SHOT_ABOVE if threshold is not None else ZERO_SHOT,
        "threshold": threshold,
        "sharpness": sharpness,
        "zero_shot_init": list(zero_shot_scalars(threshold, sharpness)),
        "loss_by_sharpness": {str(a): v for a, v in losses.items()},
        "prefixes": len(columns.rank),
    }


class FittedStart(NamedTuple):
    """What the training prefixes fix before training: T of the threshold rule (``--abstain``), and with
    ``--bm25-prior`` or ``--zero-shot-prior`` too the untrained model's start and the module arguments that
    carry it."""

    threshold: float | None
    start: dict | None
    hparams: dict


def fit_start(
    data: str,
    rerank_data: RerankData,
    optim: OptimOptions,
    *,
    abstain: bool,
    bm25_prior: bool,
    zero_shot_prior: bool = False,
) -> FittedStart:
    """T, fitted once on the training prefixes: both a rule of the export decision and (with the BM25 prior)
    the start, so neither reads and fits the same rows again; with the zero-shot prior, its start."""
    threshold = None
    if abstain:
        rule_columns = read_rule_columns(data, rerank_data.train_rows).with_candidates()
        threshold = fit_threshold(rule_columns)
    if zero_shot_prior:
        return _stacked_start(data, rerank_data, optim, threshold, abstain=abstain)
    if not (abstain and bm25_prior):
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


def _stacked_start(
    data: str, rerank_data: RerankData, optim: OptimOptions, threshold: float | None, *, abstain: bool
) -> FittedStart:
    """The zero-shot prior's start: M on the training prefixes alone (selection judges step 0 against the
    later steps, so it must not have fitted it; the decision's own ``zero-shot-above`` also reads the
    selection prefixes, since no model carries its M), then the sharpness."""
    rows = rerank_data.train_rows
    margin = _stacked_margin(rank_gain_columns(data, rows)) if abstain else None
    start = zero_shot_start(
        read_zero_shot_columns(data, rows, abstain=abstain), margin, optim.loss, optim.temperature
    )
    return FittedStart(threshold, start, {"zero_shot_init": tuple(start["zero_shot_init"])})


def _stacked_margin(columns: RankGainColumns) -> float:
    """M of the stacked start: the fitted one, or where no training prefix gains by retrieving, one above
    every training prefix's y' gain (the start then never retrieves on them, as the rule does not)."""
    margin = columns.fit()
    if math.isfinite(margin):
        return margin
    finite = columns.gain[np.isfinite(columns.gain)]
    return float(finite.max()) + 1.0 if finite.size else 0.0
