"""The retrieval option group every retrieving stage shares (`RetrievalOptions`): the index, its passages,
how many candidates a query fetches and with how many threads.

`ralm data-gen`, `ralm eval ppl`, `ralm eval qa`, `ralm eval flare` and `ralm run` take this one group, so
``--index``, ``--passages``, ``--k`` and ``--threads`` mean the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ralm.config_types import PositiveInt, check_fields
from ralm.errors import RalmInputError

if TYPE_CHECKING:
    from ralm.retrieval.types import Retriever


@dataclass
class RetrievalOptions:
    """Where candidates come from: an index built by `ralm index`, and how many per query."""

    index: str | None = None
    """Index folder built by `ralm index` from the retrieval corpus."""
    passages: str | None = None
    """The index's passages file, checked against the index (a stale or foreign index is an error); default:
    the one recorded when the index was built."""
    k: PositiveInt = 16
    """Candidates retrieved per query (BM25's top k; the paper reranks the top 16)."""
    threads: PositiveInt = 1
    """Threads for batched search."""

    def __post_init__(self) -> None:
        check_fields(self)

    def require(self, why: str = "") -> str:
        """The index folder; a command that needs one and got none fails naming the option."""
        if not self.index:
            raise RalmInputError(f"--index: required{' ' + why if why else ''}")
        return self.index

    def open(self, why: str = "") -> Retriever:
        """The index, checked against its passages file (and not empty)."""
        from ralm.retrieval.index import open_index

        index = self.require(why)
        return open_index(index, self.passages) if self.passages else open_index(index)
