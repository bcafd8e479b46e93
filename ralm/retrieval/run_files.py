"""Queries in, retrieval runs out (docs/formats.md section 3).

Queries are TSV (``qid<TAB>query``) or JSONL (``{"qid" or "id", "query" or "text"}``). A run is written twice:
a TREC run file (``qid Q0 docid rank score tag``, what trec_eval and Pyserini read) and JSONL with the
passage texts, one line per query.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ralm.atomic_files import publish_file
from ralm.errors import RalmInputError
from ralm.jsonl import JsonlLog, decoded_lines, parse_json_object
from ralm.retrieval.types import Hit


def _query_from_json(line: str, path: Path, lineno: int) -> tuple[str, str]:
    obj = parse_json_object(line, path, lineno)
    where = f"{path}:{lineno}"
    qid = obj.get("qid", obj.get("id"))
    text = obj.get("query", obj.get("text"))
    if qid is None:
        raise RalmInputError(f"{where}: missing field 'qid' (or 'id')")
    if not isinstance(text, str):
        raise RalmInputError(f"{where}: missing field 'query' (or 'text')")
    return str(qid), text


def read_queries(path: str | os.PathLike) -> list[tuple[str, str]]:
    """(qid, query) pairs in file order; the format follows the suffix (.jsonl/.json, else TSV)."""
    path = Path(path)
    if not path.is_file():
        raise RalmInputError(f"{path}: no such queries file")
    is_json = path.suffix in (".jsonl", ".json")
    out: list[tuple[str, str]] = []
    first: dict[str, int] = {}
    for lineno, line in decoded_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if is_json:
            qid, text = _query_from_json(line, path, lineno)
        else:
            if "\t" not in line:
                raise RalmInputError(f"{where}: expected 'qid<TAB>query'")
            qid, text = line.split("\t", 1)
        if qid in first:
            raise RalmInputError(f"{where}: duplicate qid {qid!r} (first on line {first[qid]})")
        first[qid] = lineno
        out.append((qid, text))
    if not out:
        raise RalmInputError(f"{path}: empty input (no queries)")
    return out


def trec_lines(qid: str, hits: Sequence[Hit], tag: str) -> list[str]:
    """TREC run lines for one query: ``qid Q0 docid rank score tag``, rank from 1."""
    # trec_eval splits lines on whitespace: a space inside any field shifts every field after it.
    for field, value in (("qid", qid), ("tag", tag), *(("passage id", h.id) for h in hits)):
        if not value or any(c.isspace() for c in value):
            hint = (
                " (pass --tag without spaces)"
                if field == "tag"
                else " (rename the documents: ids become passage ids)"
            )
            raise RalmInputError(
                f"{field} {value!r}: a TREC run file field cannot be empty or hold whitespace{hint}"
            )
    return [f"{qid} Q0 {h.id} {rank} {h.score:.6f} {tag}" for rank, h in enumerate(hits, start=1)]


def hit_record(hit: Hit) -> dict:
    return {
        "id": hit.id,
        "score": hit.score,
        "title": hit.title,
        "doc_id": hit.doc_id,
        "contents": hit.contents,
    }


class RunWriter:
    """Writes the TREC run and the JSONL run together under ``.NAME.partial`` names, renamed on `close()`.

    Resumable: the JSONL partial is a ``JsonlLog``; a new writer keeps its complete records of the same
    queries in the same order (`done` of them), rewrites the TREC partial from those records, and appends
    after them. Records reach the log (synced) at each `flush()`, so a kill loses at most one batch.
    """

    def __init__(
        self,
        trec_path: str | os.PathLike,
        jsonl_path: str | os.PathLike,
        tag: str = "ralm",
        expected_qids: Sequence[str] = (),
    ) -> None:
        self.tag = tag
        self._final = [Path(trec_path), Path(jsonl_path)]
        self._tmp = [p.with_name(f".{p.name}.partial") for p in self._final]
        for p in self._final:
            p.parent.mkdir(parents=True, exist_ok=True)
        expected = list(expected_qids)
        self._log = JsonlLog(
            self._tmp[1],
            lambda record: record["qid"],
            accept=lambda position, record: (
                position < len(expected) and record.get("qid") == expected[position]
            ),
        )
        self.done = len(self._log.records)
        self._pending: list[dict] = []
        self._trec = open(self._tmp[0], "w", encoding="utf-8")
        for record in self._log.records.values():  # the TREC lines of the records that survived
            self._write_trec(record)
        if self.done:
            print(f"retrieve: resuming after {self.done} queries already in {self._tmp[1]}", file=sys.stderr)

    def _write_trec(self, record: dict) -> None:
        hits = [Hit(h["id"], h["score"], h["contents"], h["title"], h["doc_id"]) for h in record["hits"]]
        for line in trec_lines(record["qid"], hits, self.tag):
            self._trec.write(line + "\n")

    def add(self, qid: str, query: str, hits: Sequence[Hit]) -> None:
        record = {"qid": qid, "query": query, "hits": [hit_record(h) for h in hits]}
        self._write_trec(record)
        self._pending.append(record)

    def flush(self) -> None:
        self._trec.flush()
        if self._pending:
            self._log.append(self._pending)
            self._pending = []

    def close(self, ok: bool = True) -> None:
        """Publish both files if `ok`; otherwise keep the partial files for a resumed run (with every
        query added so far: each is a whole record)."""
        self.flush()
        self._trec.close()
        if ok:
            for tmp, final in zip(self._tmp, self._final, strict=True):
                publish_file(tmp, final)


def read_trec_run(path: str | os.PathLike) -> dict[str, list[tuple[str, float]]]:
    """qid -> [(docid, score)] in rank order, from a TREC run file."""
    runs: dict[str, list[tuple[int, str, float]]] = {}
    for lineno, line in decoded_lines(Path(path)):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise RalmInputError(f"{path}:{lineno}: expected 6 fields 'qid Q0 docid rank score tag'")
        qid, _, docid, rank, score, _ = fields
        runs.setdefault(qid, []).append((int(rank), docid, float(score)))
    return {q: [(d, s) for _, d, s in sorted(rows)] for q, rows in runs.items()}
