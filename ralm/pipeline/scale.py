"""The pipeline's two scales (`--quick` and full: `ScaleSettings`) and the per-option overrides on top of them
(`ScaleOptions`: `ralm run`'s and `ralm demo`'s ``--k``, ``--train-steps``, ...).

The paper's proportions, at CPU scale: a passage takes at most a quarter of the LM's input (the paper: 256
of 1,024 tokens), passages are 100-word chunks (the paper's DPR split), BM25's top k are reranked. The
paper's s=4, k=16, 300k prefixes and 10k steps need a GPU; the CPU scales shrink the number of windows,
prefixes and candidates instead of the proportions. What the demo shows is measured, not promised: see the
README for the tables it reaches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Literal

from ralm.config_types import (
    AtLeastTwoInt,
    Dtype,
    HalfOpenUnitInterval,
    NonNegativeInt,
    OpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    check_fields,
)
from ralm.errors import RalmInputError
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm

RELATED = "related"
"""The demo's eval set of text the corpus retells (``ralm.demo.assets``)."""


@dataclass(frozen=True)
class ScaleSettings:
    """Every setting of a pipeline run, resolved (a preset with the user's overrides applied)."""

    eval_tokens: int | None
    stride: int
    query_tokens: int
    max_length: int
    max_passage_tokens: int
    passage_words: int
    passage_stride: int
    k: int
    num_prefixes: int
    prefixes_per_shard: int
    train_steps: int
    batch_size: int
    lr: float
    head_lr: float
    warmup_steps: int
    loss: str
    max_pair_tokens: int
    max_prefix_tokens: int
    val_fraction: float
    decision_fraction: float
    val_every: int
    train_seeds: tuple[int, ...]
    abstain: bool
    patience: int = 0
    """Stop a seed's training after this many validations without a new best (0: all train_steps)."""
    attention_dropout: float | None = None
    """Dropout on the reranker encoder's attention probabilities while training (None: the encoder's own)."""
    dtype: Dtype = "fastest"
    margin: float = 0.01
    """δ of the export's promise: not worse than no retrieval by more than this share of token perplexity."""
    passage_form: PassageForm = RETRIEVED
    """What a retrieved passage hands the LM in data-gen and eval (``ralm.retrieval.passage_forms``)."""
    stacked: bool = False
    """Each seed trains the stacked reranker (``ralm train --zero-shot-prior``: the LM's zero-shot rule plus
    an encoder's correction) instead of BM25's ranking plus one (``--bm25-prior``)."""
    related_eval_tokens: int | None = None
    """LM tokens scored of the related set (``RELATED``: the text the corpus retells, where retrieval's
    gains are measured) instead of eval_tokens; None: eval_tokens."""

    def eval_tokens_of(self, eval_set: str) -> int | None:
        """LM tokens scored of eval set `eval_set` (None: the whole text)."""
        if eval_set == RELATED and self.related_eval_tokens is not None:
            return self.related_eval_tokens
        return self.eval_tokens

    def __post_init__(self) -> None:
        if self.val_fraction + self.decision_fraction >= 1:
            raise RalmInputError(
                f"--val-fraction {self.val_fraction} + "
                f"--decision-fraction {self.decision_fraction}: "
                "must leave training prefixes (sum below 1)"
            )
        if self.max_passage_tokens * 4 > self.max_length:
            raise RalmInputError(
                f"--max-passage-tokens {self.max_passage_tokens}: more than a quarter of "
                f"--max-length {self.max_length}; the passage would displace the context it should "
                "inform (the paper: 256 of 1,024)"
            )


# Cost model (2-core CPU): the demo's LM (Gemma-3-270m base; SmolLM2-135M alike) reads about 1,000-2,000
# tokens/s in bf16 on a CPU that computes it natively, 2-3x fewer in fp32. data-gen reads num_prefixes x
# (k + 1) inputs of max_length tokens; each eval set (one --compare table) about (eval_tokens - max_length) /
# stride x (k + 2) inputs; training reads train_steps x batch_size x (k + 1) pairs of max_pair_tokens
# tokens, once per seed.
#
# The window: a passage of at most 128 tokens in a 512-token input (a quarter: the paper's proportion, and the
# bound ScaleSettings enforces), 100-word passages without overlap (the paper's split) and k = 4, as chosen on
# the dev book Mark (docs/demo.md, "How the settings were chosen"): on the same targets (Mark's tokens
# 1,024-2,047), `ralm eval ppl --sweep max_length=512,1024` gave BM25 top-1 12.50 against no retrieval 14.71
# at 512 tokens and 12.38 against 14.23 at 1,024 (the best of 4: 11.61 and 11.58), so the paper's 1,024 buys
# nothing here at twice the cost; a 96-token passage in 192 tokens (the former preset) gained only 2.9%. The
# first max_length tokens of an eval set are scored without a passage in every condition; eval_tokens is sized
# so most scored tokens are in retrieving windows, and the report gives both. (The demo's dev and test books:
# ralm.demo.presets.)
QUICK = ScaleSettings(
    eval_tokens=2560,
    stride=32,
    query_tokens=32,
    max_length=512,
    max_passage_tokens=128,
    passage_words=100,
    passage_stride=100,
    k=4,
    num_prefixes=80,
    prefixes_per_shard=16,
    train_steps=50,
    batch_size=8,
    lr=3e-4,
    head_lr=3e-3,
    warmup_steps=5,
    loss="marginal",
    max_pair_tokens=192,
    max_prefix_tokens=32,
    val_fraction=0.2,
    decision_fraction=0.3,
    val_every=10,
    train_seeds=(0,),
    abstain=True,
)

FULL = replace(
    QUICK,
    eval_tokens=4096,
    # The related set decides whether retrieval pays, by a few percent: 16,384 tokens (496 retrieving
    # windows) resolve about ±2 points of token perplexity where 4,096 (112 windows) resolved ±4.
    related_eval_tokens=16384,
    num_prefixes=320,
    prefixes_per_shard=32,
    train_steps=150,
    lr=2e-4,
    warmup_steps=15,
    val_every=25,
    train_seeds=(0, 1, 2),
    # Every recorded full-demo curve (four seeds, two LMs) peaked by step 25 and never recovered it: stopping
    # two validations after the best selected the same step on all four at half the steps (bench/RESULTS.md,
    # "Early stopping").
    patience=2,
)


@dataclass
class ScaleOptions:
    """Change one setting of the chosen scale (`--quick` or full); unset options keep the scale's value."""

    eval_tokens: AtLeastTwoInt | None = None
    """Score only the first this-many LM tokens of each eval set (the first max_length of them have no
    passage)."""
    related_eval_tokens: AtLeastTwoInt | None = None
    """The demo's related set (text the corpus retells) scores this many tokens instead of eval_tokens
    (`ralm run`'s one eval set scores eval_tokens)."""
    stride: PositiveInt | None = None
    """s: retrieve every s tokens (eval) and predict s tokens (data-gen)."""
    query_tokens: PositiveInt | None = None
    """ℓ: BM25 query length in LM tokens."""
    max_length: AtLeastTwoInt | None = None
    """LM input length (passage + prefix + targets); at least 4x max_passage_tokens (the paper: 1,024)."""
    max_passage_tokens: PositiveInt | None = None
    """Passages are cut to this many LM tokens: at most a quarter of max_length (the paper: 256)."""
    passage_words: PositiveInt | None = None
    """Words per retrieval passage (the paper's split: 100)."""
    passage_stride: PositiveInt | None = None
    """Words between passage starts (passage_words: no overlap, the paper's split)."""
    k: PositiveInt | None = None
    """BM25 candidates per query (reranked by zero-shot, trained reranker, oracle)."""
    num_prefixes: PositiveInt | None = None
    """Training prefixes scored by data-gen."""
    prefixes_per_shard: PositiveInt | None = None
    """Data-gen shard size (a killed run loses at most one shard)."""
    train_steps: PositiveInt | None = None
    """Reranker optimizer steps."""
    batch_size: PositiveInt | None = None
    """Prefixes (each with its k candidates) per training step."""
    lr: PositiveFloat | None = None
    """Reranker peak learning rate."""
    head_lr: PositiveFloat | None = None
    """Peak learning rate of the reranker's new one-logit head."""
    warmup_steps: NonNegativeInt | None = None
    """Linear warmup steps of the reranker."""
    loss: Literal["marginal", "kl", "listwise_ce"] | None = None
    """Reranker loss: marginal (the paper), kl or listwise_ce."""
    max_pair_tokens: PositiveInt | None = None
    """Reranker tokens per (prefix, passage) pair."""
    max_prefix_tokens: PositiveInt | None = None
    """The reranker reads the last this-many tokens of the prefix."""
    val_fraction: OpenUnitInterval | None = None
    """Share of training prefixes (whole documents) held out to select the reranker's checkpoint."""
    decision_fraction: OpenUnitInterval | None = None
    """Share of training prefixes (other whole documents) held out to decide the export: the selected
    checkpoint, BM25 or no retrieval (val_fraction + decision_fraction < 1)."""
    val_every: PositiveInt | None = None
    """Validate (and keep the best checkpoint) every this many steps."""
    patience: NonNegativeInt | None = None
    """Stop a seed's training after this many validations in a row without a new best gain recovered (0:
    run all train_steps); the schedule keeps train_steps' length, so the selection is the full run's
    whenever no later validation would have beaten the best."""
    attention_dropout: HalfOpenUnitInterval | None = None
    """Dropout on the reranker encoder's attention probabilities while training (unset: the preset's; the
    preset's null: the encoder's own, 0.1 for MiniLM). 0 lets PyTorch's fused attention kernel run on a
    CPU (`ralm train --attention-dropout`)."""
    train_seeds: list[int] | None = None
    """One reranker per seed, all in the same eval table (their spread is the training noise)."""
    abstain: bool | None = None
    """Train with the empty passage as a candidate, so the reranker (and validation) can decline to
    retrieve."""
    margin: HalfOpenUnitInterval | None = None
    """δ: the exported rule must be shown not worse than no retrieval by more than this share of token
    perplexity (one-sided 95% bound on the decision prefixes; `ralm train --margin`)."""
    passage_form: PassageForm | None = None
    """What a retrieved passage hands the LM in data-gen and eval: itself (retrieved, the paper's), or from
    its sentence that best matches the query on into the next passage of its document (continuation)."""
    stacked: bool | None = None
    """Each seed's reranker starts as the LM's own zero-shot rule (with abstain, abstaining below a y' gain of
    M) and learns an encoder's correction of it: the stacked reranker, which reads the LM per candidate at
    rerank time as that rule does. False: it starts as BM25's ranking (with abstain, the threshold rule) and
    reads no LM at rerank time."""
    dtype: Dtype | None = None
    """The frozen LM's dtype in data-gen and eval: fastest (bf16 where the device computes it natively and a
    measurement here finds it faster, else fp32; the report states bf16's change in NLL against fp32), auto
    (ralm's rule: fp32 on CPU), fp32 or bf16 (any ``--dtype`` value). The reranker trains in bf16-mixed
    when this resolves to bf16 (``ralm.pipeline.plan.training_precision``)."""

    def __post_init__(self) -> None:
        check_fields(self)  # before the first stage, not minutes later in the stage that reads the value


def resolve_scale(quick: bool, overrides: ScaleOptions) -> ScaleSettings:
    """The preset with every set override applied."""
    scale = QUICK if quick else FULL
    changes = {
        f.name: getattr(overrides, f.name)
        for f in fields(overrides)
        if getattr(overrides, f.name) is not None
    }
    if "train_seeds" in changes:
        changes["train_seeds"] = tuple(changes["train_seeds"])
    return replace(scale, **changes)


def describe(scale: ScaleSettings) -> str:
    """The settings as printed at the start of a run."""
    values = asdict(scale)
    values["train_seeds"] = ",".join(map(str, values["train_seeds"]))
    values["eval_tokens"] = values["eval_tokens"] or "all"
    values["related_eval_tokens"] = values["related_eval_tokens"] or values["eval_tokens"]
    return "  ".join(f"{k}={v}" for k, v in values.items())
