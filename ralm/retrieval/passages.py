"""Raw documents in, DPR-style passages out (docs/formats.md section 1).

The paper's corpus is non-overlapping 100-word passages whose contents are ``"title\\ntext"``. Documents come
from a JSONL file, a folder of ``.txt`` files or a ``datasets`` dataset saved to disk; every reader checks its
input line by line so a bad file fails with its path and line before any index is built.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ralm.atomic_files import atomic_path
from ralm.errors import RalmInputError
from ralm.jsonl import read_jsonl
from ralm.retrieval.types import Passage


def _document(obj: dict, where: str) -> dict:
    """Normalise one raw record to {id, title, text}; `where` is "file:line" for error messages."""
    text = obj.get("text", obj.get("contents"))
    if text is None:
        raise RalmInputError(f"{where}: missing field 'text' (or 'contents')")
    if "id" not in obj or obj["id"] is None or str(obj["id"]) == "":
        raise RalmInputError(f"{where}: missing field 'id'")
    if not isinstance(text, str):
        raise RalmInputError(f"{where}: field 'text' must be a string")
    title = obj.get("title")
    if title is None and "text" not in obj and "\n" in text:
        # A Pyserini-style record ({"id", "contents": "title\ntext"}) carries its title on the first line.
        title, text = text.split("\n", 1)
    return {"id": str(obj["id"]), "title": "" if title is None else str(title), "text": text}


def _from_jsonl(path: Path) -> Iterator[tuple[dict, str]]:
    for lineno, obj in read_jsonl(path):
        yield _document(obj, f"{path}:{lineno}"), f"{path}:{lineno}"


def _from_txt_folder(path: Path) -> Iterator[tuple[dict, str]]:
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    for file in files:
        raw = file.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            lineno = raw[: err.start].count(b"\n") + 1
            raise RalmInputError(f"{file}:{lineno}: not UTF-8 ({err.reason})") from None
        doc_id = file.relative_to(path).with_suffix("").as_posix()
        yield {"id": doc_id, "title": file.stem, "text": text}, str(file)


def _from_datasets_dir(path: Path) -> Iterator[tuple[dict, str]]:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise RalmInputError(f"{path}: a DatasetDict needs a 'train' split; found {sorted(loaded)}")
        loaded = loaded["train"]
    columns = set(loaded.column_names)
    if not columns & {"text", "contents"}:
        raise RalmInputError(f"{path}: missing field 'text' (columns: {sorted(columns)})")
    for row_index, row in enumerate(loaded):
        if "id" not in row:
            row = {**row, "id": str(row_index)}
        yield _document(row, f"{path}[row {row_index}]"), f"{path}[row {row_index}]"


def _is_datasets_dir(path: Path) -> bool:
    return any((path / name).exists() for name in ("dataset_info.json", "state.json", "dataset_dict.json"))


def read_documents(path: str | os.PathLike) -> Iterator[dict]:
    """Documents as {id, title, text}: JSONL, a folder of .txt files (file name = title) or a datasets dir.

    Raises RalmInputError (naming file and line) for non-UTF-8 bytes, malformed JSON, a missing field,
    a duplicate id, or an input with no documents at all.
    """
    path = Path(path)
    if not path.exists():
        raise RalmInputError(f"{path}: no such file or folder")
    if path.is_dir():
        records = _from_datasets_dir(path) if _is_datasets_dir(path) else _from_txt_folder(path)
    else:
        records = _from_jsonl(path)
    first_seen: dict[str, str] = {}
    for doc, where in records:
        if doc["id"] in first_seen:
            raise RalmInputError(f"{where}: duplicate id {doc['id']!r} (first at {first_seen[doc['id']]})")
        first_seen[doc["id"]] = where
        yield doc
    if not first_seen:
        raise RalmInputError(f"{path}: empty input (no documents)")


def passage_starts(num_words: int, words: int, stride: int) -> list[int]:
    """Word offsets of a document's passages: every `stride` words, until one reaches the end.

    With ``stride == words`` the passages tile the text; a smaller stride overlaps them, and no passage is
    ever wholly inside the one before it (the last one may be shorter).
    """
    starts = [0]
    while starts[-1] + words < num_words:
        starts.append(starts[-1] + stride)
    return starts


def split_passages(
    docs: Iterable[dict],
    words: int = 100,
    exclude: Iterable[str] = (),
    stats: dict | None = None,
    stride: int | None = None,
) -> Iterator[Passage]:
    """`words`-word passages per document every `stride` words (default `words`: non-overlapping), ids
    ``{doc_id}-{n}`` (n from 0).

    Overlapping passages (``stride < words``) put every span of up to ``words - stride`` words wholly
    inside some passage with room before and after it, so a query's match and what follows it can be
    retrieved together.

    `exclude` holds titles or doc ids to leave out (the evaluation documents, as the paper removed
    WikiText-103's test articles); an entry ``re:PATTERN`` leaves out every document whose id or title
    the regular expression matches in full (``re:kjv-(Mark|Ruth)`` for two books, ``re:.*Mark.*`` for any
    version of one): see `filter_documents`. If `stats` is given it is filled with counts: documents,
    excluded, passages, the excluded documents' ids, and the exclude entries that matched nothing.
    """
    if words < 1:
        raise RalmInputError(f"passage words (--passage-words): must be >= 1, got {words}")
    stride = words if stride is None else stride
    if not 1 <= stride <= words:
        raise RalmInputError(
            f"passage stride (--passage-stride): must be between 1 and the passage words ({words}), "
            f"got {stride}"
        )
    passages = 0
    for doc in filter_documents(docs, exclude, stats):
        tokens = doc["text"].split()
        if not tokens:
            continue
        for n, start in enumerate(passage_starts(len(tokens), words, stride)):
            passages += 1
            body = " ".join(tokens[start : start + words])
            yield Passage(
                id=f"{doc['id']}-{n}",
                contents=f"{doc['title']}\n{body}",
                title=doc["title"],
                doc_id=doc["id"],
            )
    if stats is not None:
        stats["passages"] = passages


def filter_documents(
    docs: Iterable[dict], exclude: Iterable[str] = (), stats: dict | None = None
) -> Iterator[dict]:
    """The documents that no `exclude` entry names, in order: an entry is a title or doc id, or
    ``re:PATTERN`` matched in full against the id or the title (`ralm passages --exclude`, `ralm data-gen
    --exclude`). When the documents run out, `stats` (if given) gets the counts: documents, excluded, the
    excluded documents' ids, and the entries that matched nothing (often a typo worth reporting)."""
    names, patterns = exclusion_rules(exclude)
    matched: set[str] = set()
    excluded_ids: list[str] = []
    documents = 0
    for doc in docs:
        documents += 1
        hit = ({doc["id"], doc["title"]} & names) | {
            rule for rule, rx in patterns.items() if rx.fullmatch(doc["id"]) or rx.fullmatch(doc["title"])
        }
        if hit:
            matched |= hit
            excluded_ids.append(doc["id"])
        else:
            yield doc
    if stats is not None:
        stats.update(
            documents=documents,
            excluded=len(excluded_ids),
            excluded_ids=excluded_ids,
            unmatched_exclude=sorted((names | set(patterns)) - matched),
        )


def describe_exclusion(record: dict, what: str = "documents") -> str:
    """One line from `filter_documents`' counts: "2 of 51 corpus documents (a, b); entries that matched
    nothing: c" (at most 8 ids named)."""
    ids = record.get("excluded_ids", [])
    line = f"{len(ids)} of {record.get('documents', 0)} {what}"
    if ids:
        line += f" ({', '.join(ids[:8])}{', ...' if len(ids) > 8 else ''})"
    if record.get("unmatched_exclude"):
        line += f"; entries that matched nothing: {', '.join(record['unmatched_exclude'])}"
    return line


def exclusion_rules(exclude: Iterable[str]) -> tuple[set[str], dict[str, re.Pattern]]:
    """(exact titles or ids, {"re:PATTERN": compiled}) from exclude entries; a bad pattern names itself."""
    names, patterns = set(), {}
    for entry in exclude:
        if not entry.startswith("re:"):
            names.add(entry)
            continue
        try:
            patterns[entry] = re.compile(entry[3:])
        except re.error as err:
            raise RalmInputError(f"exclude {entry!r}: not a regular expression ({err})") from None
    return names, patterns


def passage_record(passage: Passage) -> dict:
    """The JSONL object of one passage (formats.md section 1)."""
    return {"id": passage.id, "contents": passage.contents, "title": passage.title, "doc_id": passage.doc_id}


def write_passages(passages: Iterable[Passage], path: str | os.PathLike) -> int:
    """Write passages as JSONL atomically (temp name, then rename); returns the count.

    Writing zero passages is an error: an empty corpus would only fail later, inside an index build.
    """
    count = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for passage in passages:
            f.write(json.dumps(passage_record(passage), ensure_ascii=False) + "\n")
            count += 1
        if count == 0:
            raise RalmInputError(f"{path}: no passages to write (every document was empty or excluded)")
    return count


def iter_passages(path: str | os.PathLike) -> Iterator[Passage]:
    """Stream a passages JSONL file, validating each line (id and contents required, ids unique)."""
    path = Path(path)
    if not path.is_file():
        raise RalmInputError(f"{path}: no such passages file")
    seen: set[str] = set()
    for lineno, obj in read_jsonl(path):
        where = f"{path}:{lineno}"
        if "id" not in obj:
            raise RalmInputError(f"{where}: missing field 'id'")
        contents = obj.get("contents")
        if not isinstance(contents, str):
            raise RalmInputError(f"{where}: missing field 'contents'")
        pid = str(obj["id"])
        if pid in seen:
            raise RalmInputError(f"{where}: duplicate id {pid!r}")
        seen.add(pid)
        title = obj.get("title", contents.split("\n", 1)[0])
        doc_id = obj.get("doc_id", pid.rsplit("-", 1)[0])
        yield Passage(id=pid, contents=contents, title=str(title), doc_id=str(doc_id))
    if not seen:
        raise RalmInputError(f"{path}: empty input (no passages)")


def read_passages(path: str | os.PathLike) -> list[Passage]:
    """All passages of a JSONL file (see `iter_passages` for the checks)."""
    return list(iter_passages(path))
