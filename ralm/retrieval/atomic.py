"""Write files and folders under a temporary name and rename them into place only when complete.

A killed or failed run then never leaves a half-written passages file, run file or index behind: readers
see either the old state or the finished new one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary sibling path; on success rename it to `path`, on any error delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def partial_dir(final: Path) -> Path:
    """Where an index is built before it is renamed to `final` (kept across runs only for resumable work)."""
    return final.with_name(f"{final.name}.partial")


def publish_dir(partial: Path, final: Path) -> None:
    """Move a finished build folder into place, replacing an older folder of the same name."""
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, old)
        os.replace(partial, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(partial, final)
