"""The reranking dataset's columns (docs/formats.md §4, format ``ralm-rerank-data/2``).

The reranker reads these names and types with ``datasets.load_from_disk`` and nothing from ralm, so a
change here is a format change: bump FORMAT and update docs/formats.md together.
"""

from __future__ import annotations

from datasets import Features, List, Value

FORMAT = "ralm-rerank-data/2"
READABLE_FORMATS = ("ralm-rerank-data/1", FORMAT)
"""/1 lacks the ranking columns (``lm_rank_logprobs``, ``no_retrieval_rank_logprob``): no zero-shot rule."""
METADATA_FILE = "ralm_data_gen.json"

FEATURES = Features(
    {
        "prefix_index": Value("int64"),
        "doc_id": Value("string"),
        "position": Value("int64"),
        "prefix": Value("string"),
        "target": Value("string"),
        "query": Value("string"),
        "candidate_ids": List(Value("string")),
        "candidate_doc_ids": List(Value("string")),
        "candidate_texts": List(Value("string")),
        "bm25_scores": List(Value("float32")),
        "lm_logprobs": List(Value("float32")),
        "lm_token_logprobs": List(List(Value("float32"))),
        "no_retrieval_logprob": Value("float32"),
        "no_retrieval_token_logprobs": List(Value("float32")),
        "lm_rank_logprobs": List(Value("float32")),
        "no_retrieval_rank_logprob": Value("float32"),
    }
)
