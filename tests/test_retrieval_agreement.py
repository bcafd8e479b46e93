"""bm25s and Pyserini/Lucene agree (docs/assets.md: ~99%): same analyzer output, same top-16 and top-1.

Runs in CI (`make test` installs the pyserini extra). It fails rather than skips when pyserini is missing,
so a broken install cannot pass silently. Slow: starting the JVM and importing pyserini take ~20-30 s.
"""

from __future__ import annotations

import importlib.util

import pytest
from retrieval_fixtures import real_passages_file, word_window_queries

from ralm.retrieval.analyzer import LuceneEnglishAnalyzer
from ralm.retrieval.index import build_index, open_index

pytestmark = pytest.mark.slow


def _require_pyserini():
    if importlib.util.find_spec("pyserini") is None:
        pytest.fail("pyserini is not installed: run scripts/setup.sh (the pyserini extra)")


@pytest.fixture(scope="module")
def both_indexes(tmp_path_factory, real_documents):
    _require_pyserini()
    tmp = tmp_path_factory.mktemp("agreement")
    passages = real_passages_file(tmp, real_documents)
    build_index(passages, tmp / "bm25s", backend="bm25s")
    build_index(passages, tmp / "lucene", backend="pyserini", threads=2)
    return open_index(tmp / "bm25s"), open_index(tmp / "lucene")


def test_analyzer_agrees_with_lucene_on_real_text(both_indexes, real_documents):
    from jnius import autoclass  # the JVM is up once the pyserini index is open

    lucene = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
    analyze = autoclass("io.anserini.analysis.AnalyzerUtils").analyze
    ours = LuceneEnglishAnalyzer()
    sentences = [s for d in real_documents for s in d["text"].split("\n") if s.strip()][:3000]
    same = sum(list(analyze(lucene, s)) == ours.terms(s) for s in sentences)
    assert same / len(sentences) >= 0.98, f"{same}/{len(sentences)} lines analyzed identically"


def test_top16_and_top1_agree_on_600_queries_of_32_words(both_indexes, real_documents):
    ours, lucene = both_indexes
    assert ours.meta["passages_sha256"] == lucene.meta["passages_sha256"]
    queries = word_window_queries(real_documents, 600, words=32, seed=0)
    a = ours.search(queries, 16, threads=2)
    b = lucene.search(queries, 16, threads=2)
    top16 = sum(len({h.id for h in x} & {h.id for h in y}) / 16 for x, y in zip(a, b, strict=True)) / len(
        queries
    )
    top1 = sum(x[0].id == y[0].id for x, y in zip(a, b, strict=True)) / len(queries)
    print(f"agreement over {len(queries)} queries: top-16 {top16:.4f}, top-1 {top1:.4f}")
    assert top16 >= 0.98 and top1 >= 0.98
    # scores are the same BM25 up to Lucene's one-byte document-length encoding
    assert a[0][0].score == pytest.approx(b[0][0].score, rel=0.05)


def test_stored_lengths_match_lucene_smallfloat(both_indexes):
    import numpy as np
    from jnius import autoclass

    from ralm.retrieval.lucene_bm25 import byte_to_length, length_to_byte

    small_float = autoclass("org.apache.lucene.util.SmallFloat")
    lengths = np.array([*range(0, 3000), 12_345, 99_999, 1_000_000, 2**31 - 1])
    assert length_to_byte(lengths).tolist() == [small_float.intToByte4(int(x)) & 0xFF for x in lengths]
    codes = np.arange(256)
    signed = [int(c) - 256 if c > 127 else int(c) for c in codes]  # Java bytes are signed
    assert byte_to_length(codes).tolist() == [small_float.byte4ToInt(c) for c in signed]
