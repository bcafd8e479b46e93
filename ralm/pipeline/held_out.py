"""Keep the evaluation text out of everything a run learns or retrieves from: `ralm run`'s leak rule.

The eval documents, and everything ``--exclude`` names, are left out of the retrieval corpus (the index
stage's ``--exclude``) and out of the training text (data-gen's ``--exclude``, which also keeps them out
of the validation prefixes and of the thresholds fitted on data-gen's rows), whether the
training text is the corpus (the default) or ``--train-text``.

A document of the corpus or the training text is a copy of an eval document when

- the eval text names its documents (JSONL rows, or a ``datasets`` folder with an ``id`` column) and the
  document's id or title equals an eval document's id or title (the ``--exclude`` rule for names), or
- its text equals an eval document's text with all runs of whitespace made one space (a copy filed under
  another id or title). A plain-text eval file (or a ``datasets`` folder without ids) is one document:
  its copy is a document holding the whole text; a document holding only part of it is not found this
  way, so name such parts with ``--exclude``.

Every copy found is passed on by id, so ``commands.sh`` shows exactly what each stage left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from ralm.jsonl import looks_like_jsonl, read_jsonl
from ralm.pipeline.texts import PipelineTexts


@dataclass(frozen=True)
class EvalDocuments:
    """What identifies the eval documents: their ids and titles, and digests of their normalised texts."""

    names: frozenset[str]
    texts: frozenset[str]
    count: int


def text_digest(text: str) -> str:
    """SHA-256 of `text` with every run of whitespace made one space and none at either end."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def eval_documents(path: Path, field: str = "text") -> EvalDocuments:
    """The eval text's documents: JSONL rows, a ``datasets`` folder's rows when it has an ``id`` column,
    else the whole text as one document (read as `ralm eval ppl` reads it)."""
    from ralm.eval.ppl.eval_text import read_eval_text

    path = Path(path)
    rows: list[dict] = []
    if path.is_dir():
        rows = _dataset_rows_with_ids(path, field)
    elif looks_like_jsonl(path):
        rows = [row for _, row in read_jsonl(path)]
    if not rows:
        rows = [{"text": read_eval_text(path, field)}]
    names = {str(row[key]) for row in rows for key in ("id", "title") if row.get(key) not in (None, "")}
    texts = {
        text_digest(row[field]) for row in rows if isinstance(row.get(field), str) and row[field].strip()
    }
    return EvalDocuments(frozenset(names), frozenset(texts), len(rows))


def _dataset_rows_with_ids(path: Path, field: str) -> list[dict]:
    """Rows of a saved dataset (its only or ``test`` split) when they carry ids; [] otherwise."""
    from datasets import DatasetDict, load_from_disk

    data = load_from_disk(str(path))
    if isinstance(data, DatasetDict):
        data = data["test"] if "test" in data else data[next(iter(data))] if len(data) == 1 else None
    if data is None or "id" not in data.column_names or field not in data.column_names:
        return []
    keep = [c for c in ("id", "title", field) if c in data.column_names]
    return list(data.select_columns(keep))


def copies_of(documents: Iterable[dict], held_out: EvalDocuments) -> list[str]:
    """Ids of the documents that are copies of an eval document (by id or title, or by whole text)."""
    return [
        doc["id"]
        for doc in documents
        if {doc["id"], doc["title"]} & held_out.names or text_digest(doc["text"]) in held_out.texts
    ]


@dataclass(frozen=True)
class LeftOut:
    """The user's texts with what the index and data-gen must leave out, and what was found where."""

    texts: PipelineTexts
    corpus_copies: list[str]
    train_copies: list[str]
    eval_documents: int


def leave_out_eval_documents(texts: PipelineTexts) -> LeftOut:
    """Read the corpus and the training text once (a bad line fails here, naming file and line) and add
    each one's copies of the eval documents to what its stage leaves out, after the user's --exclude."""
    from ralm.retrieval.passages import read_documents

    held_out = eval_documents(texts.eval)
    corpus_copies = copies_of(read_documents(texts.corpus), held_out)
    train_copies = (
        corpus_copies if texts.train == texts.corpus else copies_of(read_documents(texts.train), held_out)
    )
    user = list(texts.exclude)
    updated = replace(
        texts,
        exclude=tuple(dict.fromkeys([*user, *corpus_copies])),
        train_exclude=tuple(dict.fromkeys([*user, *train_copies])),
    )
    return LeftOut(updated, corpus_copies, train_copies, held_out.count)


def describe_copies(left: LeftOut) -> str:
    """One line for the log: how many copies of the eval documents each input held."""

    def found(ids: list[str], where: str) -> str:
        named = f" ({', '.join(ids[:8])}{', ...' if len(ids) > 8 else ''})" if ids else ""
        return f"{len(ids)} {'copy' if len(ids) == 1 else 'copies'} in {where}{named}"

    places = [found(left.corpus_copies, "the corpus")]
    if left.texts.train != left.texts.corpus:
        places.append(found(left.train_copies, "the training text"))
    return (
        f"eval text: {left.eval_documents} document(s), {' and '.join(places)}; the index and data-gen leave "
        "them out, and what --exclude names"
    )
