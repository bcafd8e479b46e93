"""Make one shard's rows (retrieve candidates for its prefixes, score them, build the rows) and write every
shard a process runs (`score_shards`), from the run's settings resolved once
(`ralm.data_gen.options.GenerationSettings`).

Also the corpus/index agreement check: when own-document passages are excluded by ``doc_id``, the
training documents and the indexed passages must name documents the same way, or the exclusion silently
does nothing and the reranker learns to find the continuation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ralm.data_gen.candidates import retrieve_candidates
from ralm.data_gen.options import GenerationSettings
from ralm.data_gen.prefixes import PrefixSample, PrefixTokens, TokenizedCorpus, prefix_tokens
from ralm.data_gen.scoring import PassageTokens, make_row, score_prefix
from ralm.data_gen.shards import Shard, ShardStore
from ralm.errors import RalmInputError
from ralm.lm.interface import LanguageModel
from ralm.progress import progress as progress_bar
from ralm.retrieval.overlap import COPY_TOKENS, copies_span
from ralm.retrieval.passage_forms import CONTINUATION, continued, passage_store
from ralm.retrieval.types import Hit, Retriever

# Prefixes whose candidates are checked against their own document's text before the first shard.
_AGREEMENT_SAMPLE = 64


def _normalized(text: str) -> str:
    return " ".join(text.split())


def leaked_self_passages(
    doc_texts: list[str], doc_ids: list[str], candidates: list[list[Hit]]
) -> list[tuple[str, str]]:
    """(document id, passage id) for prefixes whose candidates include a copy of their own document's text
    filed under another ``doc_id``: the sign of an index built from these documents with other ids."""
    leaks = []
    for text, doc_id, hits in zip(doc_texts, doc_ids, candidates, strict=True):
        whole = _normalized(text)
        for hit in hits:
            body = _normalized(hit.contents.split("\n", 1)[-1])
            if hit.doc_id != doc_id and len(body.split()) >= 20 and body in whole:
                leaks.append((doc_id, hit.id))
                break
    return leaks


def check_corpus_matches_index(
    documents_path: str, doc_texts: list[str], doc_ids: list[str], candidates: list[list[Hit]]
) -> None:
    """Refuse when most checked prefixes retrieve their own text under a foreign ``doc_id``."""
    leaks = leaked_self_passages(doc_texts, doc_ids, candidates)
    if doc_ids and len(leaks) * 2 > len(doc_ids):
        doc_id, passage_id = leaks[0]
        raise RalmInputError(
            f"{documents_path}: documents and index disagree: "
            f"{len(leaks)} of {len(doc_ids)} checked prefixes "
            f"retrieve their own text under another doc_id (document {doc_id!r} in passage {passage_id!r}); "
            "build the index from these documents, or pass --allow-same-doc"
        )


def count_copies(
    corpus: TokenizedCorpus, doc: int, position: int, stride: int, passages: list[list[int]]
) -> int:
    """Candidates holding a ``COPY_TOKENS``-token run of the text that starts in the prefix's target."""
    text = corpus.tokens(doc)[position : position + stride + COPY_TOKENS - 1].tolist()
    return sum(copies_span(p, text, 0, stride) for p in passages)


def shard_rows(
    shard: Shard,
    sample: PrefixSample,
    corpus: TokenizedCorpus,
    retriever: Retriever,
    lm: LanguageModel,
    passages: PassageTokens,
    settings: GenerationSettings,
    on_prefix: Callable[[int], None] | None = None,
    check_documents: Callable[[list[int], list[list[Hit]]], None] | None = None,
) -> tuple[list[dict], dict]:
    """Rows of prefixes ``shard.start..shard.stop`` in prefix order, and counts (pairs, seconds, short)."""
    started = time.perf_counter()
    indices = list(range(shard.start, shard.stop))
    docs, positions = [int(sample.doc[i]) for i in indices], [int(sample.position[i]) for i in indices]
    tokens = [
        prefix_tokens(corpus, doc, position, settings.stride, settings.query_tokens, settings.input_length)
        for doc, position in zip(docs, positions, strict=True)
    ]
    candidates = _shard_candidates(retriever, lm, tokens, [corpus.doc_ids[doc] for doc in docs], settings)
    if check_documents is not None:
        check_documents(docs, candidates)
    rows, pairs, copies = [], 0, 0
    for i, doc, position, toks, hits in zip(indices, docs, positions, tokens, candidates, strict=True):
        passage_tokens = passages(hits)
        rows.append(_scored_row(lm, corpus, settings, i, doc, position, toks, hits, passage_tokens))
        copies += count_copies(corpus, doc, position, settings.stride, passage_tokens)
        pairs += len(hits)
        if on_prefix is not None:
            on_prefix(len(hits))
    counts = {
        "pairs": pairs,
        "seconds": time.perf_counter() - started,
        "short_candidate_lists": sum(len(h) < settings.k for h in candidates),
        "candidates_copying_target": copies,
    }
    return rows, counts


def _shard_candidates(
    retriever: Retriever,
    lm: LanguageModel,
    tokens: list[PrefixTokens],
    doc_ids: list[str],
    settings: GenerationSettings,
) -> list[list[Hit]]:
    """Each prefix's candidates: one batched search of the decoded queries (own document excluded unless
    --allow-same-doc), each handed on in the run's passage form."""
    queries = [lm.decode(t.query) for t in tokens]
    found = retrieve_candidates(
        retriever,
        queries,
        doc_ids,
        settings.k,
        settings.exclude_same_doc,
        settings.num_passages,
        settings.retrieval_threads,
    )
    if settings.passage_form != CONTINUATION:
        return found
    store, following = passage_store(retriever), {}
    return [continued(hits, query, store, following) for query, hits in zip(queries, found, strict=True)]


def _scored_row(
    lm: LanguageModel,
    corpus: TokenizedCorpus,
    settings: GenerationSettings,
    prefix_index: int,
    doc: int,
    position: int,
    tokens: PrefixTokens,
    hits: list[Hit],
    passage_tokens: list[list[int]],
) -> dict:
    """One prefix's row: the LM's log-probs of its targets after each candidate and after no passage."""
    scores = score_prefix(lm, tokens, passage_tokens, settings.scoring)
    return make_row(
        prefix_index=prefix_index,
        doc_id=corpus.doc_ids[doc],
        position=position,
        tokens=tokens,
        hits=hits,
        scores=scores,
        decode=lm.decode,
    )


@dataclass(frozen=True)
class ShardContext:
    """What every shard of one run is scored with, and where it is written."""

    documents: str
    """The training documents' path (named in the corpus/index agreement error)."""
    corpus: TokenizedCorpus
    sample: PrefixSample
    retriever: Retriever
    model: LanguageModel
    settings: GenerationSettings
    store: ShardStore
    config: dict
    """The run's recorded config (`ralm.data_gen.metadata.run_config`), written into every shard."""


def score_shards(ctx: ShardContext, todo: list[Shard], progress: bool) -> float:
    """Score and write each shard of `todo` (the first one checks the corpus against the index); pairs/s."""

    def check_documents(docs: list[int], hits: list[list[Hit]]) -> None:
        docs, hits = docs[:_AGREEMENT_SAMPLE], hits[:_AGREEMENT_SAMPLE]
        texts = [ctx.model.decode(ctx.corpus.tokens(d).tolist()) for d in docs]
        check_corpus_matches_index(ctx.documents, texts, [ctx.corpus.doc_ids[d] for d in docs], hits)

    token_cache = PassageTokens(ctx.model, ctx.settings.max_passage_tokens)
    total_pairs = sum(s.stop - s.start for s in todo) * ctx.settings.k
    bar = progress_bar(
        total_pairs, unit="pair", desc="score candidates", disable=not progress, smoothing=0.05
    )
    pairs, seconds = 0, 0.0
    for n, shard in enumerate(todo):
        first_check = check_documents if n == 0 and ctx.settings.exclude_same_doc else None
        rows, counts = shard_rows(
            shard,
            ctx.sample,
            ctx.corpus,
            ctx.retriever,
            ctx.model,
            token_cache,
            ctx.settings,
            on_prefix=bar.update,
            check_documents=first_check,
        )
        ctx.store.write(shard, rows, {"config": ctx.config, **counts})
        pairs, seconds = pairs + counts["pairs"], seconds + counts["seconds"]
    bar.total = bar.n  # short candidate lists make fewer pairs than planned
    bar.close()
    return pairs / seconds if seconds else float("nan")
