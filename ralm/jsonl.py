"""Line-delimited JSON in and out: one reader with one wording for every bad line, and one resumable log.

Every JSONL input of ralm (documents, passages, evaluation text, QA questions) is read here, so a bad
line reads the same everywhere: ``file:line:column: not valid JSON (reason at line L, column C)``,
``file:line: not UTF-8``, ``file:line: expected a JSON object, got list``. ``looks_like_jsonl`` decides a
file's format by its content (a ``.json`` file of one object per line is JSONL; a text file that starts with
``{`` on every line is too), so a file is never read as raw text with its braces.

``JsonlLog`` is the one append-only log of finished units (eval windows, QA examples, retrieved queries):
a killed run loses at most the unit it was writing, and a rerun reads the finished ones back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from ralm.errors import RalmInputError

K = TypeVar("K", bound=Hashable)


def decoded_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text without its line ending) for every line; a line that is not UTF-8 raises."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            yield lineno, _decode(raw, f"{path}:{lineno}").rstrip("\r\n")


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RalmInputError(f"{where}: not UTF-8 ({err.reason} at byte {err.start})") from None


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; the first bad line raises a RalmInputError."""
    for lineno, line in decoded_lines(path):
        if line.strip():
            yield lineno, parse_json_object(line, path, lineno)


def parse_json_object(line: str, path: str | os.PathLike, lineno: int) -> dict:
    """Line `lineno` of `path` as a dict; a bad line raises ``file:line:column: not valid JSON (reason at
    line L, column C)``."""
    where = f"{path}:{lineno}"
    try:
        obj = json.loads(line.rstrip("\r\n"))  # so the column counts within this line
    except json.JSONDecodeError as err:
        # json's reasons are written to be followed by a position ("Unterminated string starting at"):
        # give it in the file's own terms, not the one-line string's.
        reason = err.msg.removesuffix(" at")
        raise RalmInputError(
            f"{where}:{err.colno}: not valid JSON ({reason} at line {lineno}, column {err.colno})"
        ) from None
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


class JsonlLog(Generic[K]):
    """An append-only JSONL file of finished records, read back when a rerun opens it again.

    ``records`` maps ``key(record)`` to the record (a later line with the same key replaces an earlier one).
    On opening an existing file: a last line without its newline is what a kill mid-write leaves, and is
    dropped; a complete line that is not a JSON object is damage, not a kill, and raises (``file:line``).
    `header`, when given, is the file's first line: a file that starts otherwise (another configuration)
    is started over. `accept(position, record)` may refuse an older record (a run file must hold its
    queries in order): it and every line after it are dropped. The file is cut back to what was kept, so
    appends always start on a clean line.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        key: Callable[[dict], K],
        *,
        header: dict | None = None,
        accept: Callable[[int, dict], bool] | None = None,
        ensure_ascii: bool = False,
    ) -> None:
        self.path = Path(path)
        self._key = key
        self._ensure_ascii = ensure_ascii
        self.records: dict[K, dict] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = self._read_back(header, accept or (lambda _position, _record: True))
        with open(self.path, "ab") as f:
            f.truncate(kept)
            if kept == 0 and header is not None:
                f.write(self._line(header))

    def _read_back(self, header: dict | None, accept: Callable[[int, dict], bool]) -> int:
        """Fill ``records`` from the file; returns the byte length of the lines kept (header included)."""
        if not self.path.is_file():
            return 0
        kept, position = 0, 0
        with open(self.path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                if not raw.endswith(b"\n"):
                    break  # torn by a kill mid-write
                if lineno == 1 and header is not None:
                    if not _is_header(raw, header):
                        return 0
                elif raw.strip():
                    record = parse_json_object(_decode(raw, f"{self.path}:{lineno}"), self.path, lineno)
                    if not accept(position, record):
                        break
                    self.records[self._key(record)] = record
                    position += 1
                kept += len(raw)
        return kept

    def _line(self, record: dict) -> bytes:
        return (json.dumps(record, ensure_ascii=self._ensure_ascii) + "\n").encode("utf-8")

    def append(self, records: Iterable[dict]) -> None:
        """Append finished records and force them to disk before returning (a kill after this loses none)."""
        records = list(records)
        keys = [self._key(r) for r in records]  # a record without its key fails before anything is written
        with open(self.path, "ab") as f:
            f.write(b"".join(self._line(r) for r in records))
            f.flush()
            os.fsync(f.fileno())
        self.records.update(zip(keys, records, strict=True))


def _is_header(raw: bytes, header: dict) -> bool:
    try:
        return json.loads(raw) == header
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
