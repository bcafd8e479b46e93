"""Build and open retrieval indexes: one entry point for the bm25s, pyserini and faiss backends.

An index folder holds the engine's files, the passage offsets/ids for reading hits back, and
``ralm_index.json`` (docs/formats.md section 2). It is built in ``<index_dir>.partial`` and renamed into
place when complete, so a failed build never leaves a half-written index under the real name.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from ralm.atomic_files import partial_dir, publish_dir
from ralm.errors import RalmInputError
from ralm.fingerprints import file_sha256
from ralm.retrieval.index_meta import META_NAME, check_passages, make_meta, read_meta, write_meta
from ralm.retrieval.passage_store import PassageStore, save_store
from ralm.retrieval.passages import Passage, read_passages
from ralm.retrieval.types import Retriever

BACKENDS = ("bm25s", "pyserini", "faiss")
# Options each backend accepts (besides passages_path, index_dir, backend, overwrite).
BACKEND_OPTIONS = {
    "bm25s": {"k1", "b"},
    "pyserini": {"k1", "b", "threads"},
    "faiss": {
        "encoder",
        "pooling",
        "normalize",
        "max_length",
        "batch_size",
        "shard_size",
        "device",
        "gpu_index",
    },
}


def _same_build(meta: dict, backend: str, sha: str, options: dict) -> bool:
    """Whether an existing index is exactly what this call would build (then it is reused)."""
    return (
        meta.get("backend") == backend
        and meta.get("passages_sha256") == sha
        and meta.get("options") == options
    )


def build_index(
    passages_path: str | os.PathLike,
    index_dir: str | os.PathLike,
    backend: str = "bm25s",
    overwrite: bool = False,
    **options,
) -> dict:
    """Index a passages JSONL file into `index_dir`; returns the index metadata (ralm_index.json).

    An existing index built from the same file with the same backend is reused; any other existing
    folder is an error unless `overwrite`. Bad passages fail (file:line) before the engine starts.
    """
    passages_path, index_dir = Path(passages_path), Path(index_dir)
    _check_backend_options(backend, options)
    passages = read_passages(passages_path)  # validates every line before any engine work
    sha = file_sha256(passages_path)
    reused = _reusable_index(index_dir, passages_path, backend, sha, options, overwrite)
    if reused is not None:
        return reused
    partial = partial_dir(index_dir)
    resumable = backend == "faiss"  # encoded shards survive a killed build; the rest rebuilds quickly
    if partial.exists() and not resumable:
        shutil.rmtree(partial)
    partial.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        settings = _build_engine(backend, passages, passages_path, partial, sha, options)
        save_store(partial, passages_path, [p.id for p in passages])
        meta = make_meta(backend, passages_path, sha, len(passages), **settings, options=options)
        meta["build_seconds"] = round(time.perf_counter() - started, 3)
        write_meta(partial, meta)
    except BaseException:
        # Keep a dense build's encoded shards for the next run; anything else is removed.
        if not resumable or not any((partial / "shards").glob("emb-*.npy")):
            shutil.rmtree(partial, ignore_errors=True)
        raise
    publish_dir(partial, index_dir)
    return meta


def _check_backend_options(backend: str, options: dict) -> None:
    """A known backend, given only options it takes (checked before the passages are read)."""
    if backend not in BACKENDS:
        raise RalmInputError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    unknown = set(options) - BACKEND_OPTIONS[backend]
    if unknown:
        raise RalmInputError(f"backend {backend!r} has no option(s) {', '.join(sorted(unknown))}")


def _reusable_index(
    index_dir: Path, passages_path: Path, backend: str, sha: str, options: dict, overwrite: bool
) -> dict | None:
    """The metadata of an existing index that is exactly this build (reused), else None when the folder
    may be (re)built; any other existing folder is refused unless `overwrite`."""
    if not index_dir.exists():
        return None
    meta_path = index_dir / META_NAME
    if meta_path.is_file() and not overwrite:
        meta = read_meta(index_dir)
        if _same_build(meta, backend, sha, options):
            print(f"index: {index_dir} is already built from {passages_path}; reusing it", file=sys.stderr)
            return meta
    if not overwrite:
        raise RalmInputError(f"{index_dir}: exists and is not an index of {passages_path}; pass --overwrite")
    return None


def _build_engine(
    backend: str, passages: list[Passage], passages_path: Path, partial: Path, sha: str, options: dict
) -> dict:
    """The backend's own files in `partial`; returns its settings for ralm_index.json. Each backend's
    library is imported only when that backend builds."""
    if backend == "bm25s":
        from ralm.retrieval.bm25s_backend import build_bm25s

        return build_bm25s(passages, partial, **options)
    if backend == "pyserini":
        from ralm.retrieval.pyserini_backend import build_pyserini

        return build_pyserini(passages_path, partial, **options)
    from ralm.retrieval.faiss_backend import build_faiss

    return build_faiss(passages, partial, passages_sha256=sha, **options)


def open_index(
    index_dir: str | os.PathLike, passages_path: str | os.PathLike | None = None, **options
) -> Retriever:
    """Open an index for search. The passages file (default: the one recorded at build time) must have the
    sha256 recorded in ralm_index.json; a stale or foreign index is a RalmInputError.

    faiss options: ``device`` ("auto", "cpu", "cuda") for the query encoder and FAISS GPU index.
    """
    index_dir = Path(index_dir)
    meta = read_meta(index_dir)
    if meta.get("backend") == "pyserini-prebuilt":  # no passages file: hits come from the Lucene index
        from ralm.retrieval.prebuilt import PrebuiltRetriever

        if options:
            raise RalmInputError(
                f"{index_dir}: a prebuilt index takes no open options ({', '.join(options)})"
            )
        return PrebuiltRetriever(index_dir, meta)
    path = check_passages(meta, index_dir, passages_path)
    store = PassageStore(index_dir, path)
    if len(store) != meta["num_passages"]:
        raise RalmInputError(
            f"{index_dir}/{META_NAME}: num_passages {meta['num_passages']} but {len(store)} rows"
        )
    backend = meta.get("backend")
    if options and backend != "faiss":
        raise RalmInputError(f"{index_dir}: backend {backend!r} takes no open options ({', '.join(options)})")
    if backend == "bm25s":
        from ralm.retrieval.bm25s_backend import Bm25sRetriever

        return Bm25sRetriever(index_dir, meta, store, **options)
    if backend == "pyserini":
        from ralm.retrieval.pyserini_backend import PyseriniRetriever

        return PyseriniRetriever(index_dir, meta, store, **options)
    if backend == "faiss":
        from ralm.retrieval.faiss_backend import FaissRetriever

        return FaissRetriever(index_dir, meta, store, **options)
    raise RalmInputError(
        f"{index_dir}/{META_NAME}: field 'backend' is {backend!r}, not one of {', '.join(BACKENDS)}"
    )
