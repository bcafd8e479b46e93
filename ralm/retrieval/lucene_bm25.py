"""Lucene's BM25 as a sparse (term x passage) score matrix, for bm25s to store and search.

Why not bm25s's own scorer: Lucene does not score with a passage's exact length. It stores each length in
one byte (``SmallFloat.intToByte4``: exact up to 39, then 4 significant bits) and scores with the decoded
value, while the average length stays exact. Two passages whose lengths differ by one word can therefore
score the same in Lucene but not in bm25s; on 100-word passages this alone moves ~1-2% of top-16 results.
Scoring with the decoded lengths makes bm25s rank like Pyserini.

Score of passage d for query term t (Lucene >= 8 BM25Similarity, which drops the constant (k1 + 1)):
``idf(t) * tf / (tf + k1 * (1 - b + b * len(d) / avgdl))`` with ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# SmallFloat: byte values below NUM_FREE_VALUES are lengths as is; the rest hold a 4-bit float
# (3 explicit mantissa bits + an implicit leading one, and a shift) of (length - NUM_FREE_VALUES).
_MAX_INT4 = 231  # longToInt4(Integer.MAX_VALUE)
NUM_FREE_VALUES = 255 - _MAX_INT4  # = 24


def _long_to_int4(value: np.ndarray) -> np.ndarray:
    value = value.astype(np.int64)
    num_bits = np.frexp(value.astype(np.float64))[1].astype(np.int64)  # bit length (exact below 2**53)
    shift = np.maximum(num_bits - 4, 0)
    normal = num_bits >= 4
    encoded = ((value >> shift) & 0x07) | ((shift + 1) << 3)
    return np.where(normal, encoded, value)


def _int4_to_long(encoded: np.ndarray) -> np.ndarray:
    bits = encoded & 0x07
    shift = (encoded >> 3) - 1
    return np.where(shift == -1, bits, (bits | 0x08) << np.maximum(shift, 0))


def length_to_byte(lengths: np.ndarray) -> np.ndarray:
    """Lucene's ``SmallFloat.intToByte4`` (unsigned byte value 0..255) for non-negative lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.where(
        lengths < NUM_FREE_VALUES, lengths, NUM_FREE_VALUES + _long_to_int4(lengths - NUM_FREE_VALUES)
    )


def byte_to_length(encoded: np.ndarray) -> np.ndarray:
    """Lucene's ``SmallFloat.byte4ToInt``: the length BM25 actually scores with."""
    encoded = np.asarray(encoded, dtype=np.int64)
    return np.where(
        encoded < NUM_FREE_VALUES, encoded, NUM_FREE_VALUES + _int4_to_long(encoded - NUM_FREE_VALUES)
    )


def lucene_length(lengths: np.ndarray) -> np.ndarray:
    """Exact lengths -> the lossy lengths Lucene scores with (rounded down to 4 significant bits)."""
    return byte_to_length(length_to_byte(lengths))


def lucene_bm25_matrix(
    corpus_term_ids: Sequence[Sequence[int]], num_terms: int, k1: float = 0.9, b: float = 0.4
) -> dict:
    """CSC arrays in bm25s's layout: for term t, passages ``indices[indptr[t]:indptr[t+1]]`` with scores
    ``data[...]`` (float32). `corpus_term_ids` holds each passage's analyzed terms as ids, repeats kept."""
    num_docs = len(corpus_term_ids)
    lengths = np.fromiter((len(d) for d in corpus_term_ids), dtype=np.int64, count=num_docs)
    doc_of = np.repeat(np.arange(num_docs, dtype=np.int64), lengths)
    terms = (
        np.concatenate([np.asarray(d, dtype=np.int64) for d in corpus_term_ids])
        if lengths.sum()
        else np.zeros(0, np.int64)
    )
    # term frequency per (term, passage), sorted by term then passage: exactly the CSC order
    pairs, tf = np.unique(terms * num_docs + doc_of, return_counts=True)
    term_of, doc = pairs // num_docs, pairs % num_docs
    df = np.bincount(term_of, minlength=num_terms)
    idf = np.log1p((num_docs - df + 0.5) / (df + 0.5))
    avgdl = lengths.sum() / max(num_docs, 1)
    norm = k1 * (1 - b + b * lucene_length(lengths) / avgdl)
    data = (idf[term_of] * tf / (tf + norm[doc])).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    return {"data": data, "indices": doc.astype(np.int32), "indptr": indptr, "num_docs": num_docs}
