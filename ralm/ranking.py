"""The one tie rule of every choice among candidates: best first, ties to the earlier candidate.

Candidates arrive in BM25 order, so "earlier" is "higher in BM25 order". ``eval ppl``'s conditions (the
oracle's lowest NLL, zero-shot's highest log-probability), a trained reranker's ``order`` and QA's zero-shot
reranking all rank with these two functions (pure).
"""

from __future__ import annotations

from collections.abc import Sequence


def best_first(scores: Sequence[float]) -> list[int]:
    """Candidate indices by descending score; equal scores keep their order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def first_smallest(values: Sequence[float]) -> int:
    """Index of the smallest value (a loss, an NLL); ties go to the earlier candidate."""
    return min(range(len(values)), key=lambda i: (values[i], i))
