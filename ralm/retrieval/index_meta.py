"""`ralm_index.json`: what an index folder was built from, so a stale or foreign index is caught on open.

Format ``ralm-index/1`` (docs/formats.md section 2): backend, analyzer or encoder settings, passage count,
the passages file's path and sha256, creation time and the ralm version.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ralm.atomic_files import write_json_atomic
from ralm.errors import RalmInputError
from ralm.fingerprints import file_sha256, fingerprint

META_NAME = "ralm_index.json"
FORMAT = "ralm-index/1"
BM25_PARAMETERS = "bm25"
"""The meta field holding a BM25 index's parameters (k1, b and, for bm25s, its scoring)."""
# Metadata that names a place or a moment rather than content: left out of the index's identity so the
# same index copied to another machine (torchrun nodes) or rebuilt identically is still the same index.
_VOLATILE = {"created", "passages_path", "ralm_version", "index_dir", "build_seconds"}


def _ralm_version() -> str:
    try:
        from importlib.metadata import version

        return version("ralm")
    except Exception:  # running from a source tree that was never installed
        return "unknown"


def make_meta(backend: str, passages_path: Path, passages_sha256: str, num_passages: int, **settings) -> dict:
    return {
        "format": FORMAT,
        "backend": backend,
        **settings,
        "num_passages": num_passages,
        "passages_path": str(Path(passages_path).resolve()),
        "passages_sha256": passages_sha256,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ralm_version": _ralm_version(),
    }


def index_fingerprint(meta: dict) -> str:
    """An index's one identity: the fingerprint of its content fields (backend, analyzer or encoder,
    options, passage count, passages hash). Data-gen records it, eval results and the retrieval cache use
    it."""
    return fingerprint({k: v for k, v in meta.items() if k not in _VOLATILE})


def write_meta(index_dir: Path, meta: dict) -> None:
    write_json_atomic(Path(index_dir) / META_NAME, meta)


def read_meta(index_dir: str | os.PathLike) -> dict:
    """The index's metadata; a folder without a readable ralm_index.json is not a ralm index."""
    path = Path(index_dir) / META_NAME
    if not Path(index_dir).is_dir():
        raise RalmInputError(f"{index_dir}: no such index folder")
    if not path.is_file():
        raise RalmInputError(
            f"{path}: missing; {index_dir} is not a ralm index (build one with `ralm index`)"
        )
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RalmInputError(f"{path}: unreadable index metadata ({err})") from None
    if meta.get("format") != FORMAT:
        raise RalmInputError(f"{path}: field 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    return meta


def check_passages(meta: dict, index_dir: str | os.PathLike, passages_path: str | os.PathLike | None) -> Path:
    """The passages file to read hits from, verified against the hash the index was built with."""
    path = Path(passages_path or meta["passages_path"])
    if not path.is_file():
        raise RalmInputError(
            f"{index_dir}/{META_NAME}: passages file {path} is missing "
            "(pass the passages file it was built from)"
        )
    digest = file_sha256(path)
    if digest != meta["passages_sha256"]:
        raise RalmInputError(
            f"{index_dir}: index was built from another passages file "
            f"(sha256 {meta['passages_sha256'][:12]}…, "
            f"{path} has {digest[:12]}…); rebuild it with `ralm index`"
        )
    return path
