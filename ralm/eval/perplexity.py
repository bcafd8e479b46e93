"""Strided In-Context RALM perplexity: per-window NLL given the chosen passage (Ram et al. 2023, eq. 4).

Every window becomes one or more ``ScoreRequest``s for ``ralm.lm.scoring.score_continuations``:
- ``fixed``: the passage was chosen before scoring (none, BM25 top-1, a trained reranker, or a zero-shot
  reranker LM with its own tokenizer): one request per window;
- ``oracle``: every candidate is scored on the true targets and the best one is kept (Figure 7's bound);
- ``zero-shot``: every candidate is scored on ``y'`` (the ``s'`` tokens before the targets) *and* the
  targets in one request; the candidate with the best ``y'`` log-probability wins and its target
  log-probabilities are the window's (eval_lm.py's ``logprob`` strategy: one forward per candidate).
Ties go to the earlier (higher BM25) candidate, as ``torch.argmin`` does in the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ralm.eval.windows import Window, ranking_span
from ralm.lm.loading import FrozenLM
from ralm.lm.scoring import ScoreRequest, score_continuations

STRATEGIES = ("fixed", "oracle", "zero-shot")


@dataclass(frozen=True)
class Candidate:
    """A retrieved passage: its id, its ``contents`` text and its LM tokens already cut to max_passage_tokens."""

    id: str
    text: str
    tokens: tuple[int, ...]
    bm25_score: float | None = None
    """BM25 score of this passage for this window's query (a reranker's BM25 prior reads it)."""


@dataclass
class WindowScore:
    index: int
    nll: float
    """Sum of the target tokens' negative log-likelihoods (nats)."""
    num_targets: int
    chosen: int | None
    """Index of the chosen candidate in BM25 order, or None when nothing was prepended."""
    passage_id: str | None


@dataclass(frozen=True)
class ScoringSettings:
    max_length: int
    max_passage_tokens: int = 256
    rank_tokens: int = 16
    batch_size: int | None = None
    """Rows per forward; None: ralm.lm.scoring.default_batch_size (2 on CPU, 32 on GPU)."""
    max_batch_tokens: int | None = None


def window_request(
    tokens: Sequence[int], window: Window, passage: Sequence[int], target_from: int | None = None
) -> ScoreRequest:
    """[passage; window context after the passage's positions] -> tokens[target_from:end]."""
    target_from = window.target_start if target_from is None else target_from
    start = window.context_start(len(passage))
    return ScoreRequest(tuple(passage), tokens[start:target_from], tokens[target_from : window.end])


def _plan(
    tokens: Sequence[int],
    window: Window,
    candidates: Sequence[Candidate],
    strategy: str,
    chosen: int | None,
    settings: ScoringSettings,
) -> tuple[list[ScoreRequest], int]:
    """Requests for one window, and how many leading target tokens of each are ranking tokens (y')."""
    if strategy == "fixed" or not candidates or not window.retrieves:
        passage = (
            candidates[chosen].tokens if (chosen is not None and window.retrieves and candidates) else ()
        )
        return [window_request(tokens, window, passage)], 0
    if strategy == "oracle":
        return [window_request(tokens, window, c.tokens) for c in candidates], 0
    rank_start, _ = ranking_span(window, settings.rank_tokens, settings.max_passage_tokens)
    requests = [window_request(tokens, window, c.tokens, target_from=rank_start) for c in candidates]
    return requests, window.target_start - rank_start


def _decide(
    window: Window, candidates: Sequence[Candidate], strategy: str, chosen: int | None, scores, n_rank: int
):
    """(nll, chosen index) from the log-prob tensors of one window's requests."""
    if strategy == "fixed" or not candidates or not window.retrieves:
        picked = chosen if (chosen is not None and window.retrieves and candidates) else None
        return -float(scores[0].double().sum()), picked
    # Rank by the y' tokens (zero-shot) or by the targets themselves (oracle, n_rank == 0).
    rank_values = [-float(s[:n_rank].double().sum()) if n_rank else -float(s.double().sum()) for s in scores]
    best = min(range(len(rank_values)), key=lambda i: (rank_values[i], i))
    return -float(scores[best][n_rank:].double().sum()), best


def score_windows(
    lm: FrozenLM,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    *,
    strategy: str,
    settings: ScoringSettings,
    preselected: Sequence[int | None] | None = None,
    chunk_windows: int = 64,
    on_batch: Callable[[int, int], None] | None = None,
) -> Iterator[list[WindowScore]]:
    """Yield the scores of `windows` chunk by chunk (callers persist each chunk: a killed run resumes).

    `candidates[w.index]` are the window's retrieved passages (empty: no retrieval for it);
    `preselected[w.index]` is the chosen candidate for the ``fixed`` strategy.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    for lo in range(0, len(windows), chunk_windows):
        chunk = windows[lo : lo + chunk_windows]
        plans = []
        requests: list[ScoreRequest] = []
        for w in chunk:
            chosen = preselected[w.index] if preselected is not None else (0 if strategy == "fixed" else None)
            reqs, n_rank = _plan(tokens, w, candidates[w.index], strategy, chosen, settings)
            plans.append((w, chosen, len(requests), len(reqs), n_rank))
            requests.extend(reqs)
        scores = score_continuations(
            lm,
            requests,
            max_length=settings.max_length,
            max_passage_tokens=settings.max_passage_tokens,
            batch_size=settings.batch_size,
            max_batch_tokens=settings.max_batch_tokens,
            on_batch=on_batch,
        )
        out = []
        for w, chosen, start, count, n_rank in plans:
            cands = candidates[w.index]
            nll, picked = _decide(w, cands, strategy, chosen, scores[start : start + count], n_rank)
            out.append(
                WindowScore(
                    index=w.index,
                    nll=nll,
                    num_targets=w.num_targets,
                    chosen=picked,
                    passage_id=cands[picked].id if picked is not None else None,
                )
            )
        yield out
