"""Set up and run reranker training: checks, then a Lightning Trainer whose callbacks do the rest
(``ralm.rerank.training_callbacks``: BM25 fallback, last validation, the decided export and summary).

Everything cheap is checked first (options, the dataset's columns and rows, a resumed checkpoint's
model), so bad input fails in seconds with a one-line ``RalmInputError``, before any model loads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, replace

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from ralm.devices import training_precision
from ralm.errors import RalmInputError
from ralm.progress import is_terminal
from ralm.rerank.batching import planned_world_size, split_global_batch
from ralm.rerank.datamodule import RerankDataModule
from ralm.rerank.dataset import bm25_top_stats, load_rerank_data
from ralm.rerank.export import check_compatible, read_checkpoint
from ralm.rerank.inputs import check_lengths
from ralm.rerank.lit_module import RerankerModule
from ralm.rerank.log_lines import TrainLogLines
from ralm.rerank.loggers import build_loggers
from ralm.rerank.model import load_tokenizer
from ralm.rerank.selection import ValidationHistory
from ralm.rerank.settings import EncoderArgs, LoaderArgs, OptimArgs, RunArgs
from ralm.rerank.training_callbacks import (
    BEST_METRIC,
    STEP0_FILE,
    BM25Fallback,
    ExportDecided,
    ExportSettings,
    ValidateAtEnd,
)


def check_settings(encoder: EncoderArgs, loader: LoaderArgs, optim: OptimArgs, run: RunArgs) -> None:
    """Option values that cannot work, named by their field."""
    try:
        check_lengths(encoder.max_length, encoder.max_prefix_tokens, field="encoder.max_prefix_tokens")
    except ValueError as err:
        raise RalmInputError(str(err)) from None
    positive = {
        "loader.batch_size": loader.batch_size,
        "loader.val_batch_size": loader.val_batch_size,
        "optim.max_steps": optim.max_steps,
        "optim.accumulate": optim.accumulate,
        "run.val_every": run.val_every,
        "run.save_every": run.save_every,
        "run.log_every": run.log_every,
        "optim.lr": optim.lr,
        "optim.temperature": optim.temperature,
        "loader.global_batch_size": 1 if loader.global_batch_size is None else loader.global_batch_size,
    }
    for name, value in positive.items():
        if value <= 0:
            raise RalmInputError(f"{name}={value}: must be > 0")
    if not 0 <= optim.warmup_steps <= optim.max_steps:
        raise RalmInputError(f"optim.warmup_steps={optim.warmup_steps}: must be between 0 and max_steps")


def resolve_hardware(run: RunArgs) -> tuple[str, str]:
    """(accelerator, precision) chosen at run time; DeepSpeed without CUDA is refused here."""
    has_cuda = torch.cuda.is_available()
    accelerator = run.accelerator if run.accelerator != "auto" else ("gpu" if has_cuda else "cpu")
    if accelerator in ("gpu", "cuda") and not has_cuda:
        raise RalmInputError(f"run.accelerator={run.accelerator}: no CUDA GPU is visible (use auto or cpu)")
    on_gpu = accelerator in ("gpu", "cuda")
    if "deepspeed" in run.strategy.lower():
        if not on_gpu:
            raise RalmInputError(
                f"run.strategy={run.strategy}: DeepSpeed needs CUDA GPUs and this run has none "
                "(use strategy 'ddp' on CPU, or a GPU machine)"
            )
        if importlib.util.find_spec("deepspeed") is None:
            raise RalmInputError(
                f"run.strategy={run.strategy}: DeepSpeed is not installed (pip install 'ralm[deepspeed]')"
            )
    if run.precision != "auto":
        return accelerator, run.precision
    return accelerator, training_precision(on_gpu)


def resolve_ckpt_path(ckpt_path: str | None, out_dir: str) -> str | None:
    """``last`` is ``OUT/checkpoints/last.ckpt`` (absent: start fresh); other paths must exist."""
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        last = os.path.join(out_dir, "checkpoints", "last.ckpt")
        if os.path.exists(last):
            return last
        print(f"--ckpt-path last: no {last} yet, starting from scratch")
        return None
    if not os.path.exists(ckpt_path):
        raise RalmInputError(f"ckpt_path={ckpt_path}: no such checkpoint")
    return ckpt_path


def module_hparams(encoder: EncoderArgs, optim: OptimArgs, abstain: bool, bm25_prior: bool) -> dict:
    """``RerankerModule``'s keyword arguments from the settings (what its checkpoints record)."""
    return {
        "encoder_name": encoder.name, "loss": optim.loss, "temperature": optim.temperature, "lr": optim.lr,
        "weight_decay": optim.weight_decay, "warmup_steps": optim.warmup_steps, "max_steps": optim.max_steps,
        "gradient_checkpointing": encoder.gradient_checkpointing, "abstain": abstain,
        "max_length": encoder.max_length, "max_prefix_tokens": encoder.max_prefix_tokens,
        "bm25_prior": bm25_prior, "prior_lr": optim.prior_lr, "head_lr": optim.head_lr,
    }  # fmt: skip


def build_trainer(run: RunArgs, optim: OptimArgs, hardware: dict, out_dir: str, loggers: list,
                  callbacks: list[Callback]) -> pl.Trainer:  # fmt: skip
    """The Trainer for ralm's settings: steps, accumulation, validation cadence, no sampler of its own."""
    val_every = min(run.val_every, optim.max_steps)
    # Piped to a file, a bar becomes carriage-return fragments: plain lines instead (ralm.progress).
    log_lines = [TrainLogLines()] if run.progress_bar and not is_terminal() else []
    return pl.Trainer(
        accelerator=hardware["accelerator"], devices=run.devices, num_nodes=run.num_nodes,
        strategy=run.strategy, precision=hardware["precision"], max_steps=optim.max_steps, max_epochs=1,
        accumulate_grad_batches=optim.accumulate, gradient_clip_val=optim.grad_clip or None,
        val_check_interval=val_every * optim.accumulate, check_val_every_n_epoch=1, num_sanity_val_steps=0,
        log_every_n_steps=run.log_every, logger=loggers,
        callbacks=[ValidateAtEnd(val_every), *callbacks, *log_lines],
        enable_progress_bar=run.progress_bar and is_terminal(), enable_model_summary=False,
        use_distributed_sampler=False,  # our batch samplers shard by rank themselves
        default_root_dir=out_dir,
    )  # fmt: skip


def checkpoint_callbacks(ckpt_dir: str, save_every: int) -> tuple[ModelCheckpoint, ModelCheckpoint]:
    """The best checkpoint by gain recovered, and last.ckpt every `save_every` steps (for resuming)."""
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="best-step{step}", auto_insert_metric_name=False,
                           monitor=BEST_METRIC, mode="max", save_top_k=1)  # fmt: skip
    last = ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=save_every, save_top_k=0, save_last=True,
                           save_on_train_epoch_end=True)  # fmt: skip
    return best, last


def fit_reranker(
    data: str,
    out_dir: str,
    *,
    encoder: EncoderArgs,
    loader: LoaderArgs,
    optim: OptimArgs,
    run: RunArgs,
    abstain: bool = False,
    bm25_prior: bool = False,
    ckpt_path: str | None = None,
    seed: int = 0,
    extra_callbacks: Sequence[Callback] = (),
) -> dict:
    """Train, keep the best checkpoint by gain recovered, export the decided model to ``OUT/reranker``;
    returns the summary (empty on ranks other than zero)."""
    check_settings(encoder, loader, optim, run)
    accelerator, precision = resolve_hardware(run)
    hardware = {"accelerator": accelerator, "precision": precision, "strategy": run.strategy}
    if loader.global_batch_size is not None:
        micro, accumulate = split_global_batch(
            loader.global_batch_size, loader.batch_size, planned_world_size(run)
        )
        loader, optim = replace(loader, batch_size=micro), replace(optim, accumulate=accumulate)
    rerank_data = load_rerank_data(data, abstain=abstain, val_fraction=loader.val_fraction, seed=seed,
                                   max_val_prefixes=loader.max_val_prefixes, bm25_prior=bm25_prior)  # fmt: skip
    hparams = module_hparams(encoder, optim, abstain, bm25_prior)
    if abstain and bm25_prior:
        mean, std = bm25_top_stats(data, rerank_data.train_rows)
        hparams.update(bm25_top_mean=mean, bm25_top_std=std)
    resume = resolve_ckpt_path(ckpt_path, out_dir)
    if resume is not None and os.path.isfile(resume):  # a DeepSpeed checkpoint is a folder of shards
        check_compatible(resume, read_checkpoint(resume).get("hyper_parameters", {}), hparams)
    os.makedirs(out_dir, exist_ok=True)
    loggers = build_loggers(out_dir, run)

    pl.seed_everything(seed, workers=True, verbose=False)
    tokenizer = load_tokenizer(encoder.name)
    module = RerankerModule(**hparams)
    datamodule = RerankDataModule(
        rerank_data, tokenizer, batch_size=loader.batch_size, val_batch_size=loader.val_batch_size,
        total_batches=optim.max_steps * optim.accumulate, max_length=encoder.max_length,
        max_prefix_tokens=encoder.max_prefix_tokens, num_workers=loader.num_workers, seed=seed,
    )  # fmt: skip
    # The step-0 model sits beside, not in, checkpoints/: ModelCheckpoint warns about a non-empty folder.
    best, last = checkpoint_callbacks(os.path.join(out_dir, "checkpoints"), run.save_every)
    history = ValidationHistory()
    config = {"encoder": asdict(encoder), "loader": asdict(loader), "optim": asdict(optim), "run": asdict(run),
              "abstain": abstain, "bm25_prior": bm25_prior, "seed": seed, "data": data}  # fmt: skip
    export = ExportDecided(
        ExportSettings(out_dir, data, rerank_data, hparams, {"hardware": hardware, "settings": config}, seed,
                       abstain, bm25_prior, run.keep_checkpoints, loggers),
        best, last, history,
    )  # fmt: skip
    fallback = (
        [BM25Fallback(os.path.join(out_dir, STEP0_FILE), resuming=resume is not None)] if bm25_prior else []
    )
    callbacks = [best, last, history, *fallback, *extra_callbacks, export]
    trainer = build_trainer(run, optim, hardware, out_dir, loggers, callbacks)
    started = time.time()
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
    if not trainer.is_global_zero:
        return {}
    return export.summary or _summary_written_since(out_dir, started)


def _summary_written_since(out_dir: str, started: float) -> dict:
    """Under ddp_spawn the export ran in the spawned rank-0 worker: its summary.json, if this run wrote it."""
    path = os.path.join(out_dir, "summary.json")
    if os.path.exists(path) and os.path.getmtime(path) >= started:
        with open(path) as f:
            return json.load(f)
    return {}
