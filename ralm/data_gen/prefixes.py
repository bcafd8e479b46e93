"""Tokenize the training documents once and sample prefixes uniformly over stride boundaries.

A *boundary* of a document with ``N`` tokens is a token offset ``p`` (the first target token) with
``p % s == 0``, ``p >= max(ℓ, min_prefix_tokens)`` (the query is the last ℓ prefix tokens, so a prefix
never starts inside the first ℓ tokens) and ``p + s <= N`` (the whole target fits). Sampling is uniform
over the boundaries of all documents together, so a document is drawn in proportion to its length.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ralm.progress import track


@dataclass(frozen=True)
class TokenizedCorpus:
    """All documents' token ids concatenated; document ``i`` is ``token_ids[offsets[i]:offsets[i+1]]``."""

    doc_ids: list[str]
    token_ids: np.ndarray  # int32, (total_tokens,)
    offsets: np.ndarray  # int64, (num_docs + 1,)
    texts_sha256: str
    """Hash of the documents as read (id and text), independent of the file format they came in."""

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def tokens(self, doc: int) -> np.ndarray:
        return self.token_ids[self.offsets[doc] : self.offsets[doc + 1]]


def tokenize_documents(
    documents: Iterable[dict],
    encode_batch: Callable[[list[str]], list[list[int]]],
    batch_size: int = 256,
    progress: bool = True,
) -> TokenizedCorpus:
    """Tokenize every document's ``text`` once (no special tokens); prefixes and targets are slices of it.

    Tokenizing the whole document and slicing, rather than tokenizing prefix and target separately,
    is what the LM sees at evaluation time too (the eval stage tokenizes each document once).
    """
    digest = hashlib.sha256()
    doc_ids: list[str] = []
    chunks: list[np.ndarray] = []
    lengths: list[int] = []
    batch: list[str] = []

    def flush() -> None:
        for ids in encode_batch(batch):
            chunks.append(np.asarray(ids, dtype=np.int32))
            lengths.append(len(ids))
        batch.clear()

    for doc in track(documents, desc="tokenize documents", unit="doc", disable=not progress):
        doc_id, text = str(doc["id"]), doc["text"]
        digest.update(doc_id.encode() + b"\0" + text.encode() + b"\0")
        doc_ids.append(doc_id)
        batch.append(text)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    token_ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
    return TokenizedCorpus(doc_ids, token_ids, offsets, digest.hexdigest())


def first_boundary(stride: int, min_prefix_tokens: int) -> int:
    """The smallest multiple of `stride` that is at least `min_prefix_tokens` (and at least one stride)."""
    return max(stride, -(-min_prefix_tokens // stride) * stride)


def boundary_counts(lengths: np.ndarray, stride: int, min_prefix_tokens: int) -> np.ndarray:
    """Number of valid boundaries per document (0 for documents too short for one prefix + target)."""
    first = first_boundary(stride, min_prefix_tokens)
    last_allowed = np.asarray(lengths, dtype=np.int64) - stride  # p + s <= N
    return np.where(last_allowed >= first, (last_allowed - first) // stride + 1, 0)


@dataclass(frozen=True)
class PrefixSample:
    """The seeded sample, in sample order: prefix ``i`` is document ``doc[i]`` cut at token
    ``position[i]``."""

    doc: np.ndarray  # int64 document indices
    position: np.ndarray  # int64 offsets of the first target token
    available: int  # boundaries in the whole corpus
    skipped_docs: int  # documents with no boundary (shorter than the first boundary + s tokens)


def sample_prefixes(
    lengths: np.ndarray, stride: int, min_prefix_tokens: int, num_prefixes: int, seed: int
) -> PrefixSample:
    """Draw `num_prefixes` distinct boundaries uniformly (all of them if fewer exist), deterministic for a
    seed."""
    counts = boundary_counts(lengths, stride, min_prefix_tokens)
    available = int(counts.sum())
    n = min(num_prefixes, available)
    # Flat boundary index -> (document, k-th boundary in it); `choice` without replacement keeps its
    # random order, so a --limit of the sample is itself a uniform sample.
    flat = (
        np.random.default_rng(seed).choice(available, size=n, replace=False) if n else np.zeros(0, np.int64)
    )
    starts = np.concatenate([[0], np.cumsum(counts)])
    doc = np.searchsorted(starts, flat, side="right") - 1
    position = first_boundary(stride, min_prefix_tokens) + stride * (flat - starts[doc])
    return PrefixSample(doc.astype(np.int64), position.astype(np.int64), available, int((counts == 0).sum()))


@dataclass(frozen=True)
class PrefixTokens:
    """Token slices of one sampled prefix, as the scorer and the retriever need them."""

    prefix: list[int]  # the last (input_length - s) tokens before the target: all the LM can condition on
    target: list[int]  # the next s tokens
    query: list[int]  # the last ℓ prefix tokens


def prefix_tokens(
    corpus: TokenizedCorpus, doc: int, position: int, stride: int, query_tokens: int, input_length: int
) -> PrefixTokens:
    """Slice document `doc` at `position` (the first target token)."""
    tokens = corpus.tokens(doc)
    keep = input_length - stride  # compose() drops prefix tokens from the start beyond this anyway
    return PrefixTokens(
        prefix=tokens[max(0, position - keep) : position].tolist(),
        target=tokens[position : position + stride].tolist(),
        query=tokens[position - query_tokens : position].tolist(),
    )
