"""Score one prefix's candidates with the frozen LM and build its dataset row.

Every candidate of a prefix and the no-retrieval input go to ``score_continuations`` together, so they
share one padded batch (same prefix, same target). A prefix is never batched with another prefix: a row's
numbers then depend only on that prefix, not on which shard or process it landed in, which is what makes
a resumed or a multi-process run identical row for row to a single uninterrupted one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ralm.data_gen.prefixes import PrefixTokens
from ralm.lm.scoring import ScoreRequest, ScoringSettings, score_continuations
from ralm.retrieval.types import Hit


class PassageTokens:
    """Token ids of passage ``contents``, cut to `max_passage_tokens`, cached by passage id.

    Popular passages come back for many queries; an LRU cache saves re-tokenizing them.
    """

    def __init__(self, lm, max_passage_tokens: int, capacity: int = 100_000) -> None:
        self.lm, self.max_passage_tokens, self.capacity = lm, max_passage_tokens, capacity
        self._cache: OrderedDict[str, list[int]] = OrderedDict()

    def __call__(self, hits: Sequence[Hit]) -> list[list[int]]:
        missing = [h for h in dict.fromkeys(h.id for h in hits) if h not in self._cache]
        if missing:
            by_id = {h.id: h.contents for h in hits}
            for pid, ids in zip(missing, self.lm.encode_passages([by_id[p] for p in missing]), strict=True):
                self._cache[pid] = ids[: self.max_passage_tokens]
        out = []
        for h in hits:
            self._cache.move_to_end(h.id)
            out.append(self._cache[h.id])
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)
        return out


@dataclass(frozen=True)
class PrefixScores:
    """One prefix's LM log-probs: per token of the target after each passage and after none, and summed over
    the ranking tokens y' (the prefix's last ``rank_tokens``) after each passage and after none."""

    candidates: list[list[float]]
    no_retrieval: list[float]
    candidates_rank: list[float]
    no_retrieval_rank: float


def score_group(
    lm, passages: list[list[int]], prefix: Sequence[int], target: Sequence[int], settings: ScoringSettings
) -> list[list[float]]:
    """log p(target | [passage; prefix]) per token for each passage, then for no passage (last), in one
    batch: batch_size and the token budget are set so the scorer never splits it (a row's numbers then
    depend on its own prefix only)."""
    requests = [ScoreRequest(passage=p, prefix=prefix, target=target) for p in passages]
    # No passage: the LM's lead in the passage's place (its BOS unless --special-tokens eval-lm), so the
    # row differs from a candidate's by the passage's text alone (ralm.lm.special_tokens).
    requests.append(ScoreRequest(passage=(), prefix=prefix, target=target, lead=tuple(lm.lead)))
    whole = replace(
        settings, batch_size=len(requests), max_batch_tokens=len(requests) * settings.input_length
    )
    scores = score_continuations(lm, requests, whole)
    return [s.float().cpu().tolist() for s in scores]


def score_prefix(
    lm, tokens: PrefixTokens, passages: list[list[int]], settings: ScoringSettings
) -> PrefixScores:
    """log p(target | [passage; prefix]) per token for each passage and for none, and log p(y' | [passage;
    prefix without y']) with y' the prefix's last ``settings.rank_tokens`` tokens (the zero-shot rule's
    score, §6.1).

    y' is scored in the same forward pass: each request's target is y' + target after the prefix without
    y', so the LM reads exactly the input it reads for the target alone (``compose`` drops prefix tokens
    from the start, the same ones either way) and the target's log-probs are those of a run without y'."""
    rank_tokens = settings.rank_tokens
    if not 0 < rank_tokens < len(tokens.prefix):
        raise ValueError(
            f"rank_tokens {rank_tokens} must be in [1, {len(tokens.prefix)}) (the prefix's tokens)"
        )
    head, ranked = tokens.prefix[:-rank_tokens], tokens.prefix[-rank_tokens:]
    target = list(ranked) + list(tokens.target)
    per_token = score_group(lm, passages, head, target, settings)
    rank = [float(sum(t[:rank_tokens])) for t in per_token]
    targets = [t[rank_tokens:] for t in per_token]
    return PrefixScores(targets[:-1], targets[-1], rank[:-1], rank[-1])


def make_row(
    *,
    prefix_index: int,
    doc_id: str,
    position: int,
    tokens: PrefixTokens,
    hits: Sequence[Hit],
    scores: PrefixScores,
    decode,
) -> dict:
    """One dataset row (docs/formats.md §4); log-probs are summed here, per-token values kept beside them."""
    candidate_token_logprobs, no_retrieval_token_logprobs = scores.candidates, scores.no_retrieval
    return {
        "prefix_index": prefix_index,
        "doc_id": doc_id,
        "position": position,
        "prefix": decode(tokens.prefix),
        "target": decode(tokens.target),
        "query": decode(tokens.query),
        "candidate_ids": [h.id for h in hits],
        "candidate_doc_ids": [h.doc_id for h in hits],
        "candidate_texts": [h.contents for h in hits],
        "bm25_scores": [float(h.score) for h in hits],
        "lm_logprobs": [float(sum(t)) for t in candidate_token_logprobs],
        "lm_token_logprobs": candidate_token_logprobs,
        "no_retrieval_logprob": float(sum(no_retrieval_token_logprobs)),
        "no_retrieval_token_logprobs": no_retrieval_token_logprobs,
        "lm_rank_logprobs": scores.candidates_rank,
        "no_retrieval_rank_logprob": scores.no_retrieval_rank,
    }
