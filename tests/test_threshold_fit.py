"""The threshold fit of every abstention rule (T of ``bm25-above``, M of ``zero-shot-above``): the plain fit
against a brute force over every cut, and its bagged form against the exact distribution of the plain fit
over all resamples of documents."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from ralm.train.selection import bagged_threshold, best_threshold


def brute_force(scores: list[float], gains: list[float]) -> float:
    """Every observed finite score as T (a prefix scored -inf has nothing to retrieve) and never retrieving
    (T = inf, total 0); of equal totals the highest T."""
    cuts = {s for s in scores if math.isfinite(s)}
    totals = {c: sum(g for s, g in zip(scores, gains, strict=True) if s >= c) for c in cuts}
    best = max([0.0, *totals.values()])
    if best <= 0:
        return math.inf
    return max(c for c, total in totals.items() if total == best)


def test_the_plain_fit_maximises_the_summed_gain_over_every_cut():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        scores = [float(x) for x in rng.choice([5.0, 8.0, 12.0, 20.0, 31.0, -math.inf], size=n)]
        gains = [float(x) for x in rng.normal(0, 3, size=n)]
        t = best_threshold(scores, gains)
        assert t == brute_force(scores, gains)
    assert best_threshold([1.0, 2.0], [-1.0, -2.0]) == math.inf  # retrieval never helps: never retrieve
    assert best_threshold([], []) == math.inf


DOCUMENTS = {  # (score, gain) per prefix: which documents a resample draws moves the plain fit
    "a": [(4.0, -1.0), (2.5, 3.0)],
    "b": [(4.0, 0.0), (2.5, 1.0)],
    "c": [(3.5, 3.0), (2.5, -3.0), (1.0, 1.0)],
}


def exact_fits() -> Counter:
    """The plain fit on each of the 27 equally likely ordered draws of three documents with replacement."""
    fits = Counter()
    for draw in itertools.product(DOCUMENTS, repeat=len(DOCUMENTS)):
        rows = [row for doc in draw for row in DOCUMENTS[doc]]
        fits[brute_force([s for s, _ in rows], [g for _, g in rows])] += 1
    return fits


def test_the_bagged_fit_is_the_median_of_the_plain_fit_over_resamples_of_documents():
    fits = exact_fits()
    values = sorted(fits)
    below = np.cumsum([fits[v] for v in values]) / 27
    median = values[int(np.argmax(below >= 0.5))]
    # The exact median is clear of its neighbours, so 201 resamples land on it (3 standard errors away).
    assert min(abs(b - 0.5) for b in below) > 0.1 and len(fits) > 1
    rows = [(doc, s, g) for doc, prefixes in DOCUMENTS.items() for s, g in prefixes]
    docs, scores, gains = ([r[i] for r in rows] for i in range(3))
    assert bagged_threshold(scores, gains, docs) == median
    assert bagged_threshold(scores, gains, docs, seed=1) == median
    assert (median, best_threshold(scores, gains)) == (2.5, 1.0)  # all three documents at once fit another T


def test_one_document_gives_the_plain_fit_and_bad_groups_are_refused():
    scores, gains = [1.0, 2.0, 3.0], [-1.0, 2.0, 0.5]
    assert bagged_threshold(scores, gains, ["x"] * 3) == best_threshold(scores, gains) == 2.0
    with pytest.raises(ValueError, match="3 scores but 2 groups"):
        bagged_threshold(scores, gains, ["x", "y"])
