"""A data-gen run's inputs, opened and checked before the first row is scored: the index (not empty), the
LM's input length (room for a passage, a query and a target), the training documents (tokenized once,
``--exclude`` applied) and the seeded prefix sample with its shard count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ralm.data_gen.options import SamplingOptions, ShardingOptions, prefix_floor
from ralm.data_gen.prefixes import PrefixSample, TokenizedCorpus, sample_prefixes, tokenize_documents
from ralm.errors import RalmInputError
from ralm.lm.interface import LanguageModel
from ralm.lm.options import WindowOptions, window_fits
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.types import Retriever


def open_candidates_index(retrieval: RetrievalOptions) -> Retriever:
    """The index candidates come from, checked against its passages file and not empty."""
    retriever = retrieval.open()
    if int(retriever.meta.get("num_passages", 0)) < 1:
        raise RalmInputError(f"{retrieval.index}/ralm_index.json: num_passages is missing or zero")
    return retriever


def check_input_fits(input_length: int, window: WindowOptions) -> None:
    """Refuse an LM input (already capped at the LM's context) too short for a passage, a query and a
    target."""
    if not window_fits(input_length, window.max_passage_tokens, window.query_tokens, window.stride):
        needed = window.max_passage_tokens + window.query_tokens + window.stride
        raise RalmInputError(
            f"--max-length: the LM holds {input_length} tokens, less than max_passage_tokens "
            f"{window.max_passage_tokens} + query_tokens {window.query_tokens} + stride {window.stride} = "
            f"{needed}; lower --max-passage-tokens"
        )


@dataclass(frozen=True)
class SampledPrefixes:
    """The tokenized training documents, the seeded prefix sample over them, and how it is cut."""

    corpus: TokenizedCorpus
    sample: PrefixSample
    num_examples: int
    """Rows the run makes: the sample, or its first ``--limit`` prefixes."""
    num_shards: int


def sample_documents(
    documents: str,
    model: LanguageModel,
    sampling: SamplingOptions,
    window: WindowOptions,
    sharding: ShardingOptions,
    *,
    world_size: int,
    progress: bool,
    excluded: dict,
) -> SampledPrefixes:
    """Tokenize the documents ``excluded["rules"]`` do not name (`excluded` gets the counts, as
    `ralm.retrieval.passages.filter_documents` records them) and sample the prefixes."""
    from ralm.retrieval.passages import describe_exclusion, filter_documents, read_documents

    kept = filter_documents(read_documents(documents), excluded["rules"], excluded)
    corpus = tokenize_documents(kept, model.encode_batch, progress=progress)
    if excluded["rules"]:
        print(
            f"data-gen: --exclude left out {describe_exclusion(excluded, 'training documents')}", flush=True
        )
    floor = prefix_floor(sampling, window)
    sample = sample_prefixes(corpus.lengths, window.stride, floor, sampling.num_prefixes, sampling.seed)
    num_examples = min(len(sample.doc), sampling.limit or len(sample.doc))
    if num_examples == 0:
        raise RalmInputError(
            f"{documents}: no document is long enough for a {floor}-token prefix "
            f"and a {window.stride}-token target"
        )
    return SampledPrefixes(corpus, sample, num_examples, count_shards(num_examples, sharding, world_size))


def count_shards(num_examples: int, sharding: ShardingOptions, world_size: int) -> int:
    """``--num-shards``, else one per ``--prefixes-per-shard`` prefixes; under a launcher a multiple of the
    world size, so every process gets as many shards."""
    num_shards = sharding.num_shards or world_size * max(
        1, math.ceil(num_examples / sharding.prefixes_per_shard / world_size)
    )
    if num_shards > num_examples:
        raise RalmInputError(f"--num-shards: {num_shards} shards for only {num_examples} prefixes")
    return num_shards
