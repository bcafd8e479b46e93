"""One prefix's candidates scored in one batch equal a plain one-input-at-a-time full-logits computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ralm.data_gen.prefixes import PrefixTokens
from ralm.data_gen.scoring import PassageTokens, make_row, score_prefix
from ralm.lm.scoring import ScoringSettings
from ralm.retrieval.types import Hit


def reference_logprobs(model, passage, prefix, target, input_length, max_passage_tokens):
    """Per-token log-probs from one unpadded forward over [passage; prefix; target] with all logits."""
    passage = passage[:max_passage_tokens]
    room = input_length - len(passage) - len(target)
    ids = passage + prefix[max(0, len(prefix) - room) :] + target
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits, -1)
    start = len(ids) - len(target)
    return [float(logp[start - 1 + t, target[t]]) for t in range(len(target))]


def reference_rank_logprob(model, passage, tokens, input_length, rank_tokens=16):
    """log p(y' | [passage; prefix without y']) for y' the prefix's last `rank_tokens` tokens, read off one
    unpadded forward over the input the target is scored with (the passage already cut)."""
    room = input_length - len(passage) - len(tokens.target)
    prefix = tokens.prefix[max(0, len(tokens.prefix) - room) :]
    ids = passage + prefix + tokens.target
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
    start = len(passage) + len(prefix) - rank_tokens
    return sum(float(logp[start - 1 + t, ids[start + t]]) for t in range(rank_tokens))


@pytest.fixture(scope="module")
def tiny_lm(tiny_lm_dir):
    from ralm.lm.loading import load_lm

    return load_lm(tiny_lm_dir, device="cpu", dtype="float32")


def test_score_prefix_matches_reference(tiny_lm, real_documents):
    ids = tiny_lm.encode(real_documents[0]["text"])
    assert len(ids) > 300
    hits = [
        Hit(f"{d['id']}-0", 1.0, f"{d['title']}\n{d['text'][: 80 * (i + 1)]}", d["title"], d["id"])
        for i, d in enumerate(real_documents[1:6])
    ]
    input_length, max_passage = 128, 48
    tokens = PrefixTokens(prefix=ids[100:200][-(input_length - 4) :], target=ids[200:204], query=ids[168:200])
    passages = PassageTokens(tiny_lm, max_passage)(hits)
    assert all(len(p) <= max_passage for p in passages) and max(len(p) for p in passages) == max_passage
    settings = ScoringSettings(input_length=input_length, max_passage_tokens=max_passage, rank_tokens=16)
    scores = score_prefix(tiny_lm, tokens, passages, settings)
    cand, none = scores.candidates, scores.no_retrieval
    for got, rank, passage in zip(cand, scores.candidates_rank, passages, strict=True):
        want = reference_logprobs(
            tiny_lm.model, passage, tokens.prefix, tokens.target, input_length, max_passage
        )
        assert got == pytest.approx(want, abs=1e-4)
        assert rank == pytest.approx(
            reference_rank_logprob(tiny_lm.model, passage, tokens, input_length), abs=1e-4
        )
    assert none == pytest.approx(
        reference_logprobs(tiny_lm.model, [], tokens.prefix, tokens.target, input_length, 0), abs=1e-4
    )
    assert scores.no_retrieval_rank == pytest.approx(
        reference_rank_logprob(tiny_lm.model, [], tokens, input_length), abs=1e-4
    )

    row = make_row(
        prefix_index=7,
        doc_id="d",
        position=200,
        tokens=tokens,
        hits=hits,
        scores=scores,
        decode=tiny_lm.decode,
    )
    assert row["lm_logprobs"] == pytest.approx([sum(c) for c in cand])
    assert row["lm_rank_logprobs"] == scores.candidates_rank
    assert row["target"] == tiny_lm.decode(ids[200:204])
    assert row["candidate_doc_ids"] == [d["id"] for d in real_documents[1:6]]


def test_passage_tokens_cache_equals_fresh_encoding(tiny_lm, real_documents):
    hits = [
        Hit(f"{d['id']}-0", 1.0, f"{d['title']}\n{d['text'][:300]}", d["title"], d["id"])
        for d in real_documents[:4]
    ]
    cache = PassageTokens(tiny_lm, 20, capacity=2)
    first = cache(hits[:3])
    again = cache([hits[2], hits[0], hits[3]])
    assert again == [tiny_lm.encode(h.contents)[:20] for h in (hits[2], hits[0], hits[3])]
    assert first[0] == again[1]


def test_gain_by_bm25_strength_bands_the_prefixes_by_their_best_score():
    from ralm.data_gen.label_statistics import STRENGTH_QUANTILES, gain_by_bm25_strength

    rng = np.random.default_rng(0)
    tops = rng.uniform(5, 30, size=200)
    bm25 = [[t, t / 2] for t in tops]
    none = [-50.0] * 200
    logprobs = [[-50.0 + (t - 15.0) * 4, -60.0] for t in tops]  # gain grows with the score, 4 targets each
    bands = gain_by_bm25_strength(bm25, logprobs, none, [4] * 200)
    edges = [tops.min(), *np.quantile(tops, STRENGTH_QUANTILES), tops.max()]
    assert [b["bm25_from"] for b in bands] == pytest.approx(edges[:-1])
    assert sum(b["prefixes"] for b in bands) == 200
    for band, lo, hi in zip(bands, edges[:-1], edges[1:], strict=True):
        inside = [(t - 15.0) for t in tops if lo <= t < hi or (hi == edges[-1] and t == hi)]
        assert band["prefixes"] == len(inside)
        assert band["gain_bm25_top1_over_no_retrieval"] == pytest.approx(
            np.mean(inside)
        )  # (t-15)*4 / 4 targets
    assert gain_by_bm25_strength([], [], [], []) == []
