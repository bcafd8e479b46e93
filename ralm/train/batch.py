"""The reranker's training records: one prefix's candidate ``Group`` (a dataset item) and the ``RankBatch``
the collator makes of several, with every field present whatever the flags (``--abstain``,
``--bm25-prior``): an absent feature is an empty tensor, never a missing key.

Only real (prefix, passage) pairs are encoded; ``mask`` says where they go in the (prefixes, k) grid, and
padded slots carry ``MASKED`` log-probs so no loss or metric ever selects them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from transformers import PreTrainedTokenizerBase

from ralm.rerank.inputs import encode_groups
from ralm.train.losses import MASKED


@dataclass(frozen=True)
class Group:
    """One prefix and its candidates, in BM25 order (candidate 0 is BM25's top-1; with ``--abstain`` the
    empty passage comes last)."""

    prefix: str
    passages: list[str]
    lm_logprobs: list[float]
    """The frozen LM's log-prob of the target given each passage (the empty one: given no passage)."""
    is_empty: list[bool]
    """True for the empty passage (``--abstain``)."""
    bm25_prior: list[float]
    """With ``--bm25-prior``: each passage's BM25 score standardised within the group, the empty passage
    0.0 (it has no BM25 score; the module scores it with its abstention terms). Empty without the prior."""
    bm25_top: float | None
    """With ``--bm25-prior``: the group's best BM25 score, raw (how strongly the best passage matched).
    None without the prior."""
    rank_logprobs: list[float] | None = None
    """With the y' target (``--rank-weight``): the LM's log-prob of the prefix's own last tokens y' given
    each passage (the empty one: given no passage). None without it."""


@dataclass
class RankBatch:
    """Groups tokenized and padded on the candidate axis: `pairs` real pairs, `prefixes` x `k` slots.

    Not frozen: Lightning's precision plugins (DeepSpeed, ``*-true``) rebuild a batch field by field with
    ``apply_to_collection``, which refuses frozen dataclasses. They also cast every floating-point tensor of
    the batch to the training dtype: the labels are therefore kept as their float32 bits
    (``lm_logprobs_bits``, int32) and read back exactly through ``lm_logprobs`` (bf16 would round a log-prob
    near -40 to a multiple of 0.25). ``to`` is how Lightning moves it (any object with a ``to(device)``
    method) and how the export decision does.
    """

    input_ids: torch.Tensor
    """(pairs, length) long: the encoder's pair template, prefix-major."""
    attention_mask: torch.Tensor
    """(pairs, length)."""
    token_type_ids: torch.Tensor
    """(pairs, length) where the tokenizer makes segment ids (BERT); shape (0,) where it does not
    (RoBERTa), and the encoder then gets none."""
    mask: torch.Tensor
    """(prefixes, k) bool: True where a real pair sits, False on padding."""
    lm_logprobs_bits: torch.Tensor
    """(prefixes, k) int32: the bits of each candidate's float32 LM log-prob (``MASKED`` on padding); read
    them as ``lm_logprobs``."""
    is_empty: torch.Tensor
    """(prefixes, k) bool: the empty passage's slot (all False without ``--abstain``)."""
    bm25_prior: torch.Tensor
    """(prefixes, k) float32: the groups' ``bm25_prior`` (0 on padding, masked in the scores anyway);
    shape (0,) without ``--bm25-prior``."""
    bm25_top: torch.Tensor
    """(prefixes,) float32: the groups' ``bm25_top``; shape (0,) without ``--bm25-prior``."""
    rank_logprobs_bits: torch.Tensor
    """(prefixes, k) int32: the bits of each candidate's float32 y' log-prob (``MASKED`` on padding), kept
    as bits for the reason ``lm_logprobs_bits`` is; shape (0,) without the y' target."""

    @property
    def lm_logprobs(self) -> torch.Tensor:
        """(prefixes, k) float32: each candidate's LM log-prob, exactly as data-gen wrote it."""
        return self.lm_logprobs_bits.view(torch.float32)

    @property
    def rank_logprobs(self) -> torch.Tensor | None:
        """(prefixes, k) float32: each candidate's y' log-prob; None without the y' target."""
        return self.rank_logprobs_bits.view(torch.float32) if self.rank_logprobs_bits.numel() else None

    @property
    def prefixes(self) -> int:
        return self.mask.shape[0]

    @property
    def has_bm25(self) -> bool:
        """The groups carried BM25 scores (``--bm25-prior``): ``bm25_prior`` and ``bm25_top`` are filled."""
        return self.bm25_top.numel() > 0

    def encoder_inputs(self) -> dict[str, torch.Tensor]:
        """The cross-encoder's keyword arguments (no ``token_type_ids`` where the tokenizer made none)."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.token_type_ids.numel():
            inputs["token_type_ids"] = self.token_type_ids
        return inputs

    def to(self, device: torch.device | str) -> RankBatch:
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def _absent(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An absent feature: shape (0,) (a fresh one per batch: workers move batches to shared memory)."""
    return torch.zeros(0, dtype=dtype)


class GroupCollator:
    """Tokenizes a list of ``Group`` (in the dataloader worker) into a ``RankBatch``."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, *, max_length: int, max_prefix_tokens: int):
        self.tokenizer, self.max_length, self.max_prefix_tokens = tokenizer, max_length, max_prefix_tokens

    def __call__(self, groups: list[Group]) -> RankBatch:
        k = max(len(g.passages) for g in groups)
        mask = torch.zeros(len(groups), k, dtype=torch.bool)
        lm = torch.full((len(groups), k), MASKED, dtype=torch.float32)
        is_empty = torch.zeros(len(groups), k, dtype=torch.bool)
        with_bm25 = groups[0].bm25_top is not None  # one dataset, one setting: every group alike
        prior = torch.zeros(len(groups), k, dtype=torch.float32) if with_bm25 else _absent()
        with_rank = groups[0].rank_logprobs is not None
        rank = torch.full((len(groups), k), MASKED, dtype=torch.float32) if with_rank else _absent()
        for i, g in enumerate(groups):
            n = len(g.passages)
            mask[i, :n] = True
            lm[i, :n] = torch.tensor(g.lm_logprobs, dtype=torch.float32)
            is_empty[i, :n] = torch.tensor(g.is_empty)
            if with_bm25:
                prior[i, :n] = torch.tensor(g.bm25_prior, dtype=torch.float32)
            if with_rank:
                rank[i, :n] = torch.tensor(g.rank_logprobs, dtype=torch.float32)
        encoded = encode_groups(
            self.tokenizer,
            [g.prefix for g in groups],
            [g.passages for g in groups],
            max_length=self.max_length,
            max_prefix_tokens=self.max_prefix_tokens,
        )
        return RankBatch(
            input_ids=encoded["input_ids"],
            attention_mask=encoded["attention_mask"],
            token_type_ids=encoded.get("token_type_ids", _absent(torch.long)),
            mask=mask,
            lm_logprobs_bits=lm.view(torch.int32),
            is_empty=is_empty,
            bm25_prior=prior,
            bm25_top=torch.tensor([g.bm25_top for g in groups], dtype=torch.float32)
            if with_bm25
            else _absent(),
            rank_logprobs_bits=rank.view(torch.int32) if with_rank else _absent(torch.int32),
        )


def scatter_scores(flat_scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Place per-pair scores (real pairs, prefix-major) into the (prefixes, k) grid; padding gets MASKED."""
    grid = torch.full(mask.shape, MASKED, dtype=flat_scores.dtype, device=flat_scores.device)
    return grid.masked_scatter(mask, flat_scores)
