"""Random access to the passages of a JSONL file by row number, without loading the corpus into memory.

An index folder keeps the byte offset of every line (``passage_offsets.npy``) and the ids in file order
(``passage_ids.txt``); hits are read back from the memory-mapped passages file. This keeps opening a
million-passage index cheap and lets every backend return full passages (contents, title, doc_id).
"""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path

import numpy as np

from ralm.errors import RalmInputError
from ralm.retrieval.index_meta import META_NAME, check_passages
from ralm.retrieval.types import Hit, Passage

OFFSETS_NAME = "passage_offsets.npy"
IDS_NAME = "passage_ids.txt"


def line_offsets(path: Path) -> np.ndarray:
    """Start offset of each non-blank line, plus the file size at the end (shape: lines + 1)."""
    offsets = []
    with open(path, "rb") as f:
        pos = 0
        for raw in f:
            if raw.strip():
                offsets.append(pos)
            pos += len(raw)
    offsets.append(pos)
    return np.asarray(offsets, dtype=np.int64)


def save_store(index_dir: Path, passages_path: Path, ids: list[str]) -> None:
    """Write the offsets and ids that `PassageStore` needs into a (partial) index folder."""
    offsets = line_offsets(passages_path)
    if len(offsets) - 1 != len(ids):
        raise RalmInputError(f"{passages_path}: {len(offsets) - 1} lines but {len(ids)} passages")
    np.save(index_dir / OFFSETS_NAME, offsets)
    (index_dir / IDS_NAME).write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


class PassageStore:
    """Passages of one JSONL file by row number or id; rows follow the file's line order."""

    def __init__(self, index_dir: Path, passages_path: Path) -> None:
        self.offsets = np.load(Path(index_dir) / OFFSETS_NAME, mmap_mode="r")
        self._ids_path = Path(index_dir) / IDS_NAME
        self._row_of: dict[str, int] | None = None
        self._file = open(passages_path, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def passage(self, row: int) -> Passage:
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        obj = json.loads(self._map[start:end])
        pid = str(obj["id"])
        contents = obj["contents"]
        title = obj.get("title", contents.split("\n", 1)[0])
        return Passage(pid, contents, str(title), str(obj.get("doc_id", pid.rsplit("-", 1)[0])))

    def row(self, passage_id: str) -> int:
        """Row of a passage id (the id list is read on first use; Lucene returns ids, not rows)."""
        if self._row_of is None:
            ids = self._ids_path.read_text(encoding="utf-8").split("\n")[:-1]
            self._row_of = {pid: i for i, pid in enumerate(ids)}
        return self._row_of[passage_id]

    def hit(self, row: int, score: float) -> Hit:
        p = self.passage(row)
        return Hit(id=p.id, score=float(score), contents=p.contents, title=p.title, doc_id=p.doc_id)

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        self._file.close()


def open_store(index_dir: Path, meta: dict, passages_path: str | os.PathLike | None) -> PassageStore:
    """The passages an index reads its hits from: the file (default: the one recorded at build time) must
    have the sha256 and the passage count that ``ralm_index.json`` records, or the index is stale or
    foreign."""
    store = PassageStore(index_dir, check_passages(meta, index_dir, passages_path))
    if len(store) != meta["num_passages"]:
        raise RalmInputError(
            f"{index_dir}/{META_NAME}: num_passages {meta['num_passages']} but {len(store)} rows"
        )
    return store
