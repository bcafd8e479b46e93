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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> PairedChange:
    """The change of `a` against `b` with its paired percentile bootstrap interval over windows."""
    if not len(a) == len(b) == len(num_targets):
        raise ValueError(f"{len(a)}, {len(b)} and {len(num_targets)} windows: the three must match")
    if not 0.0 < level < 1.0 or resamples < 1:
        raise ValueError(f"level {level} must be in (0, 1) and resamples {resamples} at least 1")
    windows = len(a)
    differing = int(np.sum(np.asarray(a, dtype=np.float64) != np.asarray(b, dtype=np.float64)))
    if windows == 0:
        return PairedChange(math.nan, math.nan, math.nan, level, 0, 0, resamples, seed)
    low, high = percentile_interval(
        lambda indices: resampled_changes(a, b, num_targets, indices), windows, resamples, seed, level
    )
    return PairedChange(
        perplexity_change(a, b, num_targets),
        low,
        high,
        level,
        windows,
        differing,
        resamples,
        seed,
    )


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
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> MeanDifference:
    """mean(a - b) with the paired percentile bootstrap interval (items drawn with replacement)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} and {len(b)} items: the two must match")
    if not 0.0 < level < 1.0 or resamples < 1:
        raise ValueError(f"level {level} must be in (0, 1) and resamples {resamples} at least 1")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diff.size == 0:
        return MeanDifference(math.nan, math.nan, math.nan, level, 0, resamples, seed)
    low, high = percentile_interval(
        lambda indices: diff[indices].mean(axis=1), diff.size, resamples, seed, level
    )
    return MeanDifference(float(diff.mean()), low, high, level, int(diff.size), resamples, seed)
