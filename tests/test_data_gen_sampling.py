"""Prefix sampling: stride boundaries, seeded sample, token slices; checked against brute-force
enumeration."""

from __future__ import annotations

import numpy as np
import pytest

from ralm.data_gen.prefixes import (
    TokenizedCorpus,
    boundary_counts,
    first_boundary,
    prefix_tokens,
    sample_prefixes,
    tokenize_documents,
)


def brute_force_boundaries(lengths, stride, floor):
    """Every (doc, p) with p a multiple of stride, p >= floor, p >= 1 and p + stride <= N, by enumeration."""
    return [
        (d, p)
        for d, n in enumerate(lengths)
        for p in range(1, n + 1)
        if p % stride == 0 and p >= floor and p + stride <= n
    ]


@pytest.mark.parametrize(
    "lengths,stride,floor",
    [([10, 50, 23, 0, 7, 36], 4, 8), ([100, 3, 64], 4, 32), ([40, 41, 42, 43], 3, 10), ([9, 12], 5, 0)],
)
def test_boundary_counts_match_enumeration(lengths, stride, floor):
    expected = brute_force_boundaries(lengths, stride, floor)
    counts = boundary_counts(np.array(lengths), stride, floor)
    assert counts.tolist() == [sum(1 for d, _ in expected if d == i) for i in range(len(lengths))]


def test_full_sample_is_every_boundary_exactly_once():
    lengths, stride, floor = [10, 50, 23, 0, 7, 36], 4, 8
    sample = sample_prefixes(np.array(lengths), stride, floor, num_prefixes=10_000, seed=3)
    drawn = list(zip(sample.doc.tolist(), sample.position.tolist(), strict=True))
    expected = brute_force_boundaries(lengths, stride, floor)
    assert sorted(drawn) == sorted(expected) and len(drawn) == len(set(drawn))
    assert sample.available == len(expected)
    # documents 0 (10 tokens: 8 + 4 > 10), 3 (empty) and 4 (7 tokens) have no boundary
    assert sample.skipped_docs == 3


def test_sample_is_deterministic_for_a_seed_and_differs_across_seeds():
    lengths = np.array([400, 1000, 250, 3000])
    a = sample_prefixes(lengths, 4, 32, 50, seed=7)
    b = sample_prefixes(lengths, 4, 32, 50, seed=7)
    c = sample_prefixes(lengths, 4, 32, 50, seed=8)
    assert a.doc.tolist() == b.doc.tolist() and a.position.tolist() == b.position.tolist()
    assert (a.doc.tolist(), a.position.tolist()) != (c.doc.tolist(), c.position.tolist())
    valid = set(brute_force_boundaries(lengths.tolist(), 4, 32))
    assert set(zip(a.doc.tolist(), a.position.tolist(), strict=True)) <= valid


def test_documents_are_drawn_in_proportion_to_their_boundaries():
    # One draw per seed: P(doc) must be boundaries(doc) / all boundaries (length weighting).
    lengths, stride, floor = np.array([36, 132, 68]), 4, 32
    expected = np.array([1, 25, 9]) / 35  # boundaries: 32; 32..128; 32..64
    assert boundary_counts(lengths, stride, floor).tolist() == [1, 25, 9]
    draws = np.array([sample_prefixes(lengths, stride, floor, 1, seed).doc[0] for seed in range(4000)])
    observed = np.bincount(draws, minlength=3) / len(draws)
    # three standard errors of a binomial proportion at n = 4000
    assert np.all(np.abs(observed - expected) < 3 * np.sqrt(expected * (1 - expected) / len(draws)) + 1e-9)


def test_first_boundary_rounds_up_to_the_stride():
    assert [first_boundary(4, f) for f in (0, 1, 4, 5, 32, 33)] == [4, 4, 4, 8, 32, 36]


def test_prefix_tokens_slices():
    ids = np.arange(100, 200, dtype=np.int32)
    corpus = TokenizedCorpus(["a", "b"], ids, np.array([0, 40, 100]), "x")
    toks = prefix_tokens(corpus, doc=1, position=20, stride=4, query_tokens=8, input_length=16)
    doc_b = list(range(140, 200))
    assert toks.target == doc_b[20:24]
    assert toks.query == doc_b[12:20]
    assert toks.prefix == doc_b[8:20]  # the last input_length - stride = 12 prefix tokens


def test_tokenize_documents_concatenates_and_hashes_content():
    docs = [{"id": "a", "text": "one two"}, {"id": "b", "text": ""}, {"id": "c", "text": "three"}]

    def encode_batch(texts):
        return [[len(w) for w in t.split()] for t in texts]

    corpus = tokenize_documents(iter(docs), encode_batch, batch_size=2, progress=False)
    assert corpus.doc_ids == ["a", "b", "c"]
    assert corpus.lengths.tolist() == [2, 0, 1]
    assert corpus.tokens(0).tolist() == [3, 3] and corpus.tokens(2).tolist() == [5]
    changed = tokenize_documents(
        iter(docs[:2] + [{"id": "c", "text": "thre3"}]), encode_batch, progress=False
    )
    assert changed.texts_sha256 != corpus.texts_sha256
