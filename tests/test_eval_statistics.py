"""The paired bootstrap of `--compare` against direct computations on small hand-made tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ralm.statistics import (
    format_change,
    paired_bootstrap,
    paired_mean_difference,
    perplexity_change,
    resampled_changes,
)

# Four windows: NLL sums of two conditions and the tokens each window scores.
A = [10.0, 12.0, 9.0, 30.0]
B = [11.0, 12.5, 8.0, 33.0]
N = [4, 4, 4, 8]


def test_perplexity_change_is_the_ratio_of_perplexities():
    ppl_a = math.exp(sum(A) / sum(N))
    ppl_b = math.exp(sum(B) / sum(N))
    assert perplexity_change(A, B, N) == pytest.approx(ppl_a / ppl_b - 1)


def test_each_resample_is_the_change_on_the_drawn_windows():
    draws = np.array(list(itertools.product(range(4), repeat=4)))  # every one of the 256 draws
    got = resampled_changes(A, B, N, draws)
    for draw, value in zip(draws, got, strict=True):
        a, b, n = ([x[i] for i in draw] for x in (A, B, N))
        assert value == pytest.approx(math.exp((sum(a) - sum(b)) / sum(n)) - 1)


def test_the_interval_matches_the_exact_bootstrap_distribution():
    """With 4 windows the bootstrap distribution can be enumerated: 256 equally likely draws."""
    draws = np.array(list(itertools.product(range(4), repeat=4)))
    exact = np.array(
        [math.expm1((sum(A[i] for i in d) - sum(B[i] for i in d)) / sum(N[i] for i in d)) for d in draws]
    )
    c = paired_bootstrap(A, B, N, resamples=40_000, seed=3)
    assert c.change == pytest.approx(perplexity_change(A, B, N))
    # Monte Carlo quantiles of a discrete distribution land on or next to the exact ones.
    lo, hi = np.quantile(exact, [0.025, 0.975])
    values = np.sort(np.unique(exact))
    assert abs(np.searchsorted(values, c.low) - np.searchsorted(values, lo)) <= 1
    assert abs(np.searchsorted(values, c.high) - np.searchsorted(values, hi)) <= 1
    assert (c.windows, c.differing_windows, c.resamples, c.seed) == (4, 4, 40_000, 3)


def test_identical_conditions_tie_at_zero_and_a_uniform_gain_is_significant():
    same = paired_bootstrap(A, A, N, resamples=500)
    assert (same.change, same.low, same.high, same.differing_windows) == (0.0, 0.0, 0.0, 0)
    assert not same.significant and format_change(same.as_dict()).endswith("tie")
    better = [x - 1.0 for x in A]  # one nat less in every window
    c = paired_bootstrap(better, A, N, resamples=500)
    assert c.high < 0 and c.significant and not format_change(c.as_dict()).endswith("tie")


def test_the_bootstrap_is_seeded_and_checks_its_input():
    rng = np.random.default_rng(0)
    a, b = rng.normal(40, 5, size=200), rng.normal(41, 5, size=200)
    n = [32] * 200
    assert paired_bootstrap(a, b, n, seed=1) == paired_bootstrap(a, b, n, seed=1)
    assert paired_bootstrap(a, b, n, seed=1).low != paired_bootstrap(a, b, n, seed=2).low
    with pytest.raises(ValueError, match="must match"):
        paired_bootstrap(A, B[:3], N)


def test_paired_mean_difference_matches_the_normal_interval_of_a_large_sample():
    rng = np.random.default_rng(1)
    b = rng.normal(0.0, 5.0, size=4000)
    a = b + rng.normal(0.3, 2.0, size=4000)
    d = paired_mean_difference(a, b, resamples=4000, seed=3)
    diff = a - b
    half = 1.96 * diff.std(ddof=1) / np.sqrt(diff.size)  # the textbook interval the bootstrap approaches
    assert d.difference == pytest.approx(diff.mean(), abs=1e-12)
    assert d.low == pytest.approx(diff.mean() - half, abs=0.15 * half)
    assert d.high == pytest.approx(diff.mean() + half, abs=0.15 * half)
    assert d.better and d.items == 4000


def test_paired_mean_difference_of_a_constant_shift_has_no_width_and_empty_input_is_nan():
    d = paired_mean_difference([1.5, 2.5, 3.5], [1.0, 2.0, 3.0])
    assert (d.difference, d.low, d.high) == pytest.approx((0.5, 0.5, 0.5))
    assert math.isnan(paired_mean_difference([], []).difference)
