"""BM25 candidates for many prefixes, excluding passages of the prefix's own document by default.

At test time the evaluated document is never in the retrieval corpus; training data whose best passage
is the document's own continuation would teach the reranker to look for it (DESIGN.md). So we fetch more
than k, drop hits whose ``doc_id`` is the prefix's, and fetch deeper for the few queries still short.
"""

from __future__ import annotations

from collections.abc import Sequence

from ralm.retrieval.types import Hit, Retriever


def keep_candidates(hits: Sequence[Hit], source_doc_id: str, k: int, exclude_same_doc: bool) -> list[Hit]:
    """The first `k` hits in BM25 order, skipping the source document's passages when excluding."""
    kept = [h for h in hits if not (exclude_same_doc and h.doc_id == source_doc_id)]
    return kept[:k]


def retrieve_candidates(
    retriever: Retriever,
    queries: Sequence[str],
    source_doc_ids: Sequence[str],
    k: int,
    exclude_same_doc: bool,
    num_passages: int,
    threads: int = 1,
) -> list[list[Hit]]:
    """Top-`k` hits per query after exclusion, in BM25 order; fewer when fewer passages share a term with
    the query (BM25 returns no zero-score hits), none when no passage does.

    The first fetch asks for 2k + 8 hits (a 100-word passage corpus rarely has more than a few passages of
    one document in a query's top ranks); queries left with fewer than k are searched again with double
    the depth until they have k or the depth reaches the corpus size.
    """
    if not exclude_same_doc:
        depth = min(k, num_passages)
        return [list(hits[:k]) for hits in retriever.search(list(queries), depth, threads=threads)]
    depth = min(2 * k + 8, num_passages)
    raw = retriever.search(list(queries), depth, threads=threads)
    results = [keep_candidates(h, d, k, True) for h, d in zip(raw, source_doc_ids, strict=True)]
    # A query whose search returned fewer hits than asked for has no more passages sharing a term with it:
    # searching deeper would only return the same list, so only the others are retried.
    short = [i for i, r in enumerate(results) if len(r) < k and len(raw[i]) >= depth]
    while short and depth < num_passages:
        depth = min(2 * depth, num_passages)
        deeper = retriever.search([queries[i] for i in short], depth, threads=threads)
        for i, hits in zip(short, deeper, strict=True):
            results[i] = keep_candidates(hits, source_doc_ids[i], k, True)
        short = [
            i for i, hits in zip(short, deeper, strict=True) if len(results[i]) < k and len(hits) >= depth
        ]
    return results
