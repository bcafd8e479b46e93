"""Line-delimited JSON in, with one wording for every bad line, whoever reads it.

Every JSONL input of ralm (documents, passages, evaluation text, QA questions) is read here, so a bad
line reads the same everywhere: ``file:line:column: not valid JSON (reason)``, ``file:line: not UTF-8``,
``file:line: expected a JSON object, got list``. ``looks_like_jsonl`` decides a file's format by its
content (a ``.json`` file of one object per line is JSONL; a text file that starts with ``{`` on every
line is too), so a file is never read as raw text with its braces.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from ralm.errors import RalmInputError


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; the first bad line raises a RalmInputError."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise RalmInputError(
                    f"{path}:{lineno}: not UTF-8 ({err.reason} at byte {err.start})"
                ) from None
            if not line.strip():
                continue
            yield lineno, parse_json_object(line, f"{path}:{lineno}")


def parse_json_object(line: str, where: str) -> dict:
    """One JSONL line as a dict; `where` (``file:line``) starts the error, the column is added."""
    try:
        obj = json.loads(line.rstrip("\r\n"))  # so the column counts within this line
    except json.JSONDecodeError as err:
        raise RalmInputError(f"{where}:{err.colno}: not valid JSON ({err.msg})") from None
    if not isinstance(obj, dict):
        raise RalmInputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def looks_like_jsonl(path: str | os.PathLike, probe_lines: int = 5) -> bool:
    """A ``.jsonl`` name, or a file whose first non-blank lines each start with ``{`` (a ``.json`` file of
    one object per line, or JSONL under another name)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return True
    starts = []
    with open(path, "rb") as f:
        for raw in f:
            if raw.strip():
                starts.append(raw.lstrip()[:1] == b"{")
            if len(starts) == probe_lines:
                break
    return bool(starts) and all(starts)
