"""Losses and validation metrics against direct formulas computed independently in exact decimal
arithmetic."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import pytest
import torch

from ralm.train.losses import kl_loss, listwise_ce_loss, marginal_loss, rerank_loss
from ralm.train.metrics import gain_recovered, per_prefix_logprobs, selection_sums

getcontext().prec = 60  # exp(-1e4) is about 1e-4343: Decimal holds it, float64 underflows to 0


def _d(x) -> Decimal:
    return Decimal(repr(float(x)))


def _softmax(values: list[Decimal]) -> list[Decimal]:
    exps = [v.exp() for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def ref_marginal(f: list[float], lm: list[float]) -> float:
    """-log Σ_i softmax(f)_i · exp(lm_i), the paper's formula, term by term."""
    p = _softmax([_d(x) for x in f])
    return float(-(sum(pi * _d(lp).exp() for pi, lp in zip(p, lm, strict=True))).ln())


def ref_kl(f: list[float], lm: list[float], tau: float) -> float:
    """Σ_i q_i (log q_i − log p_i), q = softmax(lm/τ), p = softmax(f)."""
    p = _softmax([_d(x) for x in f])
    q = _softmax([_d(x) / _d(tau) for x in lm])
    return float(sum(qi * (qi.ln() - pi.ln()) for qi, pi in zip(q, p, strict=True) if qi > 0))


def ref_listwise(f: list[float], lm: list[float]) -> float:
    best = max(range(len(lm)), key=lm.__getitem__)
    return float(-_softmax([_d(x) for x in f])[best].ln())


def _random_case(seed: int, batch: int = 5, k: int = 6, extreme: bool = False):
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(batch, k, generator=g) * 3
    lm = -torch.rand(batch, k, generator=g) * 20
    if extreme:  # passages that make the target (almost) impossible, and a whole row of them
        lm[:, ::2] = -1e4
        lm[0, :] = -1e4 + torch.arange(k, dtype=torch.float32)
    return f, lm


@pytest.mark.parametrize("extreme", [False, True])
def test_losses_match_direct_formulas(extreme):
    f, lm = _random_case(1, extreme=extreme)
    rows = range(f.shape[0])
    cases = [
        (marginal_loss(f, lm), [ref_marginal(f[i].tolist(), lm[i].tolist()) for i in rows]),
        (kl_loss(f, lm, temperature=0.5), [ref_kl(f[i].tolist(), lm[i].tolist(), 0.5) for i in rows]),
        (listwise_ce_loss(f, lm), [ref_listwise(f[i].tolist(), lm[i].tolist()) for i in rows]),
    ]
    for got, ref in cases:
        assert torch.isfinite(got)
        expected = sum(ref) / len(ref)
        assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-3 if extreme else 1e-5)


@pytest.mark.parametrize("name", ["marginal", "kl", "listwise_ce"])
def test_padding_is_ignored_and_gradients_are_finite(name):
    """A group padded from 3 to 6 candidates gives the loss of the 3-candidate group alone."""
    f, lm = _random_case(2, extreme=True)
    mask = torch.ones_like(f, dtype=torch.bool)
    mask[1, 3:] = False
    f = f.clone().requires_grad_(True)
    padded = rerank_loss(name, f, lm, mask, temperature=2.0)
    padded.backward()
    assert torch.isfinite(f.grad).all() and (f.grad[1, 3:] == 0).all()
    alone = rerank_loss(name, f[1:2, :3].detach(), lm[1:2, :3], None, temperature=2.0)
    rest = rerank_loss(
        name, torch.cat([f[:1], f[2:]]).detach(), torch.cat([lm[:1], lm[2:]]), None, temperature=2.0
    )
    n = f.shape[0]
    assert float(padded.detach()) == pytest.approx((float(alone) + float(rest) * (n - 1)) / n, rel=1e-5)


def test_marginal_gradient_is_prior_minus_posterior():
    """d/df_i of -log Σ p_i e^{lm_i} is p_i − p_i e^{lm_i} / Σ_j p_j e^{lm_j} (prior minus posterior)."""
    f, lm = _random_case(3, batch=1, k=5)
    f = f.double().requires_grad_(True)
    marginal_loss(f, lm.double()).backward()
    p = torch.softmax(f.detach(), -1)
    joint = p * lm.double().exp()
    expected = p - joint / joint.sum()
    # the loss is computed in float32, so compare at float32 precision
    assert torch.allclose(f.grad, expected, atol=1e-6)


def test_marginal_loss_is_minimised_by_the_lms_favourite():
    lm = torch.tensor([[-2.0, -9.0, -9.0]])
    good = marginal_loss(torch.tensor([[10.0, 0.0, 0.0]]), lm)
    bad = marginal_loss(torch.tensor([[0.0, 10.0, 0.0]]), lm)
    assert float(good) == pytest.approx(2.0, abs=1e-3) and float(bad) > 8.0


def test_selection_sums_and_gain_recovered_by_hand():
    # prefix 0: pick = candidate 1 (lm -1, the oracle); prefix 1: pick = candidate 2 (lm -5, oracle -4).
    scores = torch.tensor([[0.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    lm = torch.tensor([[-6.0, -1.0, -3.0], [-4.0, -7.0, -5.0]])
    mask = torch.ones(2, 3, dtype=torch.bool)
    is_empty = torch.tensor([[False, False, False], [False, False, True]])
    m = selection_sums(scores, lm, mask, is_empty).metrics()
    assert m["top1_agreement"] == 0.5
    assert m["pick_logprob"] == pytest.approx((-1 - 5) / 2)
    assert m["bm25_logprob"] == pytest.approx((-6 - 4) / 2)
    assert m["oracle_logprob"] == pytest.approx((-1 - 4) / 2)
    # (pick − bm25) / (oracle − bm25) = (−3 + 5) / (−2.5 + 5)
    assert m["gain_recovered"] == pytest.approx(2 / 2.5)
    assert m["retrieval_rate"] == 0.5
    # padding is never picked, even with the highest score
    mask[0, 1] = False
    assert selection_sums(scores, lm, mask).pick_logprob == pytest.approx(-3 - 5)


def test_per_prefix_logprobs_by_hand():
    scores = torch.tensor([[0.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    lm = torch.tensor([[-6.0, -1.0, -3.0], [-4.0, -7.0, -5.0]])
    mask = torch.ones(2, 3, dtype=torch.bool)
    is_empty = torch.tensor([[False, False, False], [False, False, True]])
    rows = per_prefix_logprobs(scores, lm, mask, is_empty)
    # (pick, BM25 top-1, no passage): prefix 0 has no empty slot, prefix 1's empty slot is candidate 2.
    assert rows[0, :2].tolist() == [-1.0, -6.0] and math.isnan(float(rows[0, 2]))
    assert rows[1].tolist() == [-5.0, -4.0, -5.0]


def test_gain_recovered_undefined_when_bm25_is_the_oracle():
    assert gain_recovered(-2.0, -2.0, -2.0) != gain_recovered(-2.0, -2.0, -2.0)  # NaN
