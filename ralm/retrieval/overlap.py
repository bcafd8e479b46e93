"""Verbatim overlap between a retrieved passage and the text it is meant to help predict (pure).

A retrieval corpus that holds a copy, excerpt or quotation of the evaluated text turns "retrieval
augmentation" into "retrieval of the answer". The check is on LM token ids: a passage *copies* a span of
the text when it contains, verbatim, a run of ``COPY_TOKENS`` consecutive tokens of the text that starts
at one of the span's positions (the run may reach past the span, so the rule also works with the paper's
4-token targets). Eight tokens is about six words: common phrases rarely match by chance, quotations do.
"""

from __future__ import annotations

from collections.abc import Sequence

COPY_TOKENS = 8


def ngrams(tokens: Sequence[int], n: int = COPY_TOKENS) -> set[tuple[int, ...]]:
    """Every run of `n` consecutive tokens of `tokens`."""
    tokens = tuple(tokens)
    return {tokens[i : i + n] for i in range(len(tokens) - n + 1)}


def copies_span(
    passage: Sequence[int] | set[tuple[int, ...]],
    text: Sequence[int],
    start: int,
    stop: int,
    n: int = COPY_TOKENS,
) -> bool:
    """True when the passage contains ``text[i : i + n]`` for some ``start <= i < stop``
    with ``i + n <= len(text)``.

    `passage` may be its token ids or their precomputed ``ngrams`` (a passage checked against many spans).
    """
    grams = passage if isinstance(passage, set) else ngrams(passage, n)
    if not grams:
        return False
    text = tuple(text)
    last = min(stop, len(text) - n + 1)
    return any(text[i : i + n] in grams for i in range(max(0, start), last))
