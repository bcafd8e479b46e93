"""The strided windows of In-Context RALM perplexity, exactly as the authors' ``eval_lm.py`` lays them out.

For ``begin in range(0, N, stride)``: ``end = min(begin + input_length, N)``, the window scores the tokens
``prev_end .. end - 1`` (``trg_len = end - prev_end``) and the loop stops once ``end == N``. Window 0
retrieves nothing and scores all of its tokens but the first (which has no context); every later window
retrieves with a query made of the ``ℓ`` tokens before ``prev_end`` (Ram et al. 2023, eq. 4).

Two departures from the reference script, both where it is broken:
- text shorter than one window is scored (the script's slicing crashes there);
- a passage replaces the first positions of a window's *context* only, never the tokens the script would
  also overwrite when the passage is longer than the context: then the passage sits right before the
  targets (the script silently conditions on a passage that covers the tokens just before them).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence, Sized
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """One scoring step: context ``tokens[begin:target_start]``, targets ``tokens[target_start:end]``."""

    index: int
    begin: int
    end: int
    prev_end: int
    """Where this window's new tokens start (the previous window's end); queries end here."""

    @property
    def target_start(self) -> int:
        # A target run as long as the window (window 0, or stride == input_length) leaves its first token
        # without context: eval_lm.py scores input_length - 1 tokens then, as plain chunked perplexity does.
        return max(self.prev_end, self.begin + 1)

    @property
    def num_targets(self) -> int:
        return self.end - self.target_start

    @property
    def retrieves(self) -> bool:
        """Window 0 makes no query (there is no prefix to make one from). Whether a window *retrieved* is
        ``retrieving_windows``: its query found a candidate."""
        return self.index > 0

    def context_start(self, passage_len: int) -> int:
        """First context token kept once a `passage_len`-token passage takes the window's first positions."""
        return min(self.begin + passage_len, self.target_start)

    def query_span(self, query_tokens: int) -> tuple[int, int]:
        """Token span of the retrieval query: the last ℓ tokens before ``prev_end`` (from the whole
        prefix)."""
        return max(0, self.prev_end - query_tokens), self.prev_end


def strided_windows(num_tokens: int, input_length: int, stride: int) -> list[Window]:
    """The windows eval_lm.py evaluates for a text of `num_tokens` tokens, in inputs of `input_length`."""
    if stride < 1 or input_length < 2 or stride > input_length:
        raise ValueError(
            f"need 1 <= stride <= input_length and input_length >= 2 "
            f"(stride {stride}, input_length {input_length})"
        )
    windows: list[Window] = []
    prev_end = 0
    for begin in range(0, num_tokens, stride):
        end = min(begin + input_length, num_tokens)
        windows.append(Window(index=len(windows), begin=begin, end=end, prev_end=prev_end))
        prev_end = end
        if end == num_tokens:
            break
    return windows


def ranking_span(window: Window, rank_tokens: int, max_passage_tokens: int) -> tuple[int, int]:
    """Tokens ``y'`` a zero-shot reranker scores: the `rank_tokens` just before the targets (§6.1).

    Kept inside the part of the context that no passage of up to `max_passage_tokens` can cover, so the
    same forward pass that ranks a candidate also gives its target log-probabilities under exactly the
    input the final scoring uses (eval_lm.py does the same when the context is long enough, which at the
    paper's 1024 tokens and 256-token passages it always is).
    """
    start = max(window.target_start - rank_tokens, window.context_start(max_passage_tokens))
    return start, window.target_start


def retrieving_windows(candidates: Iterable[Sized]) -> list[int]:
    """The positions of the retrieving windows, given each window's candidates in order: a window retrieves
    when its query found at least one candidate (window 0 makes no query; a query may find no hit). The
    one definition behind every ``retrieving_windows`` count and every rate divided by it."""
    return [i for i, found in enumerate(candidates) if len(found) > 0]


def window_documents(target_starts: Sequence[int], document_starts: Sequence[int]) -> list[int]:
    """The document of each window: the one holding its first target token (`document_starts`: the token
    at which each document starts, ascending, the first 0)."""
    return [bisect.bisect_right(document_starts, t) - 1 for t in target_starts]
