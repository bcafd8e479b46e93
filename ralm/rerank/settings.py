"""Argument groups of `ralm train`: the signature is the schema, the docstrings are its --help.

Defaults are the paper's (§6.2: RoBERTa-base, peak LR 1e-5, 32 prefixes a step, 10,000 steps, k=16
from the data). The paper does not give warmup, weight decay or clipping; ours are the usual BERT
fine-tuning values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass
class EncoderArgs:
    """The cross-encoder and its input rule."""

    name: str = "roberta-base"
    """Hugging Face encoder id or local folder (the offline all-MiniLM-L6-v2 folder works)."""
    max_length: int = 512
    """Tokens per (prefix, passage) pair; the passage is cut from its end to fit."""
    max_prefix_tokens: int = 256
    """The prefix is cut to its last this-many reranker tokens."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, about 30% slower)."""


@dataclass
class LoaderArgs:
    """Batches of whole candidate groups, split by source document."""

    batch_size: int = 32
    """Prefixes (each with all k candidates) per process and micro-batch (the most that fit in memory when
    global_batch_size is set)."""
    global_batch_size: int | None = None
    """Prefixes per optimizer step over all processes (the paper: 32); sets the per-process micro-batch and
    the accumulation from the world size. None: batch_size per process, times optim.accumulate."""
    val_batch_size: int = 32
    """Prefixes per validation batch."""
    val_fraction: float = 0.05
    """Share of prefixes held out for validation, taken as whole source documents (none is in both splits)."""
    max_val_prefixes: int | None = None
    """Cap on validation prefixes, to keep frequent validation cheap."""
    num_workers: int = 0
    """Dataloader worker processes (they tokenize); 0 tokenizes in the training process."""


@dataclass
class OptimArgs:
    """Loss, AdamW and the linear warmup/decay schedule."""

    loss: Literal["marginal", "kl", "listwise_ce"] = "marginal"
    """marginal: -log Σ p_rank·p_LM (the paper); kl: distil softmax(lm/τ); listwise_ce: the LM's best."""
    temperature: float = 1.0
    """τ of the kl loss."""
    lr: float = 1e-5
    """Peak learning rate."""
    head_lr: float | None = None
    """Peak learning rate of the new one-logit output layer (default: lr)."""
    prior_lr: float = 1e-2
    """Peak learning rate of the BM25 prior's weight (--bm25-prior); same warmup and decay."""
    weight_decay: float = 0.01
    """AdamW weight decay (not on biases and LayerNorm)."""
    warmup_steps: int = 1000
    """Linear warmup steps, then linear decay to 0 at max_steps."""
    max_steps: int = 10_000
    """Optimizer steps."""
    accumulate: int = 1
    """Micro-batches per optimizer step (gradient accumulation)."""
    grad_clip: float = 1.0
    """Gradient norm clipping; 0 disables."""


@dataclass
class RunArgs:
    """Hardware, strategy, logging and checkpoints (Lightning Trainer settings)."""

    accelerator: str = "auto"
    """auto (cuda when available, else cpu), cpu, gpu, ..."""
    devices: int | str = "auto"
    """Devices (processes) per node."""
    num_nodes: int = 1
    """Nodes."""
    strategy: str = "auto"
    """auto, ddp, ddp_spawn, fsdp, deepspeed_stage_2, ... (DeepSpeed needs CUDA GPUs)."""
    precision: str = "auto"
    """auto (bf16-mixed on a bf16 GPU, else 32-true) or any Lightning precision."""
    val_every: int = 500
    """Validate every this many optimizer steps (and at the end)."""
    save_every: int = 100
    """Write checkpoints/last.ckpt every this many optimizer steps (for --ckpt-path last)."""
    log_every: int = 50
    """Log training loss every this many optimizer steps."""
    wandb: Literal["auto", "on", "off"] = "auto"
    """Weights & Biases logging: auto = when installed (WANDB_MODE=offline works without network)."""
    tensorboard: bool = False
    """Also log to TensorBoard (needs the tensorboard extra)."""
    progress_bar: bool = True
    """Show a tqdm progress bar."""
    keep_checkpoints: bool = True
    """Keep checkpoints/ and the step-0 model after the export (false: only the exported reranker stays,
    hundreds of MB less; a finished run then cannot be resumed or re-exported)."""
