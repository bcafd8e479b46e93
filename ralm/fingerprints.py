"""Content fingerprints: what decides whether a finished result may be reused.

One ``file_sha256`` for the whole package (index passages, GGUF caches, Debian packages, demo stages),
``path_fingerprint`` for an input that may be a file or a folder (a ``datasets`` folder, a folder of
``.txt`` files): a stage keyed on it reruns when the contents change, whatever the file is called; and one
``fingerprint`` for a configuration (a run's settings, an index's identity, a demo stage's command line).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def fingerprint(config: Any) -> str:
    """Hex sha256 (all 64 digits) of `config` as JSON with sorted keys, values JSON lacks written by `str`.

    Equal for equal contents whatever the key order; every config hash of ralm is this one, so two files
    that name the same thing (an index in data-gen metadata and in eval results) name it alike.
    """
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file, read in 4 MiB chunks (passages files reach gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def path_fingerprint(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, or of a folder's relative file names and their contents (sorted)."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file_sha256(file).encode() + b"\0")
    return digest.hexdigest()
