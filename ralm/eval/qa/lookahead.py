"""The look-ahead's pure rules: where its first sentence ends, whether it is unsure, and the queries its
unsure tokens make, each compared as the FLARE authors' code compares (jzbjyb/FLARE at ec4b06b, ``src/``).

Sentences end at ``.``, ``!`` or ``?`` (with closing quotes or brackets) before whitespace, or at a
newline: a rule instead of NLTK's trained splitter, so "Dr. Smith" splits after "Dr.".

- Unsure: some token's probability is <= theta (``templates.py:749``, ``p <= low_prob``); theta = 1 is
  unsure whatever the probabilities, so it retrieves after every sentence even when a float32 softmax rounds
  a probability to exactly 1.0. theta = 0 never retrieves (greedy tokens have p > 0); the authors' code
  reads 0 as "no check" and always retrieves (``templates.py:743``).
- Masked (implicit) query: tokens with probability <= beta are replaced by a space and the rest kept
  (``templates.py:756``, ``t if p > mask_prob else ' '``).
- Explicit-query terms: tokens with probability <= beta, grouped into one term when fewer than
  ``MIN_GAP`` tokens apart, the tokens between them included (``templates.py:145-158``, ``min_gap=5``);
  terms made only of punctuation are dropped (``templates.py:169-170``; the authors drop a term equal to
  one ASCII punctuation character, ralm any term with no letter or digit, e.g. ``."``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

SENTENCE_END = re.compile(r"[.!?][\"'’”)\]]*(?=\s)|\n")
"""Where a sentence ends: after . ! or ? and any closing quotes or brackets, before whitespace; or at a
newline. FLARE's look-ahead stops here, and the long-form demo opens its prompts after it."""
MIN_GAP = 5
"""Unsure tokens this many positions apart (or more) start a new term (the authors' ``min_gap``)."""


def sentence_end(text: str) -> int | None:
    """Character offset just past the first sentence of `text` (leading whitespace skipped), or None."""
    start = len(text) - len(text.lstrip())
    match = SENTENCE_END.search(text, start)
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


def sentence_min_probs(
    decode: Callable[[list[int]], str], tokens: list[int], probs: Sequence[float], lookahead_tokens: int
) -> list[float]:
    """Each look-ahead sentence's lowest token probability, cutting `tokens` as FLARE cuts its look-aheads
    (at the first sentence end within `lookahead_tokens`): what decides whether it would retrieve."""
    out, start = [], 0
    while start < len(tokens):
        n = first_sentence_length(decode, tokens[start : start + lookahead_tokens])
        out.append(min(probs[start : start + n]))
        start += n
    return out


def is_unsure(probs: Sequence[float], theta: float) -> bool:
    """Whether the look-ahead triggers retrieval: theta = 1, or a token with probability <= theta."""
    return theta >= 1.0 or min(probs) <= theta


def masked_query(
    decode: Callable[[list[int]], str], tokens: Sequence[int], probs: Sequence[float], beta: float
) -> str:
    """The implicit query: the sentence with each token of probability <= beta replaced by a space (runs
    of kept tokens are decoded whole, so a kept word split into several tokens stays one word)."""
    runs: list[list[int]] = [[]]
    for token, p in zip(tokens, probs, strict=True):
        if p > beta:
            runs[-1].append(token)
        elif runs[-1]:
            runs.append([])
    return " ".join(text for text in (decode(run).strip() for run in runs if run) if text)


def low_confidence_terms(
    probs: Sequence[float], beta: float, min_gap: int = MIN_GAP
) -> list[tuple[int, int]]:
    """Token spans ``(start, end)`` of the terms explicit queries ask about: tokens with probability <= beta,
    a token fewer than `min_gap` positions after the previous such token extending its term."""
    spans: list[tuple[int, int]] = []
    previous = None
    for i, p in enumerate(probs):
        if p <= beta:
            if previous is None or i - previous >= min_gap:
                spans.append((i, i + 1))
            else:
                spans[-1] = (spans[-1][0], i + 1)
            previous = i
    return spans


def is_punctuation(term: str) -> bool:
    """A term with no letter or digit (punctuation, symbols, spaces; the empty term too)."""
    return not any(ch.isalnum() for ch in term)
