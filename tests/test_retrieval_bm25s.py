"""bm25s backend: Lucene-compatible analysis, Lucene BM25 scores from the formula, ordering, index checks."""

from __future__ import annotations

import math
import shutil
from collections import Counter

import numpy as np
import pytest
from retrieval_fixtures import real_passages_file, word_window_queries

from ralm.retrieval.analyzer import LUCENE_ENGLISH_STOPWORDS, LuceneEnglishAnalyzer
from ralm.retrieval.index import build_index, open_index
from ralm.retrieval.lucene_bm25 import length_to_byte, lucene_length
from ralm.retrieval.passages import read_passages


def test_analyzer_matches_lucene_english_analyzer_outputs():
    # Expected terms are what Anserini's DefaultEnglishAnalyzer (Lucene: StandardTokenizer, possessive
    # filter, lower case, stop words, Porter) emitted for these sentences, read off with pyserini 1.6;
    # the slow agreement test compares with Lucene itself on real text.
    analyzer = LuceneEnglishAnalyzer()
    assert analyzer.terms("The runners' John's cats are running quickly to the U.S. border") == [
        "runner",
        "john",
        "cat",
        "run",
        "quickli",
        "u.",
        "border",
    ]
    assert analyzer.terms("don't e.g. 3.14 foo_bar naïve café O'Neil's I.B.M. well-known x2y") == [
        "don't",
        "e.g",
        "3.14",
        "foo_bar",
        "naïv",
        "café",
        "o'neil",
        "i.b.m",
        "well",
        "known",
        "x2y",
    ]
    assert analyzer.terms("It is as it was: an apple, NOT a pear") == ["appl", "pear"]
    assert analyzer.terms("go ox on") == ["go", "ox"]  # <= 2 characters: not stemmed


def test_stopword_list_is_lucenes():
    # org.apache.lucene.analysis.en.EnglishAnalyzer.ENGLISH_STOP_WORDS_SET has 33 words
    assert len(LUCENE_ENGLISH_STOPWORDS) == 33 and {"the", "with", "into", "such"} <= LUCENE_ENGLISH_STOPWORDS


# Lengths Lucene can store in its one-byte norm (SmallFloat.intToByte4): 0..23 as is, then 24 plus a number
# with 4 significant bits (m * 2**shift, m in 8..15, or below 8 itself). Enumerated by brute force here,
# independently of the bit twiddling in ralm.retrieval.lucene_bm25.
_REPRESENTABLE = sorted({*range(24 + 8)} | {24 + (m << shift) for m in range(8, 16) for shift in range(28)})


def _stored_length(length: int) -> int:
    """The largest representable length not above `length` (Lucene rounds norms down)."""
    return max(v for v in _REPRESENTABLE if v <= length)


def test_lucene_length_rounds_down_to_a_one_byte_norm():
    lengths = np.array([*range(0, 5000), 65_535, 1_000_003, 2**31 - 1])
    assert lucene_length(lengths).tolist() == [_stored_length(int(x)) for x in lengths]
    assert len(np.unique(length_to_byte(np.arange(0, 2**20)))) <= 256


def _lucene_bm25(query_terms, docs_terms, k1=0.9, b=0.4):
    """Lucene's BM25Similarity, written from its documentation: sum over query terms (repeats count) of
    idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)), idf = ln(1 + (N - df + 0.5) / (df + 0.5)), where dl is
    the stored (rounded-down) length and avgdl the exact mean length."""
    n = len(docs_terms)
    avgdl = sum(len(d) for d in docs_terms) / n
    df = Counter(t for d in docs_terms for t in set(d))
    scores = []
    for doc in docs_terms:
        tf = Counter(doc)
        s = 0.0
        for t in query_terms:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * _stored_length(len(doc)) / avgdl))
        scores.append(s)
    return scores


@pytest.fixture(scope="module")
def bm25s_index(tmp_path_factory, real_documents):
    tmp = tmp_path_factory.mktemp("bm25s")
    passages = real_passages_file(tmp, real_documents)
    build_index(passages, tmp / "idx", backend="bm25s")
    return tmp, passages


def test_scores_and_order_match_the_lucene_formula(bm25s_index, real_documents):
    tmp, passages_path = bm25s_index
    retriever = open_index(tmp / "idx")
    analyzer = LuceneEnglishAnalyzer()
    passages = read_passages(passages_path)
    docs_terms = [analyzer.terms(p.contents) for p in passages]
    for query in word_window_queries(real_documents, 20, words=32, seed=1):
        expected = _lucene_bm25(analyzer.terms(query), docs_terms)
        hits = retriever.search([query], k=10)[0]
        ranked = sorted(range(len(passages)), key=lambda i: (-expected[i], i))[:10]
        assert [h.score for h in hits] == pytest.approx([expected[i] for i in ranked], rel=1e-4)
        # ids agree except where two passages tie to float precision
        for hit, i in zip(hits, ranked, strict=True):
            assert hit.id == passages[i].id or abs(expected[i] - hit.score) < 1e-4 * hit.score
        assert (
            hits[0].contents == passages[ranked[0]].contents and hits[0].doc_id == passages[ranked[0]].doc_id
        )


def test_batch_threads_and_edge_cases(bm25s_index, real_documents):
    tmp, passages_path = bm25s_index
    retriever = open_index(tmp / "idx")
    queries = word_window_queries(real_documents, 30, seed=2)
    single = [retriever.search([q], 16)[0] for q in queries]
    assert retriever.search(queries, 16, threads=2) == single
    n = retriever.meta["num_passages"]
    assert n == len(read_passages(passages_path))
    # k larger than the corpus: every passage sharing a term, never an error
    assert 0 < len(retriever.search(["the module"], k=n + 50)[0]) <= n
    # a query of stop words and unknown words matches nothing, as in Lucene
    assert retriever.search(["the and of", "zzqxj"], 5) == [[], []]


def test_moved_passages_file_is_accepted_when_identical(bm25s_index, tmp_path):
    tmp, passages_path = bm25s_index
    moved = tmp_path / "moved.jsonl"
    shutil.copy(passages_path, moved)
    retriever = open_index(tmp / "idx", passages_path=moved)
    assert retriever.search(["heap queue algorithm"], 1)[0][0].doc_id == "heapq"


def test_existing_index_is_reused_or_refused(bm25s_index, tmp_path):
    from ralm.errors import RalmInputError

    tmp, passages_path = bm25s_index
    meta = build_index(passages_path, tmp / "idx", backend="bm25s")
    assert meta == open_index(tmp / "idx").meta  # same file, same settings: reused as is
    with pytest.raises(RalmInputError, match="--overwrite"):
        build_index(passages_path, tmp / "idx", backend="bm25s", k1=1.2)
