"""What each retrieving window's BM25 query is made of (``QueryOptions.query_form``).

- ``past``: the decoded last ℓ tokens before the window's targets (Ram et al. 2023, eq. 4; the authors'
  prepare_retrieval_data.py). It finds the passage that matches what was just said.
- ``lookahead``: the LM's own greedy guess of the next s tokens, generated from the window's context with no
  passage, with the tokens it gave a probability below β left out (FLARE's masked query, Jiang et al. 2023
  §3.2). It asks for the passage that holds what comes next. A guess whose every token falls below β is
  replaced by the past query (counted in ``lookahead_fallbacks``).
- ``past+lookahead``: the past ℓ tokens followed by the kept look-ahead tokens, decoded as one span.
- ``future``: the true next s tokens. It reads the targets, so it is a bound on what a look-ahead query
  could find, not a method (the oracle's kin).

The look-ahead prompt is the window's input before its targets: its head (the LM's lead, its BOS, or with
``--lookahead-context passage`` BM25's top-1 passage for the past query, as the window would be scored
with it) and the last ``input_length - s - len(head)`` tokens before ``prev_end``, so prompt and look-ahead
fit the input the window is scored with. Prompts are decoded together (``generate_batch``, greedy, left
padding: each row equals its lone decode), in fixed chunks, so a resumed run makes the same queries.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ralm.eval.ppl.options import FUTURE, PAST, PAST_AND_LOOKAHEAD, QueryOptions
from ralm.eval.ppl.windows import Window
from ralm.lm.generation import generate_batch
from ralm.lm.interface import LanguageModel

LOOKAHEAD_CHUNK = 16
"""Prompts decoded together (bounds the KV cache; fixed, so a window's look-ahead never depends on how
many windows a run has)."""


def kept_tokens(token_ids: Sequence[int], probs: Sequence[float], mask_below: float) -> list[int]:
    """The look-ahead tokens FLARE's masked query keeps: those the LM gave a probability of at least β."""
    return [t for t, p in zip(token_ids, probs, strict=True) if p >= mask_below]


def lookahead_prompt(
    tokens: Sequence[int], window: Window, input_length: int, lookahead: int, head: Sequence[int]
) -> list[int]:
    """`head` (the LM's lead, or a passage) and the last ``input_length - lookahead - len(head)`` tokens
    before ``prev_end``."""
    room = input_length - lookahead - len(head)
    if room < 1:
        raise ValueError(f"input_length {input_length} leaves no context for a {lookahead}-token look-ahead")
    return [*head, *tokens[max(0, window.prev_end - room) : window.prev_end]]


@dataclass(frozen=True)
class WindowQueries:
    """Each window's query (None for a window that makes none) and what making them cost."""

    queries: list[str | None]
    generated_tokens: int = 0
    """Look-ahead tokens the LM generated (its cost per retrieval is this over the retrieving windows)."""
    lookahead_fallbacks: int = 0
    """Retrieving windows whose look-ahead kept no token and queried with the past ℓ tokens instead."""
    seconds: float = 0.0
    """Time spent generating look-aheads."""

    def record(self) -> dict:
        """The timings keys of results.json (only when the LM generated)."""
        if not self.generated_tokens:
            return {}
        return {
            "lookahead_s": self.seconds,
            "lookahead_generated_tokens": self.generated_tokens,
            "lookahead_fallbacks": self.lookahead_fallbacks,
        }


def window_queries(
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    query_tokens: int,
    form: QueryOptions | None = None,
    *,
    stride: int | None = None,
    input_length: int | None = None,
    heads: Sequence[Sequence[int]] | None = None,
) -> WindowQueries:
    """The decoded query of every retrieving window (None for window 0) in `form` (default: past).

    `stride` is the look-ahead's default span; `input_length` bounds the look-ahead prompt; `heads`, one per
    retrieving window, is what each look-ahead prompt starts with (default: the LM's lead)."""
    form = form or QueryOptions()
    retrieving = [w for w in windows if w.retrieves]
    span = form.lookahead_tokens or stride or 0
    past = [list(tokens[slice(*w.query_span(query_tokens))]) for w in retrieving]
    if form.query_form == PAST:
        parts = past
    elif form.query_form == FUTURE:
        parts = [list(tokens[w.prev_end : w.prev_end + span]) for w in retrieving]
    else:
        heads = heads if heads is not None else [lm.lead] * len(retrieving)
        return _lookahead_queries(lm, tokens, windows, retrieving, past, form, span, input_length, heads)
    return WindowQueries(_placed(lm, windows, parts))


def _placed(lm: LanguageModel, windows: Sequence[Window], parts: list[list[int]]) -> list[str | None]:
    """Each retrieving window's decoded query part (in order), None for the windows that make none."""
    decoded = iter([lm.decode(p) for p in parts])
    return [next(decoded) if w.retrieves else None for w in windows]


def _lookahead_queries(
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    retrieving: Sequence[Window],
    past: list[list[int]],
    form: QueryOptions,
    span: int,
    input_length: int | None,
    heads: Sequence[Sequence[int]],
) -> WindowQueries:
    if span < 1 or input_length is None:
        raise ValueError("a look-ahead query needs its span (lookahead_tokens or stride) and input_length")
    started = time.perf_counter()
    pairs = zip(retrieving, heads, strict=True)
    prompts = [lookahead_prompt(tokens, w, input_length, span, head) for w, head in pairs]
    generations = []
    for lo in range(0, len(prompts), LOOKAHEAD_CHUNK):
        generations += generate_batch(lm, prompts[lo : lo + LOOKAHEAD_CHUNK], span)
    parts, fallbacks = [], 0
    for before, generation in zip(past, generations, strict=True):
        kept = kept_tokens(generation.token_ids, generation.probs, form.lookahead_mask)
        if not kept:
            fallbacks += 1
        parts.append(before + kept if form.query_form == PAST_AND_LOOKAHEAD or not kept else kept)
    return WindowQueries(
        _placed(lm, windows, parts),
        generated_tokens=sum(len(g.token_ids) for g in generations),
        lookahead_fallbacks=fallbacks,
        seconds=time.perf_counter() - started,
    )
