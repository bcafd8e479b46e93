"""Write files and folders under a temporary name and rename them into place only when complete.

A killed or failed run then never leaves a half-written passages file, results file or index behind:
readers see either the old state or the finished new one. The temporary name is a hidden sibling of the
target (``.NAME.tmp-PID-RANDOM``), in the same folder, so the final ``os.replace`` stays on one file
system and is atomic. Nothing is fsynced (no caller needs crash durability, only no torn files; the
resumable logs of ``ralm.jsonl`` sync their own appends). Every rename in ralm happens here: a file or
folder built elsewhere is moved into place with ``publish_file`` / ``publish_dir``, or with ``publish_first``
where concurrent writers build the same thing and the first one to finish wins.

Top level, not under a stage, so every stage (``ralm.retrieval``, ``ralm.lm``, ``ralm.eval``, ...) can use
it without importing another stage.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ralm.errors import RalmInputError


def temp_sibling(path: str | os.PathLike, suffix: str = "") -> Path:
    """A fresh hidden name beside `path`, unique per process and call (``suffix`` keeps an extension that a
    writer such as ``np.save`` or ``savefig`` needs)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}{suffix}")


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary sibling path for the caller to create (a file or a folder); on success rename it
    to `path`, replacing what is there (an older folder too); on any error delete it and leave `path` as
    it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path, suffix)
    try:
        yield tmp
        if tmp.is_dir():
            publish_dir(tmp, path)
        else:
            publish_file(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write `text` to `path` atomically (the parent folder is created if needed)."""
    with atomic_path(path) as tmp, open(tmp, "x", encoding=encoding) as f:
        f.write(text)


def write_json_atomic(path: str | os.PathLike, obj: Any, indent: int | None = 2, **dumps_kwargs: Any) -> None:
    """``json.dumps(obj, indent=indent, **dumps_kwargs)`` plus a final newline, written atomically.

    `obj` is serialised before any file is created, so an unserialisable value leaves nothing behind.
    """
    write_text_atomic(path, json.dumps(obj, indent=indent, **dumps_kwargs) + "\n")


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[dict], **dumps_kwargs: Any) -> int:
    """One ``json.dumps(row, **dumps_kwargs)`` line per row, written atomically; returns the row count."""
    count = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, **dumps_kwargs) + "\n")
            count += 1
    return count


def partial_dir(final: Path) -> Path:
    """Where a folder is built before it is renamed to `final` (kept across runs only for resumable work)."""
    return final.with_name(f"{final.name}.partial")


def publish_file(done: str | os.PathLike, final: str | os.PathLike) -> None:
    """Move a finished file into place in one step, replacing an older file (same file system only)."""
    os.replace(done, final)


def publish_dir(partial: Path, final: Path) -> None:
    """Move a finished build folder into place, replacing an older folder of the same name."""
    if final.exists():
        # A folder cannot be renamed over a non-empty one: set the old one aside, then remove it.
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, old)
        os.replace(partial, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(partial, final)


def publish_first(partial: Path, final: Path, finished: Callable[[Path], bool]) -> bool:
    """Rename the folder `partial` to `final` unless another writer got there first: when `final` already
    exists and `finished(final)`, delete `partial` and return False (both built the same thing, so the
    first copy is kept). Any other failure raises, with `partial` left for the caller to clean up."""
    try:
        os.rename(partial, final)
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not finished(Path(final)):
            raise
        shutil.rmtree(partial, ignore_errors=True)
        return False
    return True


def ensure_writable_dir(path: str | os.PathLike) -> Path:
    """Create the output folder `path` and prove a file can be written there, before any expensive work.

    Permissions, a read-only disk or a file in the way become a one-line ``RalmInputError``.
    """
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = temp_sibling(folder / ".write-test")
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise RalmInputError(f"{folder}: output folder is not writable ({err.strerror or err})") from None
    return folder
