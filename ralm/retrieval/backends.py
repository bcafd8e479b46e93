"""The retrieval backends by name: the one table that turns a backend's name into its class.

``ralm index --backend``, ``build_index(backend=...)`` and the ``backend`` field of an index's
``ralm_index.json`` name a backend; `backend_class` gives the class that builds, opens and searches its
indexes (each satisfies ``ralm.retrieval.types.IndexBackend``). Every name is a string literal in this
module only, and nothing else compares a backend's name (tests/test_retrieval_backends.py). A class is
imported when its name is looked up, not before: each engine's library (bm25s, FAISS, Pyserini's JVM) loads
only for an index that uses it, and an engine's missing extra fails only there.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from ralm.errors import RalmInputError

if TYPE_CHECKING:
    from ralm.retrieval.types import IndexBackend

BM25S = "bm25s"
PYSERINI = "pyserini"
FAISS = "faiss"
PYSERINI_PREBUILT = "pyserini-prebuilt"

BUILT: dict[str, str] = {
    BM25S: "ralm.retrieval.bm25s_backend:Bm25sRetriever",
    PYSERINI: "ralm.retrieval.pyserini_backend:PyseriniRetriever",
    FAISS: "ralm.retrieval.faiss_backend:FaissRetriever",
}
"""The backends `build_index` builds from a passages file (``module:class``)."""
BACKENDS: dict[str, str] = {**BUILT, PYSERINI_PREBUILT: "ralm.retrieval.prebuilt:PrebuiltRetriever"}
"""Every backend an index folder may name: the built ones, and a prebuilt Lucene index that
``ralm index --prebuilt`` links rather than builds (``ralm.retrieval.prebuilt.link_prebuilt``)."""
DEFAULT = BM25S
"""The embedded engine: no Java, no extra."""

BuiltBackend = Literal[tuple(BUILT)]  # type: ignore[valid-type]
"""``ralm index --backend``'s choices, derived from the table so that it stays their one list."""


def backend_class(name: object, field: str, table: Mapping[str, str] = BACKENDS) -> type[IndexBackend]:
    """The class registered for `name` in `table`; an unknown name is an error that names `field` (the
    option or the metadata field that gave it)."""
    if not isinstance(name, str) or name not in table:
        raise RalmInputError(f"{field}: {name!r} is not one of {', '.join(table)}")
    module, _, cls = table[name].partition(":")
    return getattr(importlib.import_module(module), cls)
