"""Queries in, retrieval runs out (docs/formats.md section 3).

Queries are TSV (``qid<TAB>query``) or JSONL (``{"qid" or "id", "query" or "text"}``). A run is written twice:
a TREC run file (``qid Q0 docid rank score tag``, what trec_eval and Pyserini read) and JSONL with the
passage texts, one line per query.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ralm.errors import RalmInputError
from ralm.records import parse_json_object
from ralm.retrieval.types import Hit


def _decoded_lines(path: Path):
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                yield lineno, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise RalmInputError(
                    f"{path}:{lineno}: not UTF-8 ({err.reason} at byte {err.start})"
                ) from None


def _query_from_json(line: str, where: str) -> tuple[str, str]:
    obj = parse_json_object(line, where)
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
    for lineno, line in _decoded_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if is_json:
            qid, text = _query_from_json(line, where)
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

    Resumable: a killed run leaves its partial files; a new writer keeps every complete JSONL record of the
    same queries (`done` of them), rewrites the TREC partial from those records, and appends after them.
    """

    def __init__(self, trec_path: str | os.PathLike, jsonl_path: str | os.PathLike, tag: str = "ralm",
                 expected_qids: Sequence[str] = ()) -> None:  # fmt: skip
        self.tag = tag
        self._final = [Path(trec_path), Path(jsonl_path)]
        self._tmp = [p.with_name(f".{p.name}.partial") for p in self._final]
        for p in self._final:
            p.parent.mkdir(parents=True, exist_ok=True)
        records = self._complete_records(self._tmp[1], expected_qids)
        self.done = len(records)
        self._trec = open(self._tmp[0], "w", encoding="utf-8")
        self._jsonl = open(self._tmp[1], "w", encoding="utf-8")
        for r in records:  # rewrite both from the records that survived, then append
            self._write(r)
        if self.done:
            print(f"retrieve: resuming after {self.done} queries already in {self._tmp[1]}", file=sys.stderr)

    @staticmethod
    def _complete_records(partial: Path, expected_qids: Sequence[str]) -> list[dict]:
        """Records of an earlier run of the same queries, in order, up to the first incomplete line."""
        if not partial.is_file():
            return []
        records = []
        with open(partial, encoding="utf-8", errors="replace") as f:
            for line, qid in zip(f, expected_qids, strict=False):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break  # the line being written when the run was killed
                if not line.endswith("\n") or record.get("qid") != qid:
                    break
                records.append(record)
        return records

    def _write(self, record: dict) -> None:
        hits = [Hit(h["id"], h["score"], h["contents"], h["title"], h["doc_id"]) for h in record["hits"]]
        for line in trec_lines(record["qid"], hits, self.tag):
            self._trec.write(line + "\n")
        self._jsonl.write(json.dumps(record, ensure_ascii=False) + "\n")

    def add(self, qid: str, query: str, hits: Sequence[Hit]) -> None:
        self._write({"qid": qid, "query": query, "hits": [hit_record(h) for h in hits]})

    def flush(self) -> None:
        self._trec.flush()
        self._jsonl.flush()

    def close(self, ok: bool = True) -> None:
        """Publish both files if `ok`; otherwise keep the partial files for a resumed run."""
        self._trec.close()
        self._jsonl.close()
        if ok:
            for tmp, final in zip(self._tmp, self._final, strict=True):
                os.replace(tmp, final)


def read_trec_run(path: str | os.PathLike) -> dict[str, list[tuple[str, float]]]:
    """qid -> [(docid, score)] in rank order, from a TREC run file."""
    runs: dict[str, list[tuple[int, str, float]]] = {}
    for lineno, line in _decoded_lines(Path(path)):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise RalmInputError(f"{path}:{lineno}: expected 6 fields 'qid Q0 docid rank score tag'")
        qid, _, docid, rank, score, _ = fields
        runs.setdefault(qid, []).append((int(rank), docid, float(score)))
    return {q: [(d, s) for _, d, s in sorted(rows)] for q, rows in runs.items()}
