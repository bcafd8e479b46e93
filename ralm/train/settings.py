"""Argument groups of `ralm train`: the signature is the schema, the docstrings are its --help.

Defaults are the paper's (§6.2: RoBERTa-base, peak LR 1e-5, 32 prefixes a step, 10,000 steps, k=16
from the data). The paper does not give warmup, weight decay or clipping; ours are the usual BERT
fine-tuning values. Constraints live in the types (``ralm.config_types``): the CLI, a YAML file and a
dataclass built in Python check them alike.

The Lightning Trainer's own settings are the ``trainer`` group, made from ``pl.Trainer``'s signature
(``TRAINER_SKIPPED`` are not options, ``TRAINER_FIXED`` are shown and may not change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ralm.config_types import (
    HalfOpenUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    OpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    check_fields,
    violation,
)
from ralm.errors import RalmInputError
from ralm.rerank.inputs import check_lengths


@dataclass
class EncoderOptions:
    """The cross-encoder and its input rule."""

    name: str = "roberta-base"
    """Hugging Face encoder id or local folder (the offline all-MiniLM-L6-v2 folder works)."""
    max_pair_tokens: PositiveInt = 512
    """Reranker tokens per (prefix, passage) pair; the passage is cut from its end to fit (recorded in the
    export as ``max_length``; not the LM's ``--max-length``)."""
    max_prefix_tokens: PositiveInt = 256
    """The prefix is cut to its last this-many reranker tokens."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about 30% slower)."""
    attention_dropout: HalfOpenUnitInterval | None = None
    """Dropout on the encoder's attention probabilities while training (None: the encoder's own, 0.1 for
    BERT and RoBERTa). 0 lets PyTorch's fused attention kernel run on a CPU, which falls back to the unfused
    path under dropout (bench/RESULTS.md, "Attention dropout"); it changes training."""

    def __post_init__(self) -> None:
        check_fields(self)
        try:
            check_lengths(self.max_pair_tokens, self.max_prefix_tokens, field="encoder.max_prefix_tokens")
        except ValueError as err:
            raise RalmInputError(str(err)) from None


@dataclass
class LoaderOptions:
    """Batches of whole candidate groups, split by source document."""

    batch_size: PositiveInt = 32
    """Prefixes (each with all k candidates) per process and micro-batch (the most that fit in memory when
    global_batch_size is set)."""
    global_batch_size: PositiveInt | None = None
    """Prefixes per optimizer step over all processes (the paper: 32); sets the per-process micro-batch and
    the accumulation from the world size. None: batch_size per process, times
    trainer.accumulate_grad_batches."""
    val_batch_size: PositiveInt = 32
    """Prefixes per validation batch."""
    val_fraction: OpenUnitInterval = 0.05
    """Share of prefixes held out to select the checkpoint (validated every run.val_every steps), taken as
    whole source documents: no document is in two of the training, selection and decision parts."""
    decision_fraction: OpenUnitInterval = 0.1
    """Share of prefixes held out, as whole documents of their own, to decide the export once at the end:
    the selected checkpoint, BM25's top-1, the threshold rule and no passage (with --abstain) on prefixes
    that chose nothing (the rule: --abstain, --margin). It costs no LM scoring (the rows hold every
    candidate's log-prob), only the reranker's encoder passes, so make it large: it sets the power of the
    promise test (recorded: prefixes_for_power)."""
    max_val_prefixes: PositiveInt | None = None
    """Cap on selection prefixes, to keep frequent validation cheap (the decision part is scored once)."""
    num_workers: NonNegativeInt = 0
    """Dataloader worker processes (they tokenize); 0 tokenizes in the training process."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.val_fraction + self.decision_fraction >= 1.0:
            raise RalmInputError(
                f"loader.decision_fraction={self.decision_fraction}: "
                f"with val_fraction={self.val_fraction} it "
                "leaves no prefixes to train on (the two must sum to less than 1)"
            )


@dataclass
class OptimOptions:
    """Loss, AdamW and the linear warmup/decay schedule (accumulation and clipping: the trainer group)."""

    loss: Literal["marginal", "kl", "listwise_ce"] = "marginal"
    """marginal: -log Σ p_rank·p_LM (the paper); kl: distil softmax(lm/τ); listwise_ce: the LM's best."""
    temperature: PositiveFloat = 1.0
    """τ of the kl loss."""
    rank_weight: NonNegativeFloat = 0.0
    """λ: weight of the second target, the LM's preference on y' (the prefix's own last tokens) as a KL to
    its per-prefix standardised scores (``ralm.train.losses.rank_target_loss``); needs data with y'
    (``ralm-rerank-data/2``). 0: the loss on the targets alone (the paper)."""
    rank_temperature: PositiveFloat = 1.0
    """τ' of the y' target."""
    lr: PositiveFloat = 1e-5
    """Peak learning rate."""
    head_lr: PositiveFloat | None = None
    """Peak learning rate of the new one-logit output layer (default: lr)."""
    prior_lr: NonNegativeFloat = 1e-2
    """Peak learning rate of a prior's scalars (--bm25-prior, --zero-shot-prior); same warmup and decay."""
    weight_decay: NonNegativeFloat = 0.01
    """AdamW weight decay (not on biases and LayerNorm)."""
    warmup_steps: NonNegativeInt = 1000
    """Linear warmup steps, then linear decay to 0 at max_steps."""
    max_steps: PositiveInt = 10_000
    """Optimizer steps: the schedule's length and the Trainer's max_steps (linked, one source)."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.warmup_steps > self.max_steps:
            raise RalmInputError(
                f"optim.warmup_steps={self.warmup_steps}: must be between 0 and max_steps ({self.max_steps})"
            )


@dataclass
class RunOptions:
    """ralm's own run settings: validation and checkpoint cadence, loggers, what is kept."""

    val_every: PositiveInt = 500
    """Validate every this many optimizer steps (and at the end); sets the Trainer's val_check_interval."""
    patience: PositiveInt | None = None
    """Stop training after this many validations in a row without a new best gain recovered (None: run all
    optim.max_steps). The learning-rate schedule keeps its length, so the steps taken are the same as in the
    full run and the selected checkpoint is too whenever no later validation would have beaten it."""
    save_every: PositiveInt = 100
    """Write checkpoints/last.ckpt every this many optimizer steps (for --ckpt-path last)."""
    wandb: Literal["auto", "on", "off"] = "auto"
    """Weights & Biases logging: auto = when installed (WANDB_MODE=offline works without network)."""
    tensorboard: bool = False
    """Also log to TensorBoard (needs the tensorboard extra)."""
    keep_checkpoints: bool = True
    """Keep checkpoints/ and the step-0 model after the export (false: only the exported reranker stays,
    hundreds of MB less; a finished run then cannot be resumed or re-exported)."""

    def __post_init__(self) -> None:
        check_fields(self)


# pl.Trainer's arguments that are not options, and why: ralm builds them.
TRAINER_SKIPPED = {
    "logger": "CSV always, plus run.wandb and run.tensorboard",
    "callbacks": "ralm's checkpoints, BM25 fallback, validation history and export",
    "enable_checkpointing": "the export reads ralm's checkpoints",
    "default_root_dir": "it is --output",
    "val_check_interval": "run.val_every optimizer steps times the accumulation (known at run time)",
}
TRAINER_LINKS = {"max_steps": "optim.max_steps"}
"""Trainer arguments copied from a ralm option that also drives ralm's own logic (the LR schedule)."""
TRAINER_FIXED = {
    "max_epochs": (1, "the data module is one pass of max_steps x accumulation batches"),
    "check_val_every_n_epoch": (1, "in the one epoch validation runs every run.val_every steps"),
    "use_distributed_sampler": (False, "ralm's batch samplers shard whole groups by rank themselves"),
    "fast_dev_run": (False, "it turns off the checkpoints the export reads (a short run: --max-steps 2)"),
    "barebones": (False, "it turns off the logging and checkpoints ralm needs"),
}
"""Shown by --print_config with ralm's value; any other value is refused (the reason says why)."""
TRAINER_DEFAULTS = {
    "precision": None,  # None: ralm's rule, bf16-mixed on a GPU that computes bf16, else 32-true
    "num_sanity_val_steps": 0,  # the first validation is at run.val_every; a sanity pass only costs time
    "log_every_n_steps": 50,
    "enable_progress_bar": True,  # piped to a file: plain log lines instead (ralm.train.log_lines)
    "enable_model_summary": False,
    "gradient_clip_val": 1.0,  # the usual BERT fine-tuning value; 0 disables
    **{name: value for name, (value, _) in TRAINER_FIXED.items()},
}
"""ralm's values for the Trainer's settings where they differ from Lightning's defaults."""


def trainer_settings(trainer: dict | None, optim: OptimOptions) -> dict:
    """pl.Trainer keyword arguments: ralm's defaults, then `trainer`; ralm's own ones refused."""
    given = dict(trainer or {})
    for name in given.keys() & TRAINER_SKIPPED.keys():
        raise RalmInputError(f"trainer.{name}: set by ralm ({TRAINER_SKIPPED[name]}), not an option")
    for name, (value, why) in TRAINER_FIXED.items():
        if given.get(name, value) != value:
            raise RalmInputError(f"trainer.{name}={given[name]!r}: ralm needs {value!r} ({why})")
    if given.get("max_steps", optim.max_steps) != optim.max_steps:  # the one entry of TRAINER_LINKS
        raise RalmInputError(
            f"trainer.max_steps={given['max_steps']!r}: it is optim.max_steps, set that instead"
        )
    # Lightning's defaults of the settings ralm reads itself (batching, hardware checks), then ralm's, then
    # yours
    read = {"accelerator": "auto", "strategy": "auto", "accumulate_grad_batches": 1}
    settings = {**read, **TRAINER_DEFAULTS, **given, "max_steps": optim.max_steps}
    if settings["precision"] == "auto":  # ralm's rule, as None
        settings["precision"] = None
    accumulate = settings["accumulate_grad_batches"]  # ralm sizes its batches by it before the Trainer exists
    if isinstance(accumulate, bool) or not isinstance(accumulate, int) or accumulate < 1:
        raise RalmInputError(violation("--accumulate-grad-batches", (PositiveInt,), accumulate))
    return settings
