"""Set up and run reranker training: checks, Lightning Trainer, best-checkpoint export, summary.

Everything cheap is checked first (options, the dataset's columns and rows, a resumed checkpoint's
model), so bad input fails in seconds with a one-line ``RalmInputError``, before any model loads.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, replace

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from ralm.atomic_files import atomic_path, write_text_atomic
from ralm.devices import training_precision
from ralm.errors import RalmInputError
from ralm.progress import is_terminal
from ralm.rerank.batching import planned_world_size, split_global_batch
from ralm.rerank.datamodule import RerankDataModule
from ralm.rerank.dataset import bm25_top_stats, describe, finite_or_none, load_rerank_data
from ralm.rerank.export import check_compatible, export_reranker, read_checkpoint
from ralm.rerank.inputs import check_lengths
from ralm.rerank.lit_module import RerankerModule
from ralm.rerank.log_lines import TrainLogLines
from ralm.rerank.loggers import build_loggers, log_final_summary
from ralm.rerank.model import load_tokenizer
from ralm.rerank.selection import ValidationHistory, export_decision
from ralm.rerank.settings import EncoderArgs, LoaderArgs, OptimArgs, RunArgs

BEST_METRIC = "val/gain_recovered"
STEP0_FILE = "step0-bm25.ckpt"
"""The untrained ``--bm25-prior`` model (exactly BM25's ranking): exported when no step beats it."""


def trainer_is_rank_zero() -> bool:
    """Before the Trainer exists: rank 0 unless a launcher (torchrun, Lightning DDP) says otherwise."""
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))) == 0


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


class _ValidateAtEnd(Callback):
    """Validate after the last step too when max_steps is not a multiple of val_every."""

    def __init__(self, val_every: int):
        self.val_every = val_every

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        if trainer.global_step >= trainer.max_steps and trainer.global_step % self.val_every:
            trainer.should_stop = True  # Lightning validates once more when asked to stop


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
    """Train, keep the best checkpoint by gain recovered, export it to ``OUT/reranker``; returns the summary."""
    check_settings(encoder, loader, optim, run)
    accelerator, precision = resolve_hardware(run)
    if loader.global_batch_size is not None:
        micro, accumulate = split_global_batch(
            loader.global_batch_size, loader.batch_size, planned_world_size(run)
        )
        loader, optim = replace(loader, batch_size=micro), replace(optim, accumulate=accumulate)
    rerank_data = load_rerank_data(
        data,
        abstain=abstain,
        val_fraction=loader.val_fraction,
        seed=seed,
        max_val_prefixes=loader.max_val_prefixes,
        bm25_prior=bm25_prior,
    )
    hparams = {
        "encoder_name": encoder.name,
        "loss": optim.loss,
        "temperature": optim.temperature,
        "lr": optim.lr,
        "weight_decay": optim.weight_decay,
        "warmup_steps": optim.warmup_steps,
        "max_steps": optim.max_steps,
        "gradient_checkpointing": encoder.gradient_checkpointing,
        "abstain": abstain,
        "max_length": encoder.max_length,
        "max_prefix_tokens": encoder.max_prefix_tokens,
        "bm25_prior": bm25_prior,
        "prior_lr": optim.prior_lr,
        "head_lr": optim.head_lr,
    }
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
        rerank_data,
        tokenizer,
        batch_size=loader.batch_size,
        val_batch_size=loader.val_batch_size,
        total_batches=optim.max_steps * optim.accumulate,
        max_length=encoder.max_length,
        max_prefix_tokens=encoder.max_prefix_tokens,
        num_workers=loader.num_workers,
        seed=seed,
    )
    ckpt_dir = os.path.join(out_dir, "checkpoints")
    # Beside, not in, checkpoints/: ModelCheckpoint warns about (and may prune in) a non-empty folder.
    step0 = os.path.join(out_dir, STEP0_FILE)
    if bm25_prior and resume is None and trainer_is_rank_zero():
        # The untrained prior model IS BM25's ranking (gain recovered exactly 0); keep it as the
        # fallback so the export is never worse than BM25 on validation.
        with atomic_path(step0) as tmp:  # a kill mid-save must not leave a fallback that cannot load
            torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, tmp)
    val_every = min(run.val_every, optim.max_steps)
    history = ValidationHistory()
    best = ModelCheckpoint(
        dirpath=ckpt_dir,
        filename="best-step{step}",
        auto_insert_metric_name=False,
        monitor=BEST_METRIC,
        mode="max",
        save_top_k=1,
    )
    last = ModelCheckpoint(
        dirpath=ckpt_dir,
        every_n_train_steps=run.save_every,
        save_top_k=0,
        save_last=True,
        save_on_train_epoch_end=True,
    )
    # Piped to a file, a bar becomes carriage-return fragments: plain lines instead (ralm.progress).
    log_lines = [TrainLogLines()] if run.progress_bar and not is_terminal() else []
    trainer = pl.Trainer(
        accelerator=accelerator,
        devices=run.devices,
        num_nodes=run.num_nodes,
        strategy=run.strategy,
        precision=precision,
        max_steps=optim.max_steps,
        max_epochs=1,
        accumulate_grad_batches=optim.accumulate,
        gradient_clip_val=optim.grad_clip or None,
        val_check_interval=val_every * optim.accumulate,
        check_val_every_n_epoch=1,
        num_sanity_val_steps=0,
        log_every_n_steps=run.log_every,
        logger=loggers,
        callbacks=[best, last, _ValidateAtEnd(val_every), history, *log_lines, *extra_callbacks],
        enable_progress_bar=run.progress_bar and is_terminal(),
        enable_model_summary=False,
        use_distributed_sampler=False,  # our batch samplers shard by rank themselves
        default_root_dir=out_dir,
    )
    started = time.perf_counter()
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
    seconds = time.perf_counter() - started
    if not trainer.is_global_zero:
        return {}
    chosen = best.best_model_path or last.last_model_path
    best_score = finite_or_none(float(best.best_model_score)) if best.best_model_score is not None else None
    # The best checkpoint competes with BM25 (the step-0 prior model) and no retrieval (--abstain) on the
    # validation prefixes; at a tie the fixed rule wins (ralm.rerank.selection).
    at_best = history.at_score(BEST_METRIC, best_score)
    has_step0 = bm25_prior and os.path.exists(step0)
    values = history.decision_values(
        history.step_at_score(BEST_METRIC, best_score),
        trained=bool(best.best_model_path),
        bm25=has_step0,
        none=abstain,
    )
    choice, comparisons = export_decision(values, seed=seed)
    evidence = {"val_prefixes": len(next((v for v in values.values() if v is not None), [])), **comparisons}
    if choice == "bm25" or (choice == "no-retrieval" and has_step0):
        chosen, best_score = step0, 0.0
    metrics = {
        k: finite_or_none(float(v)) for k, v in trainer.callback_metrics.items() if k.startswith("val/")
    }
    trained_on = {
        "path": os.path.abspath(data),
        "format": rerank_data.meta.get("format"),
        "lm": rerank_data.meta.get("lm"),
        "train_prefixes": len(rerank_data.train_rows),
        "val_prefixes": len(rerank_data.val_rows),
    }
    export_dir = export_reranker(
        chosen,
        os.path.join(out_dir, "reranker"),
        hyper_parameters=hparams,
        trained_on=trained_on,
        metrics={"best_" + BEST_METRIC: best_score, "validation_at_best": at_best},
        decision=choice,
        decision_evidence=evidence,
    )
    if not run.keep_checkpoints:  # the export is complete: it needs none of these any more
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        if os.path.exists(step0):
            os.remove(step0)
    summary = {
        "data": describe(rerank_data),
        "steps": trainer.global_step,
        "seconds": round(seconds, 2),
        "accelerator": accelerator,
        "precision": precision,
        "strategy": run.strategy,
        "world_size": trainer.world_size,
        "best_checkpoint": chosen,
        "best_gain_recovered": best_score,
        "decision": choice,
        "decision_evidence": evidence,
        "validation_at_best": at_best,
        "last_validation": metrics,
        "reranker": export_dir,
        "config": {
            "encoder": asdict(encoder),
            "loader": asdict(loader),
            "optim": asdict(optim),
            "run": asdict(run),
            "abstain": abstain,
            "bm25_prior": bm25_prior,
            "seed": seed,
            "data": data,
        },
    }
    write_text_atomic(os.path.join(out_dir, "summary.json"), json.dumps(summary, indent=2))
    log_final_summary(loggers, summary)
    return summary
