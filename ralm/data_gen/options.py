"""`ralm data-gen`'s own option groups: which prefixes are sampled (`SamplingOptions`) and how the sample is
cut into shards (`ShardingOptions`).

The groups it shares with the other LM stages are `ralm.lm.options.LMOptions` (``--lm``, ``--max-length``,
``--device``, ``--dtype``), `ralm.lm.options.WindowOptions` (``--stride`` s, ``--query-tokens`` ℓ,
``--max-passage-tokens``) and `ralm.retrieval.options.RetrievalOptions` (``--index``, ``--passages``,
``--k``, ``--threads``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ralm.config_types import NonNegativeInt, PositiveInt, check_fields
from ralm.lm.options import WindowOptions


@dataclass
class SamplingOptions:
    """Which training prefixes are scored: a seeded sample of the stride boundaries of the documents."""

    num_prefixes: PositiveInt = 300_000
    """Prefixes to sample (the paper: 300,000 from WikiText-103's training set)."""
    min_prefix_tokens: NonNegativeInt = 32
    """Shortest prefix (in tokens) that may be sampled; the effective floor is max(ℓ, this)."""
    seed: NonNegativeInt = 0
    """Seed of the prefix sample."""
    limit: PositiveInt | None = None
    """Only the first LIMIT prefixes of the sample (a quick look)."""
    rank_tokens: PositiveInt = 16
    """y' of the zero-shot rule: the log-prob of each prefix's last RANK_TOKENS tokens after each passage
    is recorded beside the target's (the paper's s' = 16); at most half the shortest prefix (the effective
value is recorded)."""

    def __post_init__(self) -> None:
        check_fields(self)


def prefix_floor(sampling: SamplingOptions, window: WindowOptions) -> int:
    """The shortest prefix sampled: at least ``--min-prefix-tokens``, and no query (the last ℓ tokens) may
    reach before the document's start."""
    return max(window.query_tokens, sampling.min_prefix_tokens)


def rank_span(sampling: SamplingOptions, window: WindowOptions) -> int:
    """The effective y': ``--rank-tokens``, at most half the shortest prefix (y' is the end of every
    prefix, and the zero-shot rule scores it after the rest)."""
    return min(sampling.rank_tokens, prefix_floor(sampling, window) // 2)


@dataclass
class ShardingOptions:
    """How the sample is cut into shards, each written atomically, and which of them this process runs."""

    num_shards: PositiveInt | None = None
    """Shards to cut the sample into (default: one per PREFIXES_PER_SHARD prefixes)."""
    shard_id: NonNegativeInt | None = None
    """Run only this shard (default: all, or every WORLD_SIZE-th from RANK under torchrun)."""
    prefixes_per_shard: PositiveInt = 1000
    """Shard size when --num-shards is not given; a killed run loses at most one shard per process."""
    keep_shards: bool = False
    """Keep shards/ after merging."""

    def __post_init__(self) -> None:
        check_fields(self)
