"""Training losses of the predictive reranker: pure functions over (prefixes, candidates) tensors.

Every function takes reranker scores ``f`` and LM log-probs, both shaped (batch, k), and a boolean
``mask`` of the same shape that is False for padding (groups may have fewer than k candidates). Each
returns the mean loss over the batch. The math is done in float32 log space so LM log-probs of -1e4
(a passage that makes the target very unlikely) neither underflow to -inf nor produce NaN.

- ``marginal`` (In-Context RALM §6.2): ``-log Σ_i p_rank(d_i|x) · p_LM(y|[d_i; x])`` computed as
  ``-logsumexp(log_softmax(f) + lm_logprob)``.
- ``kl``: distillation, ``KL(softmax(lm_logprob / τ) || softmax(f))``.
- ``listwise_ce``: cross-entropy of ``softmax(f)`` against the LM's best candidate.

A second target, beside the loss on the targets y (``--rank-weight``): the LM's preference on y', the
prefix's own last tokens, which data-gen scores in the same forward under each candidate (the zero-shot
rule's evidence). ``rank_target_loss`` is ``KL(softmax(z / τ') || softmax(f))`` with z the y' log-probs
standardised within each prefix (``standardized``), so a prefix's preference counts by its ranking, not by
how long or how likely its y' is (LLM-R found standardised scores distil better than raw log-likelihoods).
"""

from __future__ import annotations

from typing import Literal

import torch

LossName = Literal["marginal", "kl", "listwise_ce"]
LOSS_NAMES: tuple[str, ...] = ("marginal", "kl", "listwise_ce")

# Padding gets a very negative finite value, not -inf: exp() of it is exactly 0 in float32, while
# 0 * (-inf) = NaN and -inf - (-inf) = NaN would poison both the loss and its gradient.
MASKED = -1e9


def _prepare(scores: torch.Tensor, lm_logprobs: torch.Tensor, mask: torch.Tensor | None):
    """Float32 copies with padding replaced by MASKED; checks shapes."""
    if scores.shape != lm_logprobs.shape or scores.dim() != 2:
        raise ValueError(
            f"scores {tuple(scores.shape)} and lm_logprobs {tuple(lm_logprobs.shape)} must be (batch, k)"
        )
    scores = scores.float()
    lm_logprobs = lm_logprobs.float()
    if mask is None:
        return scores, lm_logprobs
    mask = mask.bool()
    return scores.masked_fill(~mask, MASKED), lm_logprobs.masked_fill(~mask, MASKED)


def marginal_loss(
    scores: torch.Tensor, lm_logprobs: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Negative log marginal likelihood of the target under the reranker's passage distribution."""
    scores, lm_logprobs = _prepare(scores, lm_logprobs, mask)
    log_p_rank = torch.log_softmax(scores, dim=-1)
    return -torch.logsumexp(log_p_rank + lm_logprobs, dim=-1).mean()


def kl_loss(
    scores: torch.Tensor,
    lm_logprobs: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """KL divergence from the LM's soft preference ``softmax(lm_logprob / τ)`` to the reranker's softmax."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    scores, lm_logprobs = _prepare(scores, lm_logprobs, mask)
    log_p_rank = torch.log_softmax(scores, dim=-1)
    log_p_lm = torch.log_softmax(lm_logprobs / temperature, dim=-1)
    # p_lm is exactly 0 on padding, and log_p_lm is finite there, so padded terms contribute 0.
    return (log_p_lm.exp() * (log_p_lm - log_p_rank)).sum(dim=-1).mean()


def listwise_ce_loss(
    scores: torch.Tensor, lm_logprobs: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Cross-entropy of the reranker's softmax against the candidate with the highest LM log-prob."""
    scores, lm_logprobs = _prepare(scores, lm_logprobs, mask)
    best = lm_logprobs.argmax(dim=-1)
    return torch.nn.functional.cross_entropy(scores, best)


def standardized(values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Each row of `values` (batch, k) minus its mean, over its standard deviation (population, over the
    row's real entries); a row whose entries are all equal is all zeros. Padding stays MASKED."""
    values = values.float()
    mask = torch.ones_like(values, dtype=torch.bool) if mask is None else mask.bool()
    count = mask.sum(dim=-1, keepdim=True).clamp(min=1)
    mean = torch.where(mask, values, 0.0).sum(dim=-1, keepdim=True) / count
    centred = torch.where(mask, values - mean, 0.0)
    std = (centred.square().sum(dim=-1, keepdim=True) / count).sqrt()
    z = torch.where(std > 1e-6, centred / std.clamp(min=1e-6), 0.0)
    return z.masked_fill(~mask, MASKED)


def rank_target_loss(
    scores: torch.Tensor,
    rank_logprobs: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """KL from the LM's preference on y' (its log-probs standardised per prefix, at temperature τ') to
    the reranker's softmax: the zero-shot rule as a soft target."""
    return kl_loss(scores, standardized(rank_logprobs, mask), mask, temperature)


def rerank_loss(
    name: str,
    scores: torch.Tensor,
    lm_logprobs: torch.Tensor,
    mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The loss chosen by config (``marginal``, ``kl`` or ``listwise_ce``)."""
    if name == "marginal":
        return marginal_loss(scores, lm_logprobs, mask)
    if name == "kl":
        return kl_loss(scores, lm_logprobs, mask, temperature)
    if name == "listwise_ce":
        return listwise_ce_loss(scores, lm_logprobs, mask)
    raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSS_NAMES)}")
