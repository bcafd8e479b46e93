"""The one tie rule (ralm.ranking) against numpy's stable sort, on scores with many ties."""

import numpy as np

from ralm.ranking import best_first, first_smallest


def test_best_first_is_a_stable_descending_sort_and_first_smallest_its_dual():
    rng = np.random.default_rng(0)
    for _ in range(200):
        scores = rng.integers(0, 4, size=int(rng.integers(1, 12))).astype(float)  # few values: ties
        reference = np.argsort(-scores, kind="stable").tolist()
        assert best_first(scores.tolist()) == reference
        assert first_smallest((-scores).tolist()) == reference[0]
        assert first_smallest(scores.tolist()) == int(np.argmin(scores))  # numpy: the first minimum
