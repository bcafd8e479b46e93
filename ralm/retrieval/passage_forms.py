"""What a retrieved passage hands the LM (``--passage-form`` of `ralm eval ppl`, `ralm data-gen`, `ralm run`).

- ``retrieved``: the passage as it was indexed (the paper's).
- ``continuation``: the passage from its sentence that best matches the query, continued into the next
  passage of the same document, then cut as any passage is (``--max-passage-tokens``). RETRO gives its LM a
  neighbour *and its continuation* (Borgeaud et al. 2022): on a retold text the passage that matches what
  was just said holds, after the match, the parallel of what comes next, and non-overlapping passages cut
  a match off from whatever follows it.

The best-matching sentence is the one sharing the most distinct words with the query (lower-cased runs of
letters and digits; the earliest on a tie); a passage's first line is its title and stays first. The
continuation's id is ``ID@S`` (S: the first sentence kept), so two windows that start one passage at
different sentences get different texts and ids (``windows.jsonl``'s ``passage_id``).

The next passage is the next row of the passages file when it names the same document: `ralm passages`
writes a document's passages in order. With overlapping passages (``--passage-stride`` below
``--passage-words``) it repeats the overlap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from ralm.errors import RalmInputError
from ralm.retrieval.types import Hit

if TYPE_CHECKING:  # the store (numpy) only where a continuation is made: the stage records import this
    from ralm.retrieval.passage_store import PassageStore

PassageForm = Literal["retrieved", "continuation"]
"""What a retrieved passage hands the LM: itself, or its continuation from the sentence that best matches
the query into the next passage of its document."""

RETRIEVED, CONTINUATION = "retrieved", "continuation"

# Whitespace after a sentence end and up to two closing quotes or brackets (a lookbehind has one width).
_CLOSING = "[\"'”’)\\]]"
_SENTENCE_END = re.compile(rf"(?:(?<=[.!?])|(?<=[.!?]{_CLOSING})|(?<=[.!?]{_CLOSING}{_CLOSING}))\s+")
_WORD = re.compile(r"[^\W_]+")


def sentences(text: str) -> list[str]:
    """`text` cut after each ``.``, ``!`` or ``?`` (with any closing quotes or brackets) that whitespace
    follows; nothing is lost but that whitespace."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def best_sentence(body: str, query: str) -> int:
    """The index of the sentence of `body` sharing the most distinct words with `query` (the first on a
    tie)."""
    wanted = _words(query)
    overlaps = [len(_words(s) & wanted) for s in sentences(body)]
    return max(range(len(overlaps)), key=lambda i: (overlaps[i], -i)) if overlaps else 0


def _title_and_body(contents: str) -> tuple[str, str]:
    title, newline, body = contents.partition("\n")
    return (title, body) if newline else ("", contents)


def continuation(hit: Hit, following: str | None, query: str) -> Hit:
    """`hit` from its sentence that best matches `query`, followed by the body of `following` (the next
    passage of its document, None when it is the last)."""
    title, body = _title_and_body(hit.contents)
    start = best_sentence(body, query)
    kept = " ".join(sentences(body)[start:])
    if following is not None:
        kept = f"{kept} {_title_and_body(following)[1].strip()}".strip()
    contents = f"{title}\n{kept}" if title else kept
    return replace(hit, id=f"{hit.id}@{start}", contents=contents)


def next_passage(store: PassageStore, hit: Hit) -> str | None:
    """The contents of the passage after `hit` in its passages file, when it belongs to the same document."""
    row = store.row(hit.id) + 1
    if row >= len(store):
        return None
    after = store.passage(row)
    return after.contents if after.doc_id == hit.doc_id else None


def passage_store(retriever) -> PassageStore:
    """The passages file of an index opened from a folder (every local backend reads its hits from one)."""
    from ralm.retrieval.passage_store import PassageStore

    store = getattr(retriever, "store", None)
    if not isinstance(store, PassageStore):
        raise RalmInputError(
            "--passage-form continuation: this index has no passages file to read the next passage from "
            "(build one with ralm index)"
        )
    return store


def continued(
    hits: Sequence[Hit], query: str, store: PassageStore, following: dict[str, str | None]
) -> list[Hit]:
    """`hits` as continuations for `query`; `following` caches each passage's successor by id (shared
    across calls, so a passage many queries retrieve is read once)."""
    for hit in hits:
        if hit.id not in following:
            following[hit.id] = next_passage(store, hit)
    return [continuation(hit, following[hit.id], query) for hit in hits]


def continuation_hits(
    hits_by_query: Mapping[str, Sequence[Hit]], store: PassageStore, k: int
) -> dict[str, list[Hit]]:
    """Every query's top-k hits as continuations (each passage's successor read once)."""
    following: dict[str, str | None] = {}
    return {query: continued(hits[:k], query, store, following) for query, hits in hits_by_query.items()}
