"""BM25 in the `bm25s` index format with a Lucene-compatible analyzer: the embedded default engine.

Every (term, passage) score is precomputed with Lucene's BM25 (lucene_bm25.py; the paper's Pyserini
settings k1=0.9, b=0.4) into a sparse matrix that bm25s saves and memory-maps on load, so opening an index
costs almost nothing and several processes share it. Search sums the query terms' columns with
np.bincount and breaks ties by passage order as Lucene does; rankings agree with Pyserini on >= 99.8% of
the top-16 (tests/test_retrieval_agreement.py, bench/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar, Self

import bm25s
import numpy as np

from ralm.errors import RalmInputError
from ralm.progress import track
from ralm.retrieval.analyzer import ANALYZER_SETTINGS, LuceneEnglishAnalyzer
from ralm.retrieval.index_meta import BM25_PARAMETERS
from ralm.retrieval.lucene_bm25 import lucene_bm25_matrix
from ralm.retrieval.passage_store import PassageStore, open_store
from ralm.retrieval.types import Hit, Passage

ENGINE_DIR = "bm25s"


class Bm25sRetriever:
    """The bm25s backend (``ralm.retrieval.types.IndexBackend``): a saved bm25s index, its hits read from
    the passages file."""

    build_options: ClassVar[frozenset[str]] = frozenset({"k1", "b"})
    recorded_as: ClassVar[Mapping[str, str]] = {}
    open_options: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        out_dir: Path,
        *,
        passages_path: Path,
        passages_sha256: str,
        k1: float = 0.9,
        b: float = 0.4,
    ) -> dict:
        """Analyze and index `passages` into `out_dir/bm25s`; returns the settings for ralm_index.json."""
        analyzer = LuceneEnglishAnalyzer()
        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        for p in track(passages, desc="bm25s: analyzing", unit="passage"):
            # Token ids instead of strings: a million passages of strings would cost gigabytes.
            corpus_ids.append([vocab.setdefault(t, len(vocab)) for t in analyzer.terms(p.contents)])
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        # Lucene's scores (lossy one-byte passage lengths), not bm25s's exact-length ones: see lucene_bm25.py.
        model.scores = lucene_bm25_matrix(corpus_ids, len(vocab), k1=k1, b=b)
        model.vocab_dict = vocab
        model.nonoccurrence_array = None
        model.save(str(out_dir / ENGINE_DIR), show_progress=False)
        return {
            "analyzer": dict(ANALYZER_SETTINGS),
            BM25_PARAMETERS: {"k1": k1, "b": b, "scoring": "lucene-bm25-byte-lengths"},
        }

    @classmethod
    def resumable(cls, out_dir: Path) -> bool:
        return False  # rebuilding is quicker than checking what a killed build left

    @classmethod
    def open(cls, index_dir: Path, meta: dict, passages_path: Path | None = None) -> Self:
        return cls(index_dir, meta, open_store(index_dir, meta, passages_path))

    def __init__(self, index_dir: Path, meta: dict, store: PassageStore) -> None:
        self.index_dir = str(index_dir)
        self.meta = meta
        self.store = store
        built_with = meta.get("analyzer", {}).get("name")
        if built_with != ANALYZER_SETTINGS["name"]:
            raise RalmInputError(
                f"{index_dir}: built with analyzer {built_with!r}, this ralm analyzes with "
                f"{ANALYZER_SETTINGS['name']!r}; rebuild the index with `ralm index --overwrite`"
            )
        self.model = bm25s.BM25.load(str(Path(index_dir) / ENGINE_DIR), mmap=True, load_vocab=True)
        self.analyzer = LuceneEnglishAnalyzer()

    def query_term_ids(self, query: str) -> list[int]:
        """Known term ids of a query, repeats kept: Lucene weights a repeated query term by its count."""
        vocab = self.model.vocab_dict
        return [vocab[t] for t in self.analyzer.terms(query) if t in vocab]

    def score_query(self, term_ids: list[int]) -> np.ndarray:
        """BM25 score of every passage for one query: the sum of its terms' precomputed columns.

        np.bincount over the query terms' postings, rather than bm25s's per-term np.add.at: the same sums,
        several times faster on a large corpus (bench/RESULTS.md). A repeated term counts once per repeat.
        """
        data, indices, indptr = (self.model.scores[name] for name in ("data", "indices", "indptr"))
        ids, repeats = np.unique(np.asarray(term_ids, dtype=np.int64), return_counts=True)
        spans = [(int(indptr[t]), int(indptr[t + 1]), int(c)) for t, c in zip(ids, repeats, strict=True)]
        rows = np.concatenate([indices[a:b] for a, b, _ in spans])
        weights = np.concatenate([data[a:b] * c if c > 1 else data[a:b] for a, b, c in spans])
        return np.bincount(rows, weights=weights, minlength=len(self.store))

    @staticmethod
    def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Best `k` rows with a positive score, ties broken by row (Lucene's doc order), and their scores."""
        k = min(k, int(np.count_nonzero(scores > 0)))
        if k == 0:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        candidates = np.flatnonzero(scores >= kth)  # every row tied with the k-th best is a candidate
        order = np.lexsort((candidates, -scores[candidates]))[:k]
        rows = candidates[order]
        return rows.astype(np.int64), scores[rows].astype(np.float32)

    def search_rows(
        self, queries: Sequence[str], k: int, threads: int = 1
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """(rows, scores) per query, best first; a query with no known term has no hits (as in Lucene)."""

        def one(query: str) -> tuple[np.ndarray, np.ndarray]:
            term_ids = self.query_term_ids(query)
            if not term_ids:
                return np.empty(0, np.int64), np.empty(0, np.float32)
            return self.top_k(self.score_query(term_ids), k)

        if threads <= 1 or len(queries) < 2:
            return [one(q) for q in queries]
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return list(pool.map(one, queries))

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        return [
            [self.store.hit(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
            for rows, scores in self.search_rows(queries, k, threads)
        ]
