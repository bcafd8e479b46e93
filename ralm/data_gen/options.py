"""`ralm data-gen`'s own option groups: which prefixes are sampled (`SamplingOptions`) and how the sample is
cut into shards (`ShardingOptions`); and the run's settings resolved once from every group
(`GenerationSettings`), which the rows, the shards and the recorded config read.

The groups it shares with the other LM stages are `ralm.lm.options.LMOptions` (``--lm``, ``--max-length``,
``--device``, ``--dtype``), `ralm.lm.options.WindowOptions` (``--stride`` s, ``--query-tokens`` ℓ,
``--max-passage-tokens``) and `ralm.retrieval.options.RetrievalOptions` (``--index``, ``--passages``,
``--k``, ``--threads``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ralm.config_types import NonNegativeInt, PositiveInt, check_fields
from ralm.lm.options import WindowOptions
from ralm.lm.scoring import ScoringSettings
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm


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


@dataclass(frozen=True)
class GenerationSettings:
    """One run's resolved settings, built once from the options, the LM and the sample: every later use
    (the rows, the progress total, ``config`` in the metadata and in every shard) reads them from here."""

    stride: int
    query_tokens: int
    k: int
    min_prefix_tokens: int
    """The effective floor: max(ℓ, --min-prefix-tokens)."""
    input_length: int
    """The LM input (``--max-length``) after capping at the LM's context."""
    max_passage_tokens: int
    seed: int
    num_prefixes: int
    rank_tokens: int
    """y': the prefix's last tokens whose log-prob after each passage is recorded (the zero-shot rule);
    the effective value (``rank_span``)."""
    num_examples: int
    num_shards: int
    exclude_same_doc: bool
    num_passages: int
    retrieval_threads: int = 1
    passage_form: PassageForm = RETRIEVED
    """What each candidate hands the LM (``ralm.retrieval.passage_forms``)."""

    def recorded(self) -> dict:
        """The fields that decide the rows, as `ralm.data_gen.metadata.run_config` takes them (the index's
        size and the search threads change no row; the passage form only when it is not the paper's, so
        earlier folders keep their config and resume)."""
        fields = asdict(self)
        del fields["num_passages"], fields["retrieval_threads"]
        if self.passage_form == RETRIEVED:
            del fields["passage_form"]
        return fields

    @property
    def scoring(self) -> ScoringSettings:
        """How the LM scores each prefix's inputs (``ralm.data_gen.scoring.score_prefix`` sets the batch:
        one prefix's inputs, whole)."""
        return ScoringSettings(
            input_length=self.input_length,
            max_passage_tokens=self.max_passage_tokens,
            rank_tokens=self.rank_tokens,
        )


def resolve_settings(
    sampling: SamplingOptions,
    window: WindowOptions,
    retrieval: RetrievalOptions,
    *,
    allow_same_doc: bool,
    input_length: int,
    num_passages: int,
    num_examples: int,
    num_shards: int,
    passage_form: PassageForm = RETRIEVED,
) -> GenerationSettings:
    """The run's settings from its options, the capped LM input (`input_length`), the index's size and the
    sample (``exclude_same_doc`` is the negation of --allow-same-doc)."""
    return GenerationSettings(
        stride=window.stride,
        query_tokens=window.query_tokens,
        k=retrieval.k,
        min_prefix_tokens=prefix_floor(sampling, window),
        input_length=input_length,
        max_passage_tokens=window.max_passage_tokens,
        seed=sampling.seed,
        num_prefixes=sampling.num_prefixes,
        rank_tokens=rank_span(sampling, window),
        num_examples=num_examples,
        num_shards=num_shards,
        exclude_same_doc=not allow_same_doc,
        num_passages=num_passages,
        retrieval_threads=retrieval.threads,
        passage_form=passage_form,
    )
