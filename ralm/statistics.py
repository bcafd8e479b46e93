"""Uncertainty of a comparison: paired bootstraps (pure: arrays in, numbers out).

Used by ``eval ppl --compare`` (perplexity change over windows) and by ``ralm train``'s export decision
(mean log-prob difference over validation prefixes).

Two conditions evaluated on the same windows give per-window NLL sums ``a`` and ``b`` and the number of
scored tokens ``n`` of each window. The statistic is the relative change of token perplexity of ``a``
against ``b``::

    change = exp((Σ a − Σ b) / Σ n) − 1          (−0.05: a's perplexity is 5% lower)

The paired bootstrap draws windows with replacement (the same draw for both conditions, which is what
makes it paired: window difficulty cancels), recomputes the change on each draw, and reports the
percentile interval. Windows, not tokens, are resampled: the tokens of one window share a passage and
are not independent. Seeded, so a table is reproducible.

Neighbouring windows are not independent either (they share chapters and often passages: lag-1
autocorrelation of the per-window difference up to 0.5 in our runs, where a per-window interval covers
well under its 95%). Both bootstraps therefore take ``blocks``, a label per item: items with one label are
drawn together (the distinct labels are resampled with replacement, then the statistic is taken over all
their items). ``block_labels`` cuts runs of consecutive items that never span two documents and
``block_length`` sizes the runs from the data (Politis & White 2004); ``dependent_blocks`` does both.
Without ``blocks`` each item is its own block: the per-item bootstrap, kept for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0


@dataclass(frozen=True)
class PairedChange:
    """Relative perplexity change of one condition against a baseline, with its bootstrap interval."""

    change: float
    """exp((Σ a − Σ b) / Σ n) − 1 on all windows."""
    low: float
    high: float
    level: float
    windows: int
    """Windows resampled (all evaluated windows, the ones without a passage included)."""
    differing_windows: int
    """Windows whose NLL differs between the two conditions (the only ones that move the change)."""
    resamples: int
    seed: int
    blocks: int
    """Blocks resampled (equal to `windows` for the per-window bootstrap)."""
    method: str
    """``windows`` (each window drawn alone) or ``blocks`` (labelled blocks of windows drawn together)."""

    @property
    def significant(self) -> bool:
        """The interval excludes zero (otherwise the two conditions are a tie at this level)."""
        return self.high < 0.0 or self.low > 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "significant": self.significant}


def perplexity_change(a: Sequence[float], b: Sequence[float], num_targets: Sequence[int]) -> float:
    """exp((Σ a − Σ b) / Σ n) − 1: the relative change of token perplexity of `a` against `b`."""
    total = float(np.sum(num_targets))
    if total <= 0:
        return math.nan
    return math.expm1((math.fsum(a) - math.fsum(b)) / total)


def resampled_changes(
    a: Sequence[float], b: Sequence[float], num_targets: Sequence[int], indices: np.ndarray
) -> np.ndarray:
    """The change on each resample; `indices` is (resamples, windows), each row one draw of windows."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = np.asarray(num_targets, dtype=np.float64)
    return np.expm1(diff[indices].sum(axis=1) / n[indices].sum(axis=1))


def percentile_interval(
    statistic: Callable[[np.ndarray], np.ndarray], items: int, resamples: int, seed: int, level: float
) -> tuple[float, float]:
    """The percentile bootstrap interval of `statistic`, which maps a (draws, items) array of item indices
    (each row one draw with replacement) to one value per draw; seeded, so a table is reproducible."""
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    # Draw in blocks so a long text (10^5 windows) never needs a resamples x items matrix at once.
    block = max(1, 2_000_000 // items)
    for lo in range(0, resamples, block):
        hi = min(resamples, lo + block)
        values[lo:hi] = statistic(rng.integers(0, items, size=(hi - lo, items)))
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    num_targets: Sequence[int],
    *,
    blocks: Sequence[Hashable] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> PairedChange:
    """The change of `a` against `b` with its paired percentile bootstrap interval over windows, or over
    blocks of windows when `blocks` labels each window (a drawn block brings all its windows)."""
    if not len(a) == len(b) == len(num_targets):
        raise ValueError(f"{len(a)}, {len(b)} and {len(num_targets)} windows: the three must match")
    _check(level, resamples)
    windows = len(a)
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    differing = int(np.sum(diff != 0.0))
    method = "windows" if blocks is None else "blocks"
    if windows == 0:
        return PairedChange(math.nan, math.nan, math.nan, level, 0, 0, resamples, seed, 0, method)
    diff_sums, n_sums = block_sums(blocks, windows, diff, np.asarray(num_targets, dtype=np.float64))
    low, high = percentile_interval(
        lambda idx: np.expm1(diff_sums[idx].sum(axis=1) / n_sums[idx].sum(axis=1)),
        diff_sums.size,
        resamples,
        seed,
        level,
    )
    change = perplexity_change(a, b, num_targets)
    return PairedChange(
        change, low, high, level, windows, differing, resamples, seed, int(diff_sums.size), method
    )


def block_sums(blocks: Sequence[Hashable] | None, items: int, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each of `values` summed per distinct label of `blocks` (labels in order of first appearance);
    without `blocks` the values themselves, one block per item."""
    if blocks is None:
        return values
    if len(blocks) != items:
        raise ValueError(f"{len(blocks)} block labels for {items} items: one label per item")
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(label, len(index)) for label in blocks], dtype=np.int64)
    return tuple(np.bincount(codes, weights=v, minlength=len(index)) for v in values)


def _check(level: float, resamples: int) -> None:
    if not 0.0 < level < 1.0 or resamples < 1:
        raise ValueError(f"level {level} must be in (0, 1) and resamples {resamples} at least 1")


def format_change(change: dict) -> str:
    """``-4.5% [-7.4, -1.9]`` from a ``PairedChange.as_dict()``; ``tie`` marks an interval holding zero."""
    if change["change"] is None or math.isnan(change["change"]):
        return "n/a"
    text = f"{100 * change['change']:+.1f}% [{100 * change['low']:+.1f}, {100 * change['high']:+.1f}]"
    return text if change["significant"] else text + " tie"


@dataclass(frozen=True)
class MeanDifference:
    """Mean of ``a - b`` over paired items (e.g. validation prefixes), with its bootstrap interval."""

    difference: float
    low: float
    high: float
    level: float
    items: int
    resamples: int
    seed: int
    blocks: int
    """Blocks resampled (equal to `items` for the per-item bootstrap)."""
    method: str
    """``items`` (each item drawn alone) or ``blocks`` (labelled blocks of items drawn together)."""

    @property
    def better(self) -> bool:
        """`a` is higher than `b` and the interval excludes zero."""
        return self.low > 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "better": self.better}


def paired_mean_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    blocks: Sequence[Hashable] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> MeanDifference:
    """mean(a - b) with the paired percentile bootstrap interval: items drawn with replacement, or the
    blocks `blocks` labels (each resample's mean is Σ diff / Σ count over its drawn blocks' items)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} and {len(b)} items: the two must match")
    _check(level, resamples)
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    method = "items" if blocks is None else "blocks"
    if diff.size == 0:
        return MeanDifference(math.nan, math.nan, math.nan, level, 0, resamples, seed, 0, method)
    sums, counts = block_sums(blocks, diff.size, diff, np.ones_like(diff))
    low, high = percentile_interval(
        lambda idx: sums[idx].sum(axis=1) / counts[idx].sum(axis=1), sums.size, resamples, seed, level
    )
    return MeanDifference(
        float(diff.mean()), low, high, level, int(diff.size), resamples, seed, int(sums.size), method
    )


MIN_BLOCKS = 8
"""`block_length` never makes fewer blocks than this: a bootstrap over a handful of blocks has no spread."""


def block_labels(groups: Sequence[Hashable], length: int) -> list[int]:
    """A block label per item: runs of `length` consecutive items, and a new run wherever `groups` (e.g.
    the document of each window) changes, so no block spans two documents (the last run of a document
    may be shorter)."""
    if length < 1:
        raise ValueError(f"block length {length} must be at least 1")
    labels: list[int] = []
    label, run, previous = -1, 0, None
    for i, group in enumerate(groups):
        if i == 0 or run == length or group != previous:
            label, run = label + 1, 0
        labels.append(label)
        run, previous = run + 1, group
    return labels


def block_length(values: Sequence[float]) -> int:
    """The block length for a block bootstrap of the mean of `values` (a series in order, e.g. the
    per-window NLL difference), from the data: Politis & White (2004), "Automatic block-length selection
    for the dependent bootstrap", Econometric Reviews 23(1), with the circular-block constant (the 2009
    correction by Patton, Politis & White concerns only the stationary bootstrap's constant):

        b = (2 G² / D)^(1/3) n^(1/3),  G = Σ_|k|≤M λ(k/M) |k| R(k),  D = 4/3 (Σ_|k|≤M λ(k/M) R(k))²

    with R the sample autocovariance and λ the flat-top window (1 up to 1/2, then linear to 0 at 1). The
    bandwidth M = 2 m̂, m̂ the smallest lag after which K_N = max(5, ⌈√log10 n⌉) autocorrelations in a row
    are below 2 √(log10 n / n). One deliberate change: the paper takes m̂ ≥ 1; we take m̂ = 0 when no
    autocorrelation up to lag K_N is significant, so independent data keep blocks of 1 (the per-item
    bootstrap) instead of a length made of noise. Our blocks do not overlap; for those the optimum is
    (2/3)^(1/3) ≈ 0.87 of this one (Lahiri 1999, same bias, 3/2 the variance): the longer block is the
    conservative side. Rounded, at least 1, and at most min(3 √n, n / MIN_BLOCKS)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    cap = min(math.ceil(3 * math.sqrt(n)), n // MIN_BLOCKS) if n else 0
    if cap <= 1:
        return 1
    x = x - x.mean()
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = math.ceil(math.sqrt(n)) + k_n
    lags = min(m_max + k_n, n - 1)
    # Elementwise products, not `@`: a BLAS dot spins up its thread pool for each of ~√n short lags.
    acov = np.array([np.sum(x[: n - k] * x[k:]) / n for k in range(lags + 1)])
    if acov[0] <= 0.0:
        return 1  # a constant series: nothing to resample
    significant = np.abs(acov[1:] / acov[0]) >= 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = next((m for m in range(lags) if not significant[m : m + k_n].any()), m_max)
    bandwidth = min(2 * m_hat, m_max, lags)
    if bandwidth == 0:
        return 1
    k = np.arange(1, bandwidth + 1)
    t = k / bandwidth
    window = np.where(t <= 0.5, 1.0, 2.0 * (1.0 - t))
    g = acov[0] + 2.0 * np.sum(window * acov[k])  # the long-run variance (2π × spectral density at 0)
    big_g = 2.0 * np.sum(window * k * acov[k])
    if g <= 0.0:
        return 1  # estimated long-run variance of zero (strong negative dependence): blocks add nothing
    b = (2.0 * big_g**2 / (4.0 / 3.0 * g**2)) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    return int(max(1, min(cap, round(b))))


def dependent_blocks(values: Sequence[float], groups: Sequence[Hashable] | None = None) -> list[int]:
    """Block labels for `values` in order: `block_length(values)` consecutive items per block, never
    across a change of `groups` (e.g. documents; None: one group)."""
    if groups is None:
        groups = [0] * len(values)
    elif len(groups) != len(values):
        raise ValueError(f"{len(groups)} groups for {len(values)} values: one group per value")
    return block_labels(groups, block_length(values))
