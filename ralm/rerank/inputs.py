"""THE rule for turning (prefix, passage) into cross-encoder input; shared by training and inference.

Input format ``prefix-tail/passage`` (recorded as ``input_format`` in ``ralm_reranker.json``): the
encoder's own pair template (``[CLS] prefix [SEP] passage [SEP]`` for BERT, ``<s> prefix </s></s>
passage </s>`` for RoBERTa) with

- the prefix cut to its last ``max_prefix_tokens`` reranker tokens (``ralm.rerank.pair_rule``, which
  every export carries for sentence-transformers);
- the passage cut from its end so the whole pair fits ``max_length``.

The empty passage (``--abstain``) is encoded like any other: the prefix and an empty second segment.
No Lightning here: ``ralm.eval`` imports this through ``ralm.rerank.inference``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ralm.rerank.pair_rule import prefix_tails  # standalone: the export carries a copy

# Annotations only: the settings import check_lengths, and building a parser need not load transformers.
if TYPE_CHECKING:
    from transformers import BatchEncoding, PreTrainedTokenizerBase

INPUT_FORMAT = "prefix-tail/passage"

# Re-tokenizing the cut prefix text can merge differently at the cut by a token or two; this slack
# keeps the prefix within the pair budget so truncation only ever cuts the passage.
_PREFIX_SLACK = 8


PRIOR_RULE = "bm25-zscore"
"""How BM25 scores become the prior ``z`` (recorded as ``bm25_prior.rule`` in ``ralm_reranker.json``)."""


def bm25_prior(scores: Sequence[float]) -> list[float]:
    """BM25 scores standardised within one candidate group: ``(s - mean) / std`` (0 when all are equal).

    Raw BM25 scores have a query-dependent scale (long queries score higher), so the prior uses their
    spread within the group; it is strictly increasing in the score, so argmax z is BM25's top-1.
    """
    if not scores:
        return []
    mean = sum(scores) / len(scores)
    std = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    if std < 1e-6:
        return [0.0] * len(scores)
    return [(s - mean) / std for s in scores]


def check_lengths(max_length: int, max_prefix_tokens: int, field: str = "max_prefix_tokens") -> None:
    """The prefix must leave room for specials and some passage; raises ValueError naming the field."""
    if max_prefix_tokens < 1 or max_prefix_tokens + _PREFIX_SLACK + 4 > max_length:
        raise ValueError(
            f"{field}={max_prefix_tokens} must be between 1 and "
            f"max_length - {_PREFIX_SLACK + 4} ({max_length})"
        )


def encode_pairs(
    tokenizer: PreTrainedTokenizerBase,
    prefixes: Sequence[str],
    passages: Sequence[str],
    *,
    max_length: int,
    max_prefix_tokens: int,
    tails_done: bool = False,
) -> BatchEncoding:
    """Padded tensors for (prefix, passage) pairs; pass ``tails_done=True`` if prefixes are already cut."""
    if len(prefixes) != len(passages):
        raise ValueError(f"{len(prefixes)} prefixes but {len(passages)} passages")
    tails = list(prefixes) if tails_done else prefix_tails(tokenizer, prefixes, max_prefix_tokens)
    return tokenizer(
        tails,
        list(passages),
        truncation="only_second",
        max_length=max_length,
        padding="longest",
        return_tensors="pt",
    )


def encode_groups(
    tokenizer: PreTrainedTokenizerBase,
    prefixes: Sequence[str],
    candidates: Sequence[Sequence[str]],
    *,
    max_length: int,
    max_prefix_tokens: int,
) -> BatchEncoding:
    """Pairs for every candidate of every prefix, flattened prefix-major; each prefix is cut once."""
    if len(prefixes) != len(candidates):
        raise ValueError(f"{len(prefixes)} prefixes but {len(candidates)} candidate lists")
    tails = prefix_tails(tokenizer, prefixes, max_prefix_tokens)
    flat_prefixes = [tail for tail, group in zip(tails, candidates, strict=True) for _ in group]
    flat_passages = [passage for group in candidates for passage in group]
    return encode_pairs(
        tokenizer,
        flat_prefixes,
        flat_passages,
        max_length=max_length,
        max_prefix_tokens=max_prefix_tokens,
        tails_done=True,
    )
