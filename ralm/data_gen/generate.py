"""Make one shard's rows: retrieve candidates for its prefixes, score them, and build the rows.

Also the corpus/index agreement check: when own-document passages are excluded by ``doc_id``, the
training documents and the indexed passages must name documents the same way, or the exclusion silently
does nothing and the reranker learns to find the continuation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ralm.data_gen.candidates import retrieve_candidates
from ralm.data_gen.prefixes import PrefixSample, TokenizedCorpus, prefix_tokens
from ralm.data_gen.scoring import PassageTokens, make_row, score_prefix
from ralm.data_gen.shards import Shard
from ralm.errors import RalmInputError
from ralm.retrieval.overlap import COPY_TOKENS, copies_span
from ralm.retrieval.types import Hit, Retriever


@dataclass(frozen=True)
class GenerationSettings:
    """One run's resolved settings, built once from the options, the LM and the sample: every later use
    (the rows, the progress total, ``config`` in the metadata and in every shard) reads them from here."""

    stride: int
    query_tokens: int
    k: int
    min_prefix_tokens: int
    """The effective floor: max(ℓ, --min-prefix-tokens)."""
    max_length: int
    """After capping at the LM's context."""
    max_passage_tokens: int
    seed: int
    num_prefixes: int
    num_examples: int
    num_shards: int
    exclude_same_doc: bool
    num_passages: int
    retrieval_threads: int = 1

    def recorded(self) -> dict:
        """The fields that decide the rows, as `ralm.data_gen.metadata.run_config` takes them (the index's
        size and the search threads change no row)."""
        fields = asdict(self)
        del fields["num_passages"], fields["retrieval_threads"]
        return fields


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
            f"{documents_path}: documents and index disagree: {len(leaks)} of {len(doc_ids)} checked prefixes "
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
    lm,
    passages: PassageTokens,
    settings: GenerationSettings,
    on_prefix: Callable[[int], None] | None = None,
    check_documents: Callable[[list[int], list[list[Hit]]], None] | None = None,
) -> tuple[list[dict], dict]:
    """Rows of prefixes ``shard.start..shard.stop`` in prefix order, and counts (pairs, seconds, short)."""
    started = time.perf_counter()
    indices = list(range(shard.start, shard.stop))
    tokens = [
        prefix_tokens(
            corpus,
            int(sample.doc[i]),
            int(sample.position[i]),
            settings.stride,
            settings.query_tokens,
            settings.max_length,
        )
        for i in indices
    ]
    doc_ids = [corpus.doc_ids[int(sample.doc[i])] for i in indices]
    queries = [lm.decode(t.query) for t in tokens]
    candidates = retrieve_candidates(
        retriever,
        queries,
        doc_ids,
        settings.k,
        settings.exclude_same_doc,
        settings.num_passages,
        settings.retrieval_threads,
    )
    if check_documents is not None:
        check_documents([int(sample.doc[i]) for i in indices], candidates)
    rows, pairs, copies = [], 0, 0
    for i, toks, doc_id, hits in zip(indices, tokens, doc_ids, candidates, strict=True):
        passage_tokens = passages(hits)
        cand, none = score_prefix(
            lm,
            toks,
            passage_tokens,
            max_length=settings.max_length,
            max_passage_tokens=settings.max_passage_tokens,
        )
        copies += count_copies(
            corpus, int(sample.doc[i]), int(sample.position[i]), settings.stride, passage_tokens
        )
        row = make_row(
            prefix_index=i,
            doc_id=doc_id,
            position=int(sample.position[i]),
            tokens=toks,
            hits=hits,
            candidate_token_logprobs=cand,
            no_retrieval_token_logprobs=none,
            decode=lm.decode,
        )
        rows.append(row)
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
