"""Pyserini's prebuilt Lucene indexes as ralm indexes: the paper's retrieval corpus without building it.

    ralm index --prebuilt wikipedia-dpr-100w --output indexes/wikipedia-dpr \\
        --exclude-file data/wikitext103/eval_titles.txt

writes an index folder holding only ``ralm_index.json`` (backend ``pyserini-prebuilt``: the index name or
a local Lucene folder, its document count, the excluded titles, BM25's k1 and b). Every stage then opens it
like any ralm index. ``wikipedia-dpr-100w`` is the Dec 2018 Wikipedia of DPR in 21M passages of 100 words,
the corpus In-Context RALM retrieves from; Pyserini downloads it once (9 GB) into its cache.

Hits are what the authors' retriever hands the LM: the stored ``contents`` as is (``"Title"\\ntext``, the
quotes included, where ralm's own passages are ``Title\\ntext``). Its first line with one pair of quotes
stripped is the title: compared with the excluded titles as the authors do (the evaluation articles must
not be retrieved), both in Unicode NFC (the authors list both spellings of titles whose NFC and NFD forms
differ, e.g. "Éva Gauthier"; ralm catches either whichever the list or the corpus uses), and the hit's
``doc_id``. Excluded hits are skipped, searching deeper until ``k``
allowed hits are found, and counted in ``excluded_hits``.
"""

from __future__ import annotations

import difflib
import json
import os
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

from ralm.errors import RalmInputError
from ralm.retrieval.backends import PYSERINI_PREBUILT
from ralm.retrieval.index_meta import BM25_PARAMETERS, FORMAT, META_NAME, write_meta
from ralm.retrieval.java_runtime import check_pyserini_installed, lucene_searcher_class
from ralm.retrieval.types import Hit, Passage


def dpr_title(contents: str) -> str:
    """The title of a wikipedia-dpr passage: its first line, one pair of surrounding quotes removed."""
    title = contents.split("\n", 1)[0]
    return title[1:-1] if len(title) >= 2 and title.startswith('"') and title.endswith('"') else title


def title_key(title: str) -> str:
    """The form in which titles are compared with the excluded ones: Unicode NFC."""
    return unicodedata.normalize("NFC", title)


def stored_raw(result) -> str:
    """A hit's stored raw JSON: ``.raw`` in older Pyserini, the Lucene document's ``raw`` field in 1.x."""
    raw = getattr(result, "raw", None)
    raw = raw if isinstance(raw, str) else result.lucene_document.get("raw")
    if raw is None:
        raise RalmInputError(
            f"hit {result.docid}: the Lucene index stores no 'raw' field "
            "(index it with Anserini's -storeRaw, "
            "as Pyserini's prebuilt indexes are)"
        )
    return raw


def known_prebuilt_names() -> dict:
    """Pyserini's table of prebuilt sparse indexes (name -> info)."""
    lucene_searcher_class()  # the JVM set-up pyserini's modules expect (ralm.retrieval.java_runtime)
    from pyserini.prebuilt_index_info import TF_INDEX_INFO

    return TF_INDEX_INFO


def check_prebuilt_name(name: str) -> None:
    """A local Lucene folder, or a name Pyserini knows; else the closest names in the error."""
    if Path(name).is_dir():
        return
    names = known_prebuilt_names()
    if name not in names:
        close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise RalmInputError(
            f"--prebuilt {name!r}: not a Pyserini prebuilt index{hint}; the names are the keys of "
            "pyserini.prebuilt_index_info.TF_INDEX_INFO, or pass a local Lucene index folder"
        )


def open_searcher(name: str):
    """A LuceneSearcher over a local folder or a prebuilt index (downloaded once into Pyserini's cache)."""
    check_pyserini_installed()
    searcher_class = lucene_searcher_class()
    if Path(name).is_dir():
        return searcher_class(str(Path(name).resolve()))
    check_prebuilt_name(name)
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("RALM_OFFLINE") == "1":
        raise RalmInputError(
            f"--prebuilt {name}: this machine is offline; download it where online "
            f"(LuceneSearcher.from_prebuilt_index('{name}')) and pass the index folder instead"
        )
    try:
        return searcher_class.from_prebuilt_index(name)
    except Exception as err:  # network errors, a truncated download: pyserini raises its own kinds
        raise RalmInputError(
            f"--prebuilt {name}: cannot download it "
            f"({type(err).__name__}: {str(err).splitlines()[0][:120]}); "
            "download it where online and pass the index folder instead"
        ) from None


def check_target(index_dir: Path, name: str, overwrite: bool) -> None:
    """An existing folder is replaced only when it is this link already or `overwrite` says so."""
    if not index_dir.exists() or not any(index_dir.iterdir()):
        return
    meta_path = index_dir / META_NAME
    same = meta_path.is_file() and "prebuilt" in json.loads(meta_path.read_text())  # only a link names one
    if not same and not overwrite:
        raise RalmInputError(f"{index_dir}: exists and is not a link to a prebuilt index; pass --overwrite")
    if not same:
        import shutil

        shutil.rmtree(index_dir)  # another index's engine files must not stay beside the new metadata


def link_prebuilt(
    name: str,
    index_dir: Path,
    exclude_titles: Iterable[str] = (),
    k1: float = 0.9,
    b: float = 0.4,
    overwrite: bool = False,
) -> dict:
    """Write ``index_dir/ralm_index.json`` for a prebuilt (or local) Lucene index; returns the metadata."""
    check_prebuilt_name(name)  # before any download
    check_target(Path(index_dir), name, overwrite)
    searcher = open_searcher(name)
    excluded = sorted({t.strip() for t in exclude_titles if t.strip()})
    meta = {
        "format": FORMAT,
        "backend": PYSERINI_PREBUILT,
        "prebuilt": str(Path(name).resolve()) if Path(name).is_dir() else name,
        "num_passages": int(searcher.num_docs),
        "contents": "stored contents as is (wikipedia-dpr: '\"Title\"\\ntext')",
        "excluded_titles": excluded,
        BM25_PARAMETERS: {"k1": k1, "b": b},
    }
    Path(index_dir).mkdir(parents=True, exist_ok=True)
    write_meta(Path(index_dir), meta)
    return meta


class PrebuiltRetriever:
    """The pyserini-prebuilt backend (``ralm.retrieval.types.IndexBackend``): a prebuilt Lucene index,
    skipping (and counting) hits of excluded titles. `link_prebuilt` makes its folder; nothing builds it."""

    build_options: ClassVar[frozenset[str]] = frozenset()
    recorded_as: ClassVar[Mapping[str, str]] = {}
    open_options: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def build(
        cls, passages: Sequence[Passage], out_dir: Path, *, passages_path: Path, passages_sha256: str
    ) -> dict:
        raise RalmInputError(
            f"backend: {PYSERINI_PREBUILT!r} is linked, not built from passages: `ralm index --prebuilt NAME`"
        )

    @classmethod
    def resumable(cls, out_dir: Path) -> bool:
        return False

    @classmethod
    def open(cls, index_dir: Path, meta: dict, passages_path: Path | None = None) -> Self:
        """The hits come from the Lucene index's stored contents: no passages file is read."""
        return cls(index_dir, meta)

    def __init__(self, index_dir: Path, meta: dict) -> None:
        self.index_dir, self.meta = str(index_dir), meta
        self.searcher = open_searcher(meta["prebuilt"])
        bm25 = meta.get(BM25_PARAMETERS, {})
        self.searcher.set_bm25(float(bm25.get("k1", 0.9)), float(bm25.get("b", 0.4)))
        self.excluded = {title_key(t) for t in meta.get("excluded_titles", [])}
        self.excluded_hits = 0
        """Hits skipped because their title is excluded, over every search so far."""

    def _allowed(self, raw: list, k: int) -> tuple[list[Hit], int]:
        """The first `k` hits whose title is not excluded, and how many excluded ones came before them."""
        hits, skipped = [], 0
        for result in raw:
            contents = json.loads(stored_raw(result))["contents"]
            title = dpr_title(contents)
            if title_key(title) in self.excluded:
                skipped += 1
                continue
            hits.append(
                Hit(id=result.docid, score=float(result.score), contents=contents, title=title, doc_id=title)
            )
            if len(hits) == k:
                break
        return hits, skipped

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        total = int(self.meta["num_passages"])
        k = min(k, total)
        found: list[list[Hit] | None] = [None] * len(queries)
        todo = list(range(len(queries)))
        depth = min(total, max(100, 4 * k) if self.excluded else k)  # the authors' first depth
        while todo:
            results = self.searcher.batch_search(
                [queries[i] for i in todo], [str(i) for i in todo], k=depth, threads=max(1, threads)
            )
            deeper = []
            for i in todo:
                raw = results.get(str(i), [])
                hits, skipped = self._allowed(raw, k)
                if len(hits) < k and len(raw) == depth < total:
                    deeper.append(i)  # too many excluded near the top: look further down
                else:
                    found[i] = hits
                    self.excluded_hits += skipped
            todo, depth = deeper, min(total, 2 * depth)
        return [hits or [] for hits in found]
