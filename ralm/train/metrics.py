"""Validation metrics of the predictive reranker: pure functions over (prefixes, candidates) tensors.

For each prefix the reranker picks ``argmax f``; we compare the LM log-prob of the target given that
pick with the LM log-prob given BM25's top-1 (candidate 0, BM25 order) and given the oracle (the
candidate the LM likes best). "Gain recovered" is ``(pick - bm25) / (oracle - bm25)`` over the means:
0 means no better than BM25's top-1, 1 means as good as the oracle. With ``--abstain`` the empty passage
is a candidate, so the oracle is the best of k *or none*, and the no-retrieval log-prob is summed too:
training exports no retrieval when it beats both BM25 and the trained picks on validation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ralm.train.losses import MASKED


@dataclass
class SelectionSums:
    """Sums over prefixes; add them across batches and processes, then read the ratios."""

    count: float = 0.0
    agree: float = 0.0
    """Prefixes where the pick has the highest LM log-prob (ties count as agreement)."""
    pick_logprob: float = 0.0
    bm25_logprob: float = 0.0
    oracle_logprob: float = 0.0
    abstained: float = 0.0
    """Prefixes where the pick is the empty passage (``--abstain``)."""
    none_logprob: float = 0.0
    """LM log-prob of the target with no passage (``--abstain`` groups; 0 without them)."""

    def as_tensor(self) -> torch.Tensor:
        return torch.tensor(
            [
                self.count,
                self.agree,
                self.pick_logprob,
                self.bm25_logprob,
                self.oracle_logprob,
                self.abstained,
                self.none_logprob,
            ],
            dtype=torch.float64,
        )

    @classmethod
    def from_tensor(cls, values: torch.Tensor) -> SelectionSums:
        return cls(*[float(v) for v in values.tolist()])

    def __add__(self, other: SelectionSums) -> SelectionSums:
        return SelectionSums.from_tensor(self.as_tensor() + other.as_tensor())

    def metrics(self) -> dict[str, float]:
        """Top-1 agreement, mean log-probs, gain recovered and the retrieval rate."""
        n = max(self.count, 1.0)
        return {
            "top1_agreement": self.agree / n,
            "pick_logprob": self.pick_logprob / n,
            "bm25_logprob": self.bm25_logprob / n,
            "oracle_logprob": self.oracle_logprob / n,
            "gain_recovered": gain_recovered(
                self.pick_logprob / n, self.bm25_logprob / n, self.oracle_logprob / n
            ),
            "retrieval_rate": 1.0 - self.abstained / n,
            "none_logprob": self.none_logprob / n,
        }


def gain_recovered(pick: float, bm25: float, oracle: float) -> float:
    """``(pick - bm25) / (oracle - bm25)``; NaN when BM25's top-1 already is the oracle everywhere."""
    gap = oracle - bm25
    return (pick - bm25) / gap if gap > 0 else math.nan


def selection_sums(
    scores: torch.Tensor,
    lm_logprobs: torch.Tensor,
    mask: torch.Tensor,
    is_empty: torch.Tensor | None = None,
) -> SelectionSums:
    """Sums of the reranker's pick statistics for one batch; all inputs are (batch, k), candidate 0 is BM25's
    top-1.

    ``is_empty`` marks the empty passage of ``--abstain`` groups. BM25's top-1 is always candidate 0 (a
    real passage), so abstaining counts against the "always retrieve" baseline, as it should.
    """
    scores = scores.detach().float().masked_fill(~mask, MASKED)
    lm = lm_logprobs.detach().float().masked_fill(~mask, MASKED)
    pick = scores.argmax(dim=-1)
    pick_lp = lm.gather(1, pick[:, None]).squeeze(1)
    oracle_lp = lm.max(dim=-1).values
    abstained = none_lp = 0.0
    if is_empty is not None and bool(is_empty.any()):
        abstained = float(is_empty.gather(1, pick[:, None]).squeeze(1).float().sum())
        # One empty slot per group: its LM log-prob is the target's log-prob with no passage.
        none_lp = float((lm.double() * (is_empty & mask)).sum())
    return SelectionSums(
        count=float(scores.shape[0]),
        agree=float((pick_lp >= oracle_lp).float().sum()),
        pick_logprob=float(pick_lp.double().sum()),
        bm25_logprob=float(lm[:, 0].double().sum()),
        oracle_logprob=float(oracle_lp.double().sum()),
        abstained=float(abstained),
        none_logprob=none_lp,
    )


def per_prefix_logprobs(
    scores: torch.Tensor, lm_logprobs: torch.Tensor, mask: torch.Tensor, is_empty: torch.Tensor | None = None
) -> torch.Tensor:
    """(batch, 3) float64: the LM log-prob of each prefix's target given the pick, BM25's top-1 and no
    passage (NaN without an empty passage): the paired values the export decision bootstraps."""
    scores = scores.detach().float().masked_fill(~mask, MASKED)
    lm = lm_logprobs.detach().double().masked_fill(~mask, MASKED)
    pick_lp = lm.gather(1, scores.argmax(dim=-1)[:, None]).squeeze(1)
    none_lp = torch.full_like(pick_lp, math.nan)
    if is_empty is not None:
        empty = is_empty & mask
        has_empty = empty.any(dim=-1)
        none_lp = torch.where(has_empty, (lm * empty).sum(dim=-1), none_lp)
    return torch.stack([pick_lp, lm[:, 0], none_lp], dim=-1)
