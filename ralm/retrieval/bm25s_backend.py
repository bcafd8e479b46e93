"""BM25 with the `bm25s` library and a Lucene-compatible analyzer: the embedded default engine.

Scores use ``method="lucene"`` with the paper's Pyserini settings k1=0.9, b=0.4, so rankings match Lucene's
(ASSETS.md: ~99% of top-16). bm25s precomputes every (term, passage) score into a sparse matrix; the saved
matrix is memory-mapped on load, so opening an index costs almost nothing and several processes share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np
from tqdm import tqdm

from ralm.errors import RalmInputError
from ralm.retrieval.analyzer import ANALYZER_SETTINGS, LuceneEnglishAnalyzer
from ralm.retrieval.lucene_bm25 import lucene_bm25_matrix
from ralm.retrieval.passage_store import PassageStore
from ralm.retrieval.types import Hit, Passage

ENGINE_DIR = "bm25s"


def build_bm25s(passages: Sequence[Passage], out_dir: Path, k1: float = 0.9, b: float = 0.4) -> dict:
    """Analyze and index `passages` into `out_dir/bm25s`; returns the settings for ralm_index.json."""
    analyzer = LuceneEnglishAnalyzer()
    vocab: dict[str, int] = {}
    corpus_ids: list[list[int]] = []
    for p in tqdm(passages, desc="bm25s: analyzing", unit="passage", mininterval=1.0):
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
        "bm25": {"k1": k1, "b": b, "scoring": "lucene-bm25-byte-lengths"},
    }


class Bm25sRetriever:
    """`Retriever` over a saved bm25s index; hits are read from the passages file."""

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

    def search_rows(
        self, queries: Sequence[str], k: int, threads: int = 1
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """(rows, scores) per query, best first; ties broken by row like Lucene's doc order."""
        num_docs = len(self.store)
        k = min(k, num_docs)
        term_ids = [self.query_term_ids(q) for q in queries]
        todo = [i for i, ids in enumerate(term_ids) if ids]
        no_hits = (np.empty(0, np.int64), np.empty(0, np.float32))
        out: list[tuple[np.ndarray, np.ndarray]] = [no_hits] * len(queries)
        if not todo or k == 0:
            return out
        # Ask for a few extra so that ties at the cut-off can be ordered by row, as Lucene does.
        extra = min(num_docs, k + 8)
        rows, scores = self.model.retrieve(
            [term_ids[i] for i in todo],
            k=extra,
            show_progress=False,
            n_threads=threads if threads > 1 else 0,
        )
        for j, i in enumerate(todo):
            order = np.lexsort((rows[j], -scores[j]))[:k]
            keep = scores[j][order] > 0  # a passage sharing no term with the query is no hit (Lucene)
            out[i] = (rows[j][order][keep].astype(np.int64), scores[j][order][keep])
        return out

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        return [
            [self.store.hit(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
            for rows, scores in self.search_rows(queries, k, threads)
        ]
