"""The models of conditions that choose before the evaluated LM scores a window (``Condition.chooses_first``).

- A trained predictive reranker (``--reranker PATH``, §6.2): its ``rank`` over the prefixes, candidates and
  their BM25 scores (abstention, the BM25 prior and the export's decision are the reranker's business).
- Zero-shot reranking with a *different* LM (``--rerank-lm``, §6.1; GPT-2 110M reranking for 1.5B in the
  paper): the window's context is decoded to text and re-tokenised with the reranking LM's tokenizer;
  each candidate is scored by log p_φ(y' | [d_i; prefix]) with y' its last ``s'`` tokens.
The other conditions pick off the evaluated LM's rows (``ralm.eval.ppl.conditions.pick``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.windows import Window
from ralm.lm.interface import LanguageModel
from ralm.lm.scoring import ScoreRequest, ScoringSettings, score_continuations
from ralm.passage_rules import TRAINED
from ralm.ranking import best_first

if TYPE_CHECKING:
    from ralm.eval.ppl.perplexity import Candidate
    from ralm.rerank.inference import PredictiveReranker


@dataclass(frozen=True)
class RerankLM:
    """A zero-shot reranking LM (``--rerank-lm``) and the input length it scores with."""

    lm: LanguageModel
    input_length: int


def choose_first(
    condition: Condition,
    model: PredictiveReranker | RerankLM,
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    settings: ScoringSettings,
) -> list[int | None]:
    """The pick of `condition`'s model per window of `windows` (in their order), before any LM scoring.

    A reranking LM scores as the evaluated LM does (`settings`), within its own input length."""
    if condition.kind == TRAINED:
        return trained_reranker(model, lm, tokens, windows, candidates)
    reranking = replace(settings, input_length=model.input_length)
    return zero_shot_other_lm(model.lm, lm, tokens, windows, candidates, reranking)


def context_texts(
    lm: LanguageModel, tokens: Sequence[int], windows: Sequence[Window], tail_tokens: int
) -> list[str]:
    """Decoded last `tail_tokens` of each window's context (what a text-level reranker reads as prefix)."""
    spans = [tokens[max(w.begin, w.target_start - tail_tokens) : w.target_start] for w in windows]
    return [lm.decode(s) for s in spans]


def _retrieving(
    windows: Sequence[Window], candidates: Sequence[Sequence[Candidate]]
) -> tuple[list[int], list[Window]]:
    """The positions in `windows` of those that retrieve and found candidates, and those windows: the ones
    a trained reranker's encoder reads."""
    slots = [pos for pos, w in enumerate(windows) if w.retrieves and candidates[w.index]]
    return slots, [windows[pos] for pos in slots]


def trained_reranker(
    reranker: PredictiveReranker,
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    tail_tokens: int = 512,
) -> list[int | None]:
    """Chosen candidate per window by a ``PredictiveReranker`` (its ``rank``: abstention and prior inside).

    The result lines up with `windows` (which may be a resumed run's remaining subset), not with window
    indices.
    """
    slots, todo = _retrieving(windows, candidates)
    chosen: list[int | None] = [None] * len(windows)
    if not todo:
        return chosen
    prefixes = context_texts(lm, tokens, todo, tail_tokens)
    texts = [[c.text for c in candidates[w.index]] for w in todo]
    bm25 = [[c.bm25_score for c in candidates[w.index]] for w in todo]
    for pos, pick in zip(slots, reranker.rank(prefixes, texts, bm25), strict=True):
        chosen[pos] = pick
    return chosen


def stacked_corrections(
    reranker: PredictiveReranker,
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    tail_tokens: int = 512,
) -> list[tuple[float, ...] | None]:
    """A stacked reranker's encoder scores per window of `windows` (its candidates', then with abstention
    the empty passage's; None where the window does not retrieve): what ``ralm.passage_rules.stacked_pick``
    adds to the evaluated LM's y' scores once they are in the row."""
    slots, todo = _retrieving(windows, candidates)
    scores: list[tuple[float, ...] | None] = [None] * len(windows)
    if not todo:
        return scores
    prefixes = context_texts(lm, tokens, todo, tail_tokens)
    empty = [""] if reranker.abstain else []
    texts = [[c.text for c in candidates[w.index]] + empty for w in todo]
    for pos, f in zip(slots, reranker.encoder_scores(prefixes, texts), strict=True):
        scores[pos] = tuple(f)
    return scores


def zero_shot_other_lm(
    rerank_lm: LanguageModel,
    lm: LanguageModel,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    settings: ScoringSettings,
    *,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[int | None]:
    """Chosen candidate per window by log p_φ(y' | [d_i; x]) under a reranking LM with its own tokenizer,
    y' the last ``settings.rank_tokens`` of the window's context (re-tokenised), in inputs of
    ``settings.input_length`` tokens: the reranking LM's.

    The result lines up with `windows` (which may be a resumed run's remaining subset), not with window
    indices.
    """
    slots = {w.index: pos for pos, w in enumerate(windows)}
    todo = [w for w in windows if w.retrieves and candidates[w.index]]
    chosen: list[int | None] = [None] * len(windows)
    if not todo:
        return chosen
    contexts = rerank_lm.encode_batch(context_texts(lm, tokens, todo, settings.input_length))
    passage_ids: dict[str, tuple[int, ...]] = {}
    unique = {c.id: c.text for w in todo for c in candidates[w.index]}
    for pid, ids in zip(unique, rerank_lm.encode_passages(list(unique.values())), strict=True):
        passage_ids[pid] = tuple(ids[: settings.max_passage_tokens])
    requests, owners = [], []
    for w, ctx in zip(todo, contexts, strict=True):
        y = ctx[-settings.rank_tokens :]
        prefix = ctx[: len(ctx) - len(y)]
        for i, c in enumerate(candidates[w.index]):
            requests.append(ScoreRequest(passage_ids[c.id], prefix, y))
            owners.append((w.index, i))
    scores = score_continuations(rerank_lm, requests, settings, on_batch=on_batch)
    by_window: dict[int, list[float]] = {}
    for (index, _), s in zip(owners, scores, strict=True):
        by_window.setdefault(index, []).append(float(s.double().sum()))
    for index, values in by_window.items():
        chosen[slots[index]] = best_first(values)[0]
    return chosen
