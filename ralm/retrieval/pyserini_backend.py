"""BM25 with Pyserini/Lucene, the paper's engine: Anserini's JsonCollection indexer and LuceneSearcher.

The passages JSONL is already a JsonCollection file (``id`` + ``contents``), so the indexer reads it through a
symlink without a copy. Lucene's default English analyzer (Porter, stop words) is the one the paper used.
The index is built in a child process so the calling process never pins a JVM for its whole life.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

from ralm.errors import RalmInputError
from ralm.retrieval.index_meta import BM25_PARAMETERS
from ralm.retrieval.java_runtime import check_pyserini_installed, find_java_home, lucene_searcher_class
from ralm.retrieval.passage_store import PassageStore, open_store
from ralm.retrieval.types import Hit, Passage

ENGINE_DIR = "lucene"


class PyseriniRetriever:
    """The pyserini backend (``ralm.retrieval.types.IndexBackend``): a Lucene index built by Anserini,
    searched with `LuceneSearcher.batch_search`, its hits read from the passages file."""

    build_options: ClassVar[frozenset[str]] = frozenset({"k1", "b", "threads"})
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
        threads: int = 1,
        k1: float = 0.9,
        b: float = 0.4,
    ) -> dict:
        """Index `passages_path` with Anserini into `out_dir/lucene`; returns settings for ralm_index.json.
        (Anserini reads the file itself; `passages` were read only to validate it.)"""
        check_pyserini_installed()
        find_java_home()  # fail with how-to-get-Java before any work
        collection = out_dir / "collection"
        collection.mkdir()
        os.symlink(Path(passages_path).resolve(), collection / "passages.jsonl")
        args = [
            "-collection",
            "JsonCollection",
            "-generator",
            "DefaultLuceneDocumentGenerator",
            "-input",
            str(collection),
            "-index",
            str(out_dir / ENGINE_DIR),
            "-threads",
            str(max(1, threads)),
        ]
        print(f"pyserini: indexing {passages_path} with Anserini ({threads} thread(s))", file=sys.stderr)
        proc = subprocess.run(
            [sys.executable, "-m", "ralm.retrieval.java_runtime", *args], capture_output=True, text=True
        )
        (collection / "passages.jsonl").unlink()
        collection.rmdir()
        if proc.returncode != 0 or not (out_dir / ENGINE_DIR).is_dir():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            if proc.returncode == 2 and tail and tail[-1].startswith("error: "):
                raise RalmInputError(tail[-1][len("error: ") :])
            raise RuntimeError("Anserini indexing failed:\n" + "\n".join(tail))
        return {
            "analyzer": {"name": "lucene-default-english", "stemmer": "porter"},
            BM25_PARAMETERS: {"k1": k1, "b": b},
        }

    @classmethod
    def resumable(cls, out_dir: Path) -> bool:
        return False  # Anserini starts over in any case

    @classmethod
    def open(cls, index_dir: Path, meta: dict, passages_path: Path | None = None) -> Self:
        return cls(index_dir, meta, open_store(index_dir, meta, passages_path))

    def __init__(self, index_dir: Path, meta: dict, store: PassageStore) -> None:
        self.index_dir = str(index_dir)
        self.meta = meta
        self.store = store
        searcher_class = lucene_searcher_class()
        self.searcher = searcher_class(str(Path(index_dir) / ENGINE_DIR))
        bm25 = meta.get(BM25_PARAMETERS, {})
        self.searcher.set_bm25(float(bm25.get("k1", 0.9)), float(bm25.get("b", 0.4)))

    def search_ids(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[tuple[str, float]]]:
        """(passage id, score) per query, best first, without reading passages back."""
        if not queries:
            return []
        qids = [str(i) for i in range(len(queries))]
        if threads <= 1 and len(queries) == 1:
            results = {"0": self.searcher.search(queries[0], k=k)}
        else:
            results = self.searcher.batch_search(list(queries), qids, k=k, threads=max(1, threads))
        return [[(h.docid, float(h.score)) for h in results.get(q, [])] for q in qids]

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        if k > len(self.store):
            k = len(self.store)
        out = []
        for hits in self.search_ids(queries, k, threads):
            rows = []
            for pid, score in hits:
                try:
                    rows.append(self.store.hit(self.store.row(pid), score))
                except KeyError:
                    raise RalmInputError(
                        f"{self.index_dir}: Lucene returned id {pid!r} not in the passages file"
                    ) from None
            out.append(rows)
        return out
