"""A naive block bootstrap written with Python loops, the reference for ``ralm.statistics``.

Each resample draws, with ``numpy.random.default_rng(seed).integers(0, B, size=(resamples, B))`` (B
distinct block labels, in order of first appearance), B blocks with replacement; every drawn block is
expanded into its items one by one and the statistic is taken over those items. Only the draws are shared
with the code under test (so the two intervals can be compared exactly); the grouping, expansion, sums
and quantiles are written out here.
"""

from __future__ import annotations

import math

import numpy as np


def _members(labels) -> list[list[int]]:
    order: list = []
    members: dict = {}
    for i, label in enumerate(labels):
        if label not in members:
            order.append(label)
            members[label] = []
        members[label].append(i)
    return [members[label] for label in order]


def _interval(values: list[float], level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def naive_change_interval(a, b, n, labels, resamples, seed, level=0.95) -> tuple[float, float]:
    """Percentile interval of exp((Σa − Σb)/Σn) − 1 over resampled blocks of items."""
    blocks = _members(labels)
    draws = np.random.default_rng(seed).integers(0, len(blocks), size=(resamples, len(blocks)))
    values = []
    for draw in draws:
        sum_a = sum_b = sum_n = 0.0
        for j in draw:
            for i in blocks[j]:
                sum_a += a[i]
                sum_b += b[i]
                sum_n += n[i]
        values.append(math.expm1((sum_a - sum_b) / sum_n))
    return _interval(values, level)


def naive_mean_interval(a, b, labels, resamples, seed, level=0.95) -> tuple[float, float]:
    """Percentile interval of the mean of a − b over the items of resampled blocks."""
    blocks = _members(labels)
    draws = np.random.default_rng(seed).integers(0, len(blocks), size=(resamples, len(blocks)))
    values = []
    for draw in draws:
        total, count = 0.0, 0
        for j in draw:
            for i in blocks[j]:
                total += a[i] - b[i]
                count += 1
        values.append(total / count)
    return _interval(values, level)
