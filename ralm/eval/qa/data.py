"""Question-answering inputs: ralm's JSONL and the formats users download for FLARE's and RALM's datasets.

Every loader returns :class:`QAExample` records and checks each record before any model is loaded, so a
bad file fails at once with the file, the record (JSONL line or JSON array index) and the field.

Formats (``--format``; ``auto`` looks at the extension and the first record):
- ``jsonl``: one ``{"id", "question", "answers": [str, ...][, "context"]}`` per line.
- ``2wiki``: 2WikiMultihopQA's ``dev.json`` (array of ``{"_id", "question", "answer", "context", ...}``).
- ``strategyqa``: StrategyQA's ``strategyqa_train.json`` (array of ``{"qid", "question", "answer": bool}``);
  gold answers become "yes"/"no" and the task is scored by yes/no accuracy.
- ``asqa``: ASQA's ``ASQA.json`` (``{"train"|"dev": {sample_id: {"ambiguous_question", "qa_pairs",
  "annotations"}}}``); gold short answers from every qa pair, long answers for ROUGE-L.
- ``dpr``: a DPR retrieval results file (array of ``{"question", "answers", "ctxs": [{"title", "text"}]}``);
  the passages come with the questions, no index needed.
- ``continuation``: long-form generation, one ``{"id", "prompt", "continuation"}`` per line: the LM
  continues the prompt's text (no question, no answer pattern) and is scored against the true continuation
  (ROUGE-L F1, token F1 and name recall, ``ralm.eval.qa.metrics.score_answer``). ``auto`` reads a ``.jsonl``
  file whose first record has ``prompt`` and ``continuation`` as this format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralm.errors import RalmInputError
from ralm.jsonl import read_jsonl

FORMATS = ("auto", "jsonl", "2wiki", "strategyqa", "asqa", "dpr", "continuation")
CONTINUATION = "continuation"
"""The long-form task and format: continue a text, scored against its true continuation."""


@dataclass
class QAExample:
    """One question with its gold answers (and, for some formats, passages that come with it)."""

    id: str
    question: str
    answers: list[str]
    context: str | None = None
    task: str = "short"
    """``short`` (EM/F1), ``yesno`` (StrategyQA accuracy), ``long`` (ASQA: EM over short answers,
    ROUGE-L) or ``continuation`` (the question is a text to continue, the one answer its true
    continuation)."""
    long_answers: list[str] = field(default_factory=list)
    ctxs: list[dict] | None = None
    """Passages given with the question (DPR results format): ``[{"id"?, "title", "text"}]``."""
    answer_groups: list[list[str]] = field(default_factory=list)
    """ASQA: the short answers of each disambiguated question (its EM counts groups found)."""


def _where(path: Path, index: int, jsonl: bool) -> str:
    return f"{path}:{index + 1}" if jsonl else f"{path}[{index}]"


def _text_field(record: dict, key: str, where: str) -> str:
    if key not in record:
        raise RalmInputError(f"{where}: missing field '{key}'")
    value = record[key]
    if not isinstance(value, str):
        raise RalmInputError(f"{where}: field '{key}' must be a string, got {type(value).__name__}")
    if not value.strip():
        raise RalmInputError(f"{where}: field '{key}' is empty")
    return value.strip()


def _answers_field(record: dict, key: str, where: str) -> list[str]:
    if key not in record:
        raise RalmInputError(f"{where}: missing field '{key}'")
    value = record[key]
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise RalmInputError(f"{where}: field '{key}' must be a list of strings")
    if not value:
        raise RalmInputError(f"{where}: field '{key}' is an empty list")
    return value


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(zero-based line index, record), through the one JSONL reader (ralm.jsonl)."""
    for lineno, record in read_jsonl(path):
        yield lineno - 1, record


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RalmInputError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None


def _continuation_examples(path: Path) -> list[QAExample]:
    out = []
    for i, rec in _read_jsonl(path):
        where = _where(path, i, True)
        ex_id = str(rec["id"]) if "id" in rec else str(i)
        prompt, reference = _text_field(rec, "prompt", where), _text_field(rec, "continuation", where)
        out.append(QAExample(ex_id, prompt, [reference], task=CONTINUATION))
    return out


def _is_continuation_file(path: Path) -> bool:
    """Whether a ``.jsonl`` file's first record has the continuation format's fields."""
    first = next(_read_jsonl(path), None)
    return first is not None and {"prompt", "continuation"} <= set(first[1])


def _jsonl_examples(path: Path) -> list[QAExample]:
    out = []
    for i, rec in _read_jsonl(path):
        where = _where(path, i, True)
        context = rec.get("context")
        if context is not None and not isinstance(context, str):
            raise RalmInputError(f"{where}: field 'context' must be a string")
        ex_id = str(rec["id"]) if "id" in rec else str(i)
        out.append(
            QAExample(
                ex_id, _text_field(rec, "question", where), _answers_field(rec, "answers", where), context
            )
        )
    return out


def _records(data: Any, path: Path) -> list[dict]:
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise RalmInputError(f"{path}: expected a JSON array of objects")
    return data


def _twowiki_examples(path: Path, data: Any) -> list[QAExample]:
    out = []
    for i, rec in enumerate(_records(data, path)):
        where = _where(path, i, False)
        answer = _text_field(rec, "answer", where)
        ex_id = str(rec.get("_id", rec.get("id", i)))
        out.append(QAExample(ex_id, _text_field(rec, "question", where), [answer]))
    return out


def _strategyqa_examples(path: Path, data: Any) -> list[QAExample]:
    out = []
    for i, rec in enumerate(_records(data, path)):
        where = _where(path, i, False)
        if not isinstance(rec.get("answer"), bool):
            raise RalmInputError(f"{where}: field 'answer' must be true or false")
        gold = "yes" if rec["answer"] else "no"
        ex_id = str(rec.get("qid", i))
        out.append(QAExample(ex_id, _text_field(rec, "question", where), [gold], task="yesno"))
    return out


def _asqa_examples(path: Path, data: Any, split: str) -> list[QAExample]:
    if not isinstance(data, dict) or split not in data:
        raise RalmInputError(f"{path}: ASQA file has no '{split}' split (have: {sorted(data)[:5]})")
    out = []
    for key, rec in data[split].items():
        where = f"{path}[{split}][{key}]"
        question = _text_field(rec, "ambiguous_question", where)
        pairs = rec.get("qa_pairs")
        if not isinstance(pairs, list) or not pairs:
            raise RalmInputError(f"{where}: field 'qa_pairs' must be a non-empty list")
        groups = [_answers_field(p, "short_answers", f"{where}.qa_pairs[{j}]") for j, p in enumerate(pairs)]
        longs = [
            a["long_answer"] for a in rec.get("annotations", []) if isinstance(a.get("long_answer"), str)
        ]
        shorts = [a for g in groups for a in g]
        ex_id = str(rec.get("sample_id", key))
        out.append(QAExample(ex_id, question, shorts, task="long", long_answers=longs, answer_groups=groups))
    return out


def _dpr_examples(path: Path, data: Any) -> list[QAExample]:
    out = []
    for i, rec in enumerate(_records(data, path)):
        where = _where(path, i, False)
        ctxs = rec.get("ctxs")
        if not isinstance(ctxs, list):
            raise RalmInputError(f"{where}: missing field 'ctxs' (a list of {{title, text}})")
        for j, ctx in enumerate(ctxs):
            if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
                raise RalmInputError(f"{where}.ctxs[{j}]: missing field 'text'")
        question = _text_field(rec, "question", where)
        out.append(
            QAExample(str(rec.get("id", i)), question, _answers_field(rec, "answers", where), ctxs=ctxs)
        )
    return out


def detect_format(path: Path, data: Any) -> str:
    """Guess the format from the parsed JSON (``jsonl`` files are never parsed as one document)."""
    if isinstance(data, dict) and ({"dev", "train"} & set(data)):
        return "asqa"
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0]
        if "ctxs" in first:
            return "dpr"
        if "_id" in first or "supporting_facts" in first:
            return "2wiki"
        if isinstance(first.get("answer"), bool):
            return "strategyqa"
    raise RalmInputError(f"{path}: cannot tell the format; pass --format (one of {', '.join(FORMATS[1:])})")


def load_examples(
    path: str | Path, fmt: str = "auto", split: str = "dev", limit: int | None = None
) -> list[QAExample]:
    """Read and check every example of `path`; ids must be unique (predictions are resumed by id)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise RalmInputError(f"--format must be one of {', '.join(FORMATS)}, got '{fmt}'")
    if not path.is_file():
        raise RalmInputError(f"{path}: no such file")
    if fmt == CONTINUATION or (fmt == "auto" and path.suffix == ".jsonl" and _is_continuation_file(path)):
        examples = _continuation_examples(path)
    elif fmt == "jsonl" or (fmt == "auto" and path.suffix == ".jsonl"):
        examples = _jsonl_examples(path)
    else:
        data = _read_json(path)
        fmt = detect_format(path, data) if fmt == "auto" else fmt
        if fmt == "2wiki":
            examples = _twowiki_examples(path, data)
        elif fmt == "strategyqa":
            examples = _strategyqa_examples(path, data)
        elif fmt == "asqa":
            examples = _asqa_examples(path, data, split)
        else:
            examples = _dpr_examples(path, data)
    seen: set[str] = set()
    for ex in examples:
        if ex.id in seen:
            raise RalmInputError(f"{path}: duplicate example id '{ex.id}'")
        seen.add(ex.id)
    if not examples:
        raise RalmInputError(f"{path}: no examples")
    return examples[:limit] if limit else examples


def load_exemplars(path: str | Path | None) -> list[tuple[str, str]]:
    """Few-shot exemplars: JSONL of ``{"question", "answer"}`` (the full target output, reasoning
    included)."""
    if path is None:
        return []
    path = Path(path)
    if not path.is_file():
        raise RalmInputError(f"{path}: no such file")
    out = []
    for i, rec in _read_jsonl(path):
        where = _where(path, i, True)
        out.append((_text_field(rec, "question", where), _text_field(rec, "answer", where)))
    return out
