"""The question files of BSD `quiz` (Debian `bsdgames`): facts as colon-separated fields, for QA tests.

Each file holds one record per line (a trailing backslash continues it), fields separated by ``:``; the
``index`` file names each file's fields (``elements:symbol:number:weight:element``). Inside a field,
``{x}`` marks an optional part, ``a|b`` alternatives and ``[a|b]`` a group of alternatives; a backslash
makes the next character literal (``\\:``). A field becomes the list of every spelling it accepts, the
fullest first (optional parts in, first alternatives), which is the one to show in a question.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from ralm.corpora.debian import fetch_package
from ralm.errors import RalmInputError

QUIZ_PACKAGE = "bsdgames"
_QUIZ_DIR = "usr/share/games/bsdgames/quiz"


def expand(pattern: str) -> list[str]:
    """Every spelling a quiz field accepts, fullest first: ``"cap{ital}"`` -> ``["capital", "cap"]``."""
    options, _ = _alternatives(pattern, 0, None)
    return list(dict.fromkeys(o.strip() for o in options))


def _alternatives(s: str, i: int, closer: str | None) -> tuple[list[str], int]:
    """Alternatives separated by ``|`` from `i` up to `closer` (or the end); returns (options, index
    after)."""
    options: list[str] = []
    while True:
        seq, i = _sequence(s, i, closer)
        options += seq
        if i < len(s) and s[i] == "|":
            i += 1
            continue
        if closer is not None and i < len(s):
            i += 1  # the closer; a bracket left open at the end of the field closes there, as in quiz(6)
        return options, i


def _sequence(s: str, i: int, closer: str | None) -> tuple[list[str], int]:
    """A concatenation of literal characters and bracketed parts, up to ``|`` or `closer`."""
    parts: list[list[str]] = []
    while i < len(s) and s[i] != "|" and s[i] != closer:
        char = s[i]
        if char == "{":
            inner, i = _alternatives(s, i + 1, "}")
            parts.append(inner + [""])  # included first, so the fullest spelling comes first
        elif char == "[":
            inner, i = _alternatives(s, i + 1, "]")
            parts.append(inner)
        else:
            # A stray closing bracket is a literal, as quiz(6) reads it (seq-hard has "n[**|^]2}").
            if char == "\\" and i + 1 < len(s):
                i += 1
            parts.append([s[i]])
            i += 1
    return ["".join(p) for p in itertools.product(*parts)], i


def split_fields(line: str) -> list[str]:
    """Split a record on unescaped colons; escapes stay in place for `expand`."""
    fields, current, i = [], [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            current.append(line[i : i + 2])
            i += 2
            continue
        if line[i] == ":":
            fields.append("".join(current))
            current = []
        else:
            current.append(line[i])
        i += 1
    fields.append("".join(current))
    return fields


def logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined; blank lines dropped."""
    out, pending = [], ""
    for raw in text.splitlines():
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            pending += raw[:-1]
            continue
        line, pending = pending + raw, ""
        if line.strip():
            out.append(line)
    if pending.strip():
        out.append(pending)
    return out


def parse_quiz(text: str, field_names: list[str], source: str = "quiz") -> list[dict[str, list[str]]]:
    """Records of one quiz file as {field name: accepted spellings (fullest first)}."""
    records = []
    for number, line in enumerate(logical_lines(text), 1):
        fields = split_fields(line)
        if len(fields) > len(field_names) > 0:
            # An unescaped colon inside the last field ("3-201:transfer: right to indorsement" in ucc).
            fields = fields[: len(field_names) - 1] + [":".join(fields[len(field_names) - 1 :])]
        if len(fields) != len(field_names):
            raise RalmInputError(
                f"{source}:{number}: {len(fields)} fields, the index names {len(field_names)}"
            )
        records.append({name: expand(f) for name, f in zip(field_names, fields, strict=True)})
    return records


def _index(quiz_dir: Path) -> dict[str, list[str]]:
    """file name -> field names (each category's fullest spelling), from the quiz `index` file."""
    out = {}
    for line in logical_lines((quiz_dir / "index").read_text()):
        path, *categories = split_fields(line)
        out[Path(path).name] = [expand(c)[0] for c in categories]
    return out


def quiz_names() -> list[str]:
    """Names of the quiz files ("elements", "europe", "state", ...)."""
    return sorted(_index(fetch_package(QUIZ_PACKAGE) / _QUIZ_DIR))


def quiz(name: str) -> list[dict[str, list[str]]]:
    """Quiz file `name` as records {field: spellings}; e.g. ``quiz("elements")[0]["number"] == ["1"]``."""
    quiz_dir = fetch_package(QUIZ_PACKAGE) / _QUIZ_DIR
    index = _index(quiz_dir)
    if name not in index:
        raise RalmInputError(f"quiz name {name!r}: choose one of {', '.join(sorted(index))}")
    path = quiz_dir / name
    return parse_quiz(path.read_text(encoding="utf-8", errors="replace"), index[name], str(path))


def quiz_pairs(name: str, ask: str, answer: str) -> list[tuple[str, list[str]]]:
    """(question subject, accepted answers) pairs: ``quiz_pairs("elements", "element", "number")``
    gives ``("Hydrogen", ["1"])``, ... The subject is the fullest spelling of the `ask` field."""
    records = quiz(name)
    if records and (ask not in records[0] or answer not in records[0]):
        raise RalmInputError(f"quiz {name}: fields are {', '.join(records[0])}; got {ask!r}, {answer!r}")
    return [(r[ask][0], r[answer]) for r in records]
