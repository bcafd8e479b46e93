"""The look-ahead's pure rules: where its first sentence ends, and the queries its unsure tokens make.

Sentences end at ``.``, ``!`` or ``?`` (with closing quotes or brackets) before whitespace, or at a
newline: a rule instead of NLTK's trained splitter, so "Dr. Smith" splits after "Dr.". A masked query
drops the tokens whose probability is below beta (FLARE's implicit query); explicit queries ask one
question per maximal run of such tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|\n")


def sentence_end(text: str) -> int | None:
    """Character offset just past the first sentence of `text` (leading whitespace skipped), or None."""
    start = len(text) - len(text.lstrip())
    match = _SENTENCE_END.search(text, start)
    return match.end() if match else None


def first_sentence_length(decode: Callable[[list[int]], str], tokens: list[int]) -> int:
    """How many of `tokens` make up the first sentence (all of them when no sentence end is seen)."""
    end = sentence_end(decode(tokens))
    if end is None:
        return len(tokens)
    for n in range(1, len(tokens) + 1):
        if len(decode(tokens[:n])) >= end:
            return n
    return len(tokens)


def masked_query(tokens: Sequence[int], probs: Sequence[float], beta: float) -> list[int]:
    """The implicit query: the sentence's tokens without those whose probability is below beta."""
    return [t for t, p in zip(tokens, probs, strict=True) if p >= beta]


def low_confidence_spans(tokens: Sequence[int], probs: Sequence[float], beta: float) -> list[list[int]]:
    """The maximal runs of consecutive tokens whose probability is below beta (what explicit queries ask about)."""
    spans: list[list[int]] = []
    run: list[int] = []
    for token, p in zip(tokens, probs, strict=True):
        if p < beta:
            run.append(token)
        elif run:
            spans.append(run)
            run = []
    return spans + ([run] if run else [])
