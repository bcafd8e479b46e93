"""Strided In-Context RALM perplexity: the LM rows of each window (Ram et al. 2023, eq. 4).

A window's rows are what ``ralm.eval.ppl.conditions.plan_rows`` asks for: the no-passage row and some of its
candidates, each ``[d_i; context] -> targets`` as one ``ScoreRequest`` for
``ralm.lm.scoring.score_continuations``. With same-LM zero-shot among the conditions a candidate's row
also scores the ranking tokens y' (the ``s'`` tokens before the targets) in the same request: its target
log-probabilities are those of the plain request, and y' ranks it (eval_lm.py's ``logprob`` strategy:
one forward per candidate). The rows come back as table rows; ``conditions.pick`` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ralm.eval.ppl.conditions import RowPlan
from ralm.eval.ppl.records import CandidateScores, WindowScores
from ralm.eval.ppl.windows import Window, ranking_span
from ralm.lm.interface import LanguageModel
from ralm.lm.scoring import ScoreRequest, ScoringSettings, score_continuations
from ralm.retrieval.overlap import copies_span, ngrams


@dataclass(frozen=True)
class Candidate:
    """A retrieved passage: its id, its ``contents`` text and its LM tokens already cut to
    max_passage_tokens."""

    id: str
    text: str
    tokens: tuple[int, ...]
    bm25_score: float | None = None
    """BM25 score of this passage for this window's query (a reranker's BM25 prior reads it)."""


def window_request(
    tokens: Sequence[int], window: Window, passage: Sequence[int], target_from: int | None = None
) -> ScoreRequest:
    """[passage; window context after the passage's positions] -> tokens[target_from:end]."""
    target_from = window.target_start if target_from is None else target_from
    start = window.context_start(len(passage))
    return ScoreRequest(tuple(passage), tokens[start:target_from], tokens[target_from : window.end])


def bare_request(
    tokens: Sequence[int], window: Window, lead: Sequence[int] = (), target_from: int | None = None
) -> ScoreRequest:
    """No passage: `lead` (the LM's start of an input without a passage, ``LanguageModel.lead``) then the
    window's context, from which ``compose`` drops the fewest first tokens to fit: the lead plus the
    window's last ``input_length - len(lead)`` tokens (with no lead, eval_lm.py's plain window). With
    `target_from` before the targets, the tokens from there on are scored too (the ranking tokens y'): the
    input is the same either way."""
    target_from = window.target_start if target_from is None else target_from
    return ScoreRequest((), tokens[window.begin : target_from], tokens[target_from : window.end], tuple(lead))


def matched_request(
    tokens: Sequence[int], window: Window, displaced: int, lead: Sequence[int] = ()
) -> ScoreRequest:
    """No passage, and the context cut where a `displaced`-token passage would cut it: the same targets
    with the context BM25's passage leaves (the context-matched baseline). `lead`: the LM's start of an
    input without a passage (``LanguageModel.lead``); a passage carries the same prefix in its own first
    tokens, so the two inputs differ by the passage's text alone."""
    start = window.context_start(displaced)
    return ScoreRequest(
        (), tokens[start : window.target_start], tokens[window.target_start : window.end], tuple(lead)
    )


def blank_row(window: Window, candidates: Sequence[Candidate]) -> WindowScores:
    """A window's table row before scoring: its candidates in BM25 order, every LM value still null."""
    cands = candidates if window.retrieves else ()
    return WindowScores(
        window.index,
        window.target_start,
        window.num_targets,
        candidates=[CandidateScores(c.id, c.bm25_score) for c in cands],
    )


def _requests(
    tokens: Sequence[int],
    window: Window,
    candidates: Sequence[Candidate],
    plan: RowPlan,
    settings: ScoringSettings,
    lead: Sequence[int],
) -> tuple[list[ScoreRequest], int]:
    """The planned requests of one window, and how many leading target tokens of a candidate's are y'.

    The no-passage rows start with `lead` (``LanguageModel.lead``) in the passage's place: no retrieval is
    then the lead plus the window's last ``input_length - len(lead)`` tokens, as a passage is its own lead
    plus text followed by what context it leaves."""
    target_from = window.target_start
    if plan.rank_tokens and plan.candidates:
        target_from = ranking_span(window, settings.rank_tokens, settings.max_passage_tokens)[0]
    # The no-passage row scores y' too: the same input, so its targets' log-probs are unchanged.
    requests = [bare_request(tokens, window, lead, target_from)] if plan.bare else []
    if plan.matched:
        requests.append(matched_request(tokens, window, len(candidates[0].tokens), lead))
    requests += [window_request(tokens, window, candidates[i].tokens, target_from) for i in plan.candidates]
    return requests, window.target_start - target_from


def score_rows(
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    plans: Mapping[int, RowPlan],
    settings: ScoringSettings,
    *,
    chunk_windows: int = 16,
    on_batch: Callable[[int, int], None] | None = None,
) -> Iterator[list[WindowScores]]:
    """Yield the table rows of `windows` chunk by chunk (callers persist each chunk: a killed run resumes).

    `plans[w.index]` says which of the window's rows to score; the others stay null in its table row.
    """
    grams: dict[str, set] = {}  # each passage's token runs, built once however many windows retrieve it
    for lo in range(0, len(windows), chunk_windows):
        chunk = windows[lo : lo + chunk_windows]
        requests: list[ScoreRequest] = []
        starts = []
        for w in chunk:
            reqs, n_rank = _requests(tokens, w, candidates[w.index], plans[w.index], settings, lm.lead)
            starts.append((len(requests), n_rank))
            requests.extend(reqs)
        scores = score_continuations(lm, requests, settings, on_batch=on_batch)
        rows = []
        for w, (start, n_rank) in zip(chunk, starts, strict=True):
            plan, row = plans[w.index], blank_row(w, candidates[w.index])
            scored = iter(scores[start : start + plan.rows])
            if plan.bare:
                s = next(scored)
                row.no_passage_nll = -float(s[n_rank:].double().sum())
                if plan.rank_tokens:  # as the candidates' y' below
                    row.no_passage_rank_logprob = float((s[:n_rank] if n_rank else s).double().sum())
            if plan.matched:
                row.matched_nll = -float(next(scored).double().sum())
            for i in plan.candidates:
                s, entry, passage = next(scored), row.candidates[i], candidates[w.index][i]
                entry.nll = -float(s[n_rank:].double().sum())
                if plan.rank_tokens:  # y' ranks; with no y' left (n_rank 0) the targets themselves do
                    entry.rank_logprob = float((s[:n_rank] if n_rank else s).double().sum())
                if passage.id not in grams:
                    grams[passage.id] = ngrams(passage.tokens)
                entry.copies_target = copies_span(grams[passage.id], tokens, w.target_start, w.end)
            rows.append(row)
        yield rows
