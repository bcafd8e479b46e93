"""Records shared by every retrieval backend and by the stages that consume retrieval results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, Self


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


class IndexBackend(Retriever, Protocol):
    """A retrieval engine: how its index is built into a folder, opened again, and searched.

    Each backend is one class, registered by name in ``ralm.retrieval.backends``; ``ralm.retrieval.index``
    checks the options, the passages and the folder around these methods, and writes ``ralm_index.json``.
    An opened index is an instance (the `Retriever`).
    """

    build_options: ClassVar[frozenset[str]]
    """The options `build` takes (their Python names), checked before the passages are read."""
    recorded_as: ClassVar[Mapping[str, str]]
    """Build options that ``ralm_index.json`` records under another key than their name (the file's keys
    never change; an index's identity is made of them)."""
    open_options: ClassVar[frozenset[str]]
    """The options `open` takes (a dense index: ``device``)."""

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        out_dir: Path,
        *,
        passages_path: Path,
        passages_sha256: str,
        **options,
    ) -> dict:
        """Write the engine's files into `out_dir` (the index folder being built); returns its settings for
        ``ralm_index.json``."""
        ...

    @classmethod
    def resumable(cls, out_dir: Path) -> bool:
        """Whether a failed build left work in `out_dir` that the next build resumes from (then the folder
        is kept, not removed)."""
        ...

    @classmethod
    def open(cls, index_dir: Path, meta: dict, passages_path: Path | None = None, **options) -> Self:
        """The index in `index_dir` (`meta`: its ``ralm_index.json``), reading hits from `passages_path`
        (default: the file it was built from) where the engine does not store them."""
        ...
