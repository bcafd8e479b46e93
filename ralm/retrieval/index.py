"""Build and open retrieval indexes: one entry point for every backend (``ralm.retrieval.backends``).

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
from ralm.retrieval.backends import BUILT, DEFAULT, backend_class
from ralm.retrieval.index_meta import META_NAME, make_meta, read_meta, write_meta
from ralm.retrieval.passage_store import save_store
from ralm.retrieval.passages import read_passages
from ralm.retrieval.types import IndexBackend, Retriever


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
    backend: str = DEFAULT,
    overwrite: bool = False,
    **options,
) -> dict:
    """Index a passages JSONL file into `index_dir`; returns the index metadata (ralm_index.json).

    `backend`: one of ``ralm.retrieval.backends.BUILT``; `options`: its class's ``build_options``. An
    existing index built from the same file with the same backend is reused; any other existing folder is
    an error unless `overwrite`. Bad passages fail (file:line) before the engine starts.
    """
    passages_path, index_dir = Path(passages_path), Path(index_dir)
    engine = backend_class(backend, "backend", BUILT)
    recorded = _recorded_options(engine, backend, options)
    passages = read_passages(passages_path)  # validates every line before any engine work
    sha = file_sha256(passages_path)
    reused = _reusable_index(index_dir, passages_path, backend, sha, recorded, overwrite)
    if reused is not None:
        return reused
    partial = partial_dir(index_dir)
    if partial.exists() and not engine.resumable(partial):
        shutil.rmtree(partial)
    partial.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        settings = engine.build(
            passages, partial, passages_path=passages_path, passages_sha256=sha, **options
        )
        save_store(partial, passages_path, [p.id for p in passages])
        meta = make_meta(backend, passages_path, sha, len(passages), **settings, options=recorded)
        meta["build_seconds"] = round(time.perf_counter() - started, 3)
        write_meta(partial, meta)
    except BaseException:
        if not engine.resumable(partial):  # work the next build resumes from is kept, the rest removed
            shutil.rmtree(partial, ignore_errors=True)
        raise
    publish_dir(partial, index_dir)
    return meta


def _recorded_options(engine: type[IndexBackend], backend: str, options: dict) -> dict:
    """The options as ralm_index.json records them, after checking that the backend takes each (before the
    passages are read). Options recorded under another key come last, where `ralm index` writes them."""
    unknown = set(options) - engine.build_options
    if unknown:
        raise RalmInputError(f"backend {backend!r} has no option(s) {', '.join(sorted(unknown))}")
    renamed = engine.recorded_as
    kept = {name: value for name, value in options.items() if name not in renamed}
    return kept | {renamed[name]: value for name, value in options.items() if name in renamed}


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


def open_index(
    index_dir: str | os.PathLike, passages_path: str | os.PathLike | None = None, **options
) -> Retriever:
    """Open an index for search. The passages file (default: the one recorded at build time) must have the
    sha256 recorded in ralm_index.json; a stale or foreign index is a RalmInputError.

    `options`: the backend's ``open_options`` (`open_options` says which), e.g. a dense index's ``device``
    ("auto", "cpu", "cuda") for the query encoder and FAISS GPU index.
    """
    index_dir = Path(index_dir)
    meta = read_meta(index_dir)
    engine = _engine_of(index_dir, meta)
    unknown = set(options) - engine.open_options
    if unknown:
        raise RalmInputError(
            f"{index_dir}: backend {meta['backend']!r} takes no open option(s) {', '.join(sorted(unknown))}"
        )
    return engine.open(index_dir, meta, Path(passages_path) if passages_path else None, **options)


def open_options(index_dir: str | os.PathLike) -> frozenset[str]:
    """The options `open_index` takes for this index (a command passes a setting only where it applies)."""
    return _engine_of(Path(index_dir), read_meta(index_dir)).open_options


def _engine_of(index_dir: Path, meta: dict) -> type[IndexBackend]:
    return backend_class(meta.get("backend"), f"{index_dir}/{META_NAME}: field 'backend'")
