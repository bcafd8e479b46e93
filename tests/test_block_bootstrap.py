"""The block bootstrap of ``ralm.statistics`` against a naive loop implementation (tests/naive_bootstrap.py),
its coverage on simulated dependent windows, and the block length and labels it draws."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from naive_bootstrap import naive_change_interval, naive_mean_interval

from ralm.statistics import (
    block_labels,
    block_length,
    dependent_blocks,
    paired_bootstrap,
    paired_mean_difference,
)


def ar1(rho: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """A stationary AR(1) series with unit innovations: x_t = rho x_{t-1} + e_t."""
    e = rng.normal(size=size)
    x = np.empty(size)
    x[0] = e[0] / math.sqrt(1.0 - rho**2)
    for t in range(1, size):
        x[t] = rho * x[t - 1] + e[t]
    return x


def windows(size: int = 60, seed: int = 0):
    """Per-window NLL sums of two conditions and the scored tokens of each window."""
    rng = np.random.default_rng(seed)
    n = rng.integers(8, 40, size=size)
    b = n * 3.0 + rng.normal(0.0, 4.0, size=size)
    a = b - 0.1 * n + rng.normal(0.0, 2.0, size=size)
    return a.tolist(), b.tolist(), n.tolist()


def test_one_item_per_block_is_the_per_item_bootstrap():
    a, b, n = windows()
    per_window = paired_bootstrap(a, b, n, resamples=500, seed=4)
    singletons = paired_bootstrap(a, b, n, blocks=list(range(len(a))), resamples=500, seed=4)
    assert (singletons.low, singletons.high, singletons.change) == (
        per_window.low,
        per_window.high,
        per_window.change,
    )
    assert (per_window.method, per_window.blocks) == ("windows", 60)
    assert (singletons.method, singletons.blocks) == ("blocks", 60)
    items = paired_mean_difference(a, b, resamples=500, seed=4)
    same = paired_mean_difference(a, b, blocks=[f"w{i}" for i in range(60)], resamples=500, seed=4)
    assert (same.low, same.high) == (items.low, items.high)
    assert (items.method, same.method, same.blocks) == ("items", "blocks", 60)
    # Both equal the naive per-item loop.
    assert (per_window.low, per_window.high) == pytest.approx(
        naive_change_interval(a, b, n, range(60), 500, 4), rel=1e-12
    )


@pytest.mark.parametrize("labels", [[i // 5 for i in range(60)], [(i * 7) % 9 for i in range(60)]])
def test_the_block_interval_equals_the_naive_loop_over_expanded_blocks(labels):
    """Consecutive blocks, and blocks whose items are scattered (labels need not be runs)."""
    a, b, n = windows()
    got = paired_bootstrap(a, b, n, blocks=labels, resamples=400, seed=11)
    assert (got.low, got.high) == pytest.approx(naive_change_interval(a, b, n, labels, 400, 11), rel=1e-10)
    assert got.blocks == len(set(labels)) and got.windows == 60 and got.as_dict()["method"] == "blocks"
    assert got.change == pytest.approx(math.expm1((sum(a) - sum(b)) / sum(n)))
    mean = paired_mean_difference(a, b, blocks=labels, resamples=400, seed=11, level=0.9)
    assert (mean.low, mean.high) == pytest.approx(naive_mean_interval(a, b, labels, 400, 11, 0.9), rel=1e-10)
    assert mean.as_dict()["blocks"] == len(set(labels)) and mean.items == 60


def test_two_blocks_have_the_enumerable_bootstrap_distribution():
    """Blocks {0,1} and {2,3}: four equally likely draws, so the interval runs from the all-first-block
    value to the all-second-block value."""
    a, b, n = [5.0, 1.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0], [2, 2, 2, 2]
    got = paired_bootstrap(a, b, n, blocks=["x", "x", "y", "y"], resamples=4000, seed=0, level=0.9)
    first, second = math.expm1(4.0 / 4), math.expm1(2.0 / 4)  # (Σa−Σb)/Σn of each block drawn twice
    assert (got.low, got.high) == pytest.approx((second, first))


def test_bad_block_labels_are_refused():
    with pytest.raises(ValueError, match="3 block labels for 4 items"):
        paired_bootstrap([1.0] * 4, [0.0] * 4, [1] * 4, blocks=[0, 0, 1])
    with pytest.raises(ValueError, match="block length 0"):
        block_labels([0, 0], 0)


def test_block_intervals_cover_dependent_windows_where_per_window_intervals_do_not():
    """AR(1) per-window differences (rho 0.4, 400 windows of 32 tokens), 200 simulated texts: the block
    interval holds the true change in about 95% of them (at this size ~91%: the block bootstrap's
    variance is biased down by about G/(b g(0))), the per-window one in about 80%, as the variance ratio
    (1 − rho)/(1 + rho) of independent to AR(1) means predicts: P(|Z| < 1.96 √0.43) = 0.80."""
    rng = np.random.default_rng(2024)
    size, tokens, per_token = 400, np.full(400, 32), -0.05
    truth = math.expm1(per_token)
    covered = {"blocks": 0, "windows": 0}
    simulations = 200
    for s in range(simulations):
        diff = tokens * per_token + 3.0 * ar1(0.4, size, rng)
        base = np.zeros(size)
        for method, blocks in (("blocks", dependent_blocks(diff)), ("windows", None)):
            c = paired_bootstrap(diff, base, tokens, blocks=blocks, resamples=400, seed=s)
            covered[method] += c.low <= truth <= c.high
    rate = {m: c / simulations for m, c in covered.items()}
    assert rate["blocks"] >= 0.88, rate
    assert rate["windows"] <= 0.85 and rate["blocks"] - rate["windows"] >= 0.08, rate


def test_block_length_is_one_for_independent_data_and_grows_with_dependence():
    rng = np.random.default_rng(7)
    assert [block_length(rng.normal(size=300)) for _ in range(10)] == [1] * 10
    lengths = {rho: [block_length(ar1(rho, 300, rng)) for _ in range(10)] for rho in (0.3, 0.6, 0.9)}
    assert min(lengths[0.6]) > 2
    assert np.mean(lengths[0.3]) < np.mean(lengths[0.6]) < np.mean(lengths[0.9])
    assert max(lengths[0.9]) <= 300 // 8  # at least 8 blocks remain
    assert block_length([1.0] * 50) == 1 and block_length([3.0] * 7) == 1 and block_length([]) == 1


def test_block_length_approaches_the_ar1_optimum_on_a_long_series():
    """For AR(1), R(k) ∝ rho^|k|, so G / g(0) = 2 rho / (1 − rho²) and the circular-block optimum of
    Politis & White (2004) is (3/2)^(1/3) (2 rho / (1 − rho²))^(2/3) n^(1/3) (written out here)."""
    rho, size = 0.5, 20_000
    optimum = 1.5 ** (1 / 3) * (2 * rho / (1 - rho**2)) ** (2 / 3) * size ** (1 / 3)  # 37.6
    got = [block_length(ar1(rho, size, np.random.default_rng(s))) for s in range(3)]
    assert all(abs(b - optimum) <= 0.25 * optimum for b in got), (got, optimum)


def test_block_labels_are_runs_that_never_cross_a_group_change():
    assert block_labels("aaaaabbbc", 2) == [0, 0, 1, 1, 2, 3, 3, 4, 5]
    assert block_labels([7, 7, 7], 5) == [0, 0, 0] and block_labels([], 3) == []
    rng = np.random.default_rng(3)
    for length in (1, 2, 5):
        groups = np.repeat(rng.integers(0, 3, size=20), rng.integers(1, 9, size=20)).tolist()
        labels = block_labels(groups, length)
        for (g0, l0), (g1, l1) in itertools.pairwise(zip(groups, labels, strict=True)):
            assert l1 in (l0, l0 + 1) and (g0 == g1 or l1 == l0 + 1)  # runs, cut at each change
        for label in set(labels):
            members = [g for g, lab in zip(groups, labels, strict=True) if lab == label]
            assert len(members) <= length and len(set(members)) == 1


def test_dependent_blocks_sizes_from_the_values_and_cuts_at_groups():
    x = ar1(0.6, 300, np.random.default_rng(5))
    length = block_length(x)
    assert dependent_blocks(x) == [i // length for i in range(300)]
    groups = [0] * 100 + [1] * 200
    assert dependent_blocks(x, groups) == block_labels(groups, length)
    with pytest.raises(ValueError, match="2 groups for 300 values"):
        dependent_blocks(x, [0, 1])
