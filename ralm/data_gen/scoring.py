"""Score one prefix's candidates with the frozen LM and build its dataset row.

Every candidate of a prefix and the no-retrieval input go to ``score_continuations`` together, so they
share one padded batch (same prefix, same target). A prefix is never batched with another prefix: a row's
numbers then depend only on that prefix, not on which shard or process it landed in, which is what makes
a resumed or a multi-process run identical row for row to a single uninterrupted one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ralm.data_gen.prefixes import PrefixTokens
from ralm.lm.scoring import ScoreRequest, score_continuations
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


def score_prefix(
    lm, tokens: PrefixTokens, passages: list[list[int]], *, max_length: int, max_passage_tokens: int
) -> tuple[list[list[float]], list[float]]:
    """Per-token log p(target | [passage; prefix]) for each passage, and log p(target | prefix)."""
    requests = [ScoreRequest(passage=p, prefix=tokens.prefix, target=tokens.target) for p in passages]
    requests.append(ScoreRequest(passage=[], prefix=tokens.prefix, target=tokens.target))
    # One batch for the whole prefix: batch_size and the token budget are set so the scorer never splits it.
    scores = score_continuations(
        lm,
        requests,
        max_length=max_length,
        max_passage_tokens=max_passage_tokens,
        batch_size=len(requests),
        max_batch_tokens=len(requests) * max_length,
    )
    per_token = [s.float().cpu().tolist() for s in scores]
    return per_token[:-1], per_token[-1]


def make_row(
    *,
    prefix_index: int,
    doc_id: str,
    position: int,
    tokens: PrefixTokens,
    hits: Sequence[Hit],
    candidate_token_logprobs: list[list[float]],
    no_retrieval_token_logprobs: list[float],
    decode,
) -> dict:
    """One dataset row (docs/formats.md §4); log-probs are summed here, per-token values kept beside them."""
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
    }
