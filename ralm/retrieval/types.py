"""Records shared by every retrieval backend and by the stages that consume retrieval results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Passage:
    """One line of a passages JSONL file (DESIGN.md, "Passages").

    ``contents`` is ``"title\\ntext"`` (what Pyserini's JsonCollection reads); ``id`` is ``{doc_id}-{n}``.
    """

    id: str
    contents: str
    title: str
    doc_id: str

    @property
    def text(self) -> str:
        """The passage body without its title line."""
        return self.contents.split("\n", 1)[1] if "\n" in self.contents else self.contents


@dataclass(frozen=True)
class Hit:
    """One retrieved passage for one query, best first within a query's list."""

    id: str
    score: float
    contents: str
    title: str
    doc_id: str


class Retriever(Protocol):
    """What every backend (bm25s, pyserini, faiss) offers once its index is opened."""

    index_dir: str
    meta: dict
    """The index's ``ralm_index.json`` (backend, analyzer settings, passage count, passages hash)."""

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        """Top-`k` hits for each query, in query order, each list sorted by descending score."""
        ...
