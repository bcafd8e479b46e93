"""Set up and run reranker training: checks, then a Lightning Trainer whose callbacks do the rest
(``ralm.train.training_callbacks``: BM25 fallback, last validation, the decided export and summary).

Everything cheap is checked first (options in their types, the Trainer settings, the dataset's columns
and rows, a resumed checkpoint's model), so bad input fails in seconds with a one-line ``RalmInputError``,
before any model loads.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback

from ralm.devices import training_precision
from ralm.errors import RalmInputError
from ralm.progress import is_terminal
from ralm.rerank.checkpoints import allowed_checkpoint_types, check_compatible, read_checkpoint
from ralm.rerank.model import load_tokenizer
from ralm.train.datamodule import RerankDataModule
from ralm.train.dataset import RerankData, load_rerank_data, open_dataset
from ralm.train.decision import DEFAULT_MARGIN
from ralm.train.global_batch import with_global_batch
from ralm.train.lit_module import RerankerModule
from ralm.train.log_lines import TrainLogLines
from ralm.train.loggers import build_loggers
from ralm.train.scalar_init import FittedStart, fit_start
from ralm.train.selection import ValidationHistory
from ralm.train.settings import EncoderOptions, LoaderOptions, OptimOptions, RunOptions, trainer_settings
from ralm.train.training_callbacks import (
    ExportDecided,
    ExportSettings,
    StartFallback,
    ValidateAtEnd,
    checkpoint_callbacks,
    early_stopping,
    step0_file,
)


def resolve_hardware(trainer: dict) -> tuple[str, str]:
    """(accelerator, precision) of the Trainer settings, chosen at run time; DeepSpeed without CUDA is
    refused here. Precision None is ralm's rule (``ralm.devices.training_precision``)."""
    has_cuda = torch.cuda.is_available()
    requested = trainer.get("accelerator", "auto")
    accelerator = requested if requested != "auto" else ("gpu" if has_cuda else "cpu")
    if accelerator in ("gpu", "cuda") and not has_cuda:
        raise RalmInputError(f"trainer.accelerator={requested}: no CUDA GPU is visible (use auto or cpu)")
    on_gpu = accelerator in ("gpu", "cuda")
    strategy = trainer.get("strategy", "auto")
    name = strategy if isinstance(strategy, str) else type(strategy).__name__
    if "deepspeed" in name.lower():
        if not on_gpu:
            raise RalmInputError(
                f"trainer.strategy={name}: DeepSpeed needs CUDA GPUs and this run has none "
                "(use strategy 'ddp' on CPU, or a GPU machine)"
            )
        if importlib.util.find_spec("deepspeed") is None:
            raise RalmInputError(
                f"trainer.strategy={name}: DeepSpeed is not installed (pip install 'ralm[deepspeed]')"
            )
    if trainer.get("precision") is not None:
        return accelerator, str(trainer["precision"])
    return accelerator, training_precision(on_gpu)


def resolve_ckpt_path(ckpt_path: str | None, output: str) -> str | None:
    """``last`` is ``OUTPUT/checkpoints/last.ckpt`` (absent: start fresh); other paths must exist."""
    if ckpt_path is None:
        return None
    if ckpt_path == "last":
        last = os.path.join(output, "checkpoints", "last.ckpt")
        if os.path.exists(last):
            return last
        print(f"--ckpt-path last: no {last} yet, starting from scratch")
        return None
    if not os.path.exists(ckpt_path):
        raise RalmInputError(f"ckpt_path={ckpt_path}: no such checkpoint")
    return ckpt_path


NOT_MODULE_ARGUMENTS = {
    "EncoderOptions.name": "it reaches the module as encoder_name (the checkpoint's name for the model)",
    "EncoderOptions.max_pair_tokens": "the module's max_length (the key of checkpoints and exports)",
}
"""Option fields that are deliberately not ``RerankerModule`` keyword arguments under their own name, and
why. Any other field that is not one is an error in ``module_hparams``: dropped, it would change nothing in
the run and be missing from every checkpoint, which records the module's arguments."""


def module_hparams(encoder: EncoderOptions, optim: OptimOptions, **flags) -> dict:
    """``RerankerModule``'s keyword arguments: the option fields and flags of the same names, read off its
    signature (its ``save_hyperparameters()`` records them in every checkpoint). A field it has no argument
    for, or one given twice, is a TypeError naming it, unless ``NOT_MODULE_ARGUMENTS`` lists it."""
    accepted = inspect.signature(RerankerModule.__init__).parameters
    values = {"encoder_name": encoder.name, "max_length": encoder.max_pair_tokens}
    sources = [(type(group).__name__, asdict(group)) for group in (encoder, optim)] + [("flag", flags)]
    for source, fields in sources:
        for name, value in fields.items():
            if f"{source}.{name}" in NOT_MODULE_ARGUMENTS:
                continue
            if name not in accepted or name in values:
                why = "is given twice" if name in values else "is not a keyword argument of RerankerModule"
                raise TypeError(
                    f"{source}.{name} {why}: make it one, or list it in "
                    "ralm.train.fit.NOT_MODULE_ARGUMENTS with the reason it is not"
                )
            values[name] = value
    return values


def build_trainer(
    run: RunOptions, settings: dict, hardware: dict, output: str, loggers: list, callbacks: list[Callback]
) -> pl.Trainer:
    """The Trainer: the trainer group's settings (`trainer_settings`), the hardware resolved at run time,
    and what ralm owns (loggers, callbacks, the folder, validation every run.val_every optimizer steps)."""
    val_every = min(run.val_every, settings["max_steps"])
    bar = settings["enable_progress_bar"] is not False
    # Piped to a file, a bar becomes carriage-return fragments: plain lines instead (ralm.progress).
    log_lines = [TrainLogLines()] if bar and not is_terminal() else []
    quiet_lightning_banners()
    return pl.Trainer(
        **{**settings, **hardware, "enable_progress_bar": bar and is_terminal()},
        val_check_interval=val_every * settings["accumulate_grad_batches"],
        logger=loggers,
        callbacks=[ValidateAtEnd(val_every), *early_stopping(run.patience), *callbacks, *log_lines],
        default_root_dir=output,
    )


LIGHTNING_INFO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.pytorch.accelerators.cuda")
"""Where Lightning's start-up banners come from ("GPU available: ...", "💡 Tip: ... litlogger ..."): its info
messages, which ralm's own summary lines replace. Warnings still show (Lightning's documented way to quiet
its console: raise these loggers' level)."""


def quiet_lightning_banners() -> None:
    """Lightning's info banners off, its warnings kept, except one about its own internals (a deprecation
    inside ``lightning.pytorch.utilities._pytree`` that no caller can act on)."""
    import logging
    import warnings

    for name in LIGHTNING_INFO_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")


def _json_safe(settings: dict) -> dict:
    """The Trainer settings for summary.json (an object given from Python, e.g. a profiler, as its repr)."""
    plain = (str, int, float, bool, type(None), list)
    return {k: v if isinstance(v, plain) else repr(v) for k, v in settings.items()}


def fit_reranker(
    data: str,
    output: str,
    *,
    encoder: EncoderOptions,
    loader: LoaderOptions,
    optim: OptimOptions,
    run: RunOptions,
    trainer: dict | None = None,
    abstain: bool = False,
    bm25_prior: bool = False,
    zero_shot_prior: bool = False,
    ckpt_path: str | None = None,
    seed: int = 0,
    margin: float = DEFAULT_MARGIN,
    max_rerank_lm_inputs: int | None = None,
    no_lm_export: bool = False,
    extra_callbacks: Sequence[Callback] = (),
) -> dict:
    """Train, keep the best checkpoint by gain recovered, export the decided model to ``OUTPUT/reranker``
    (and, with `no_lm_export`, the best rule that reads no frozen LM to ``OUTPUT/reranker-no-lm``);
    returns the summary (empty on ranks other than zero). `trainer`: pl.Trainer keyword arguments over
    ralm's (``ralm.train.settings.TRAINER_DEFAULTS``)."""
    settings = trainer_settings(trainer, optim)
    accelerator, precision = resolve_hardware(settings)
    hardware = {"accelerator": accelerator, "precision": precision, "strategy": settings["strategy"]}
    loader = with_global_batch(loader, settings)
    if bm25_prior and zero_shot_prior:
        raise RalmInputError("--bm25-prior and --zero-shot-prior are two starts of the reranker: give one")
    priors = {"bm25_prior": bm25_prior, "zero_shot_prior": zero_shot_prior}
    rerank_data = _split_rows(data, loader, abstain=abstain, seed=seed, **priors)
    if optim.rank_weight > 0:  # the y' target needs data-gen's ranking columns: refused now, not in a worker
        open_dataset(data, abstain=abstain, rank_target=True)
    hparams = module_hparams(encoder, optim, abstain=abstain, **priors)
    fitted = fit_start(data, rerank_data, optim, abstain=abstain, **priors)
    hparams.update(fitted.hparams)
    resume = _checked_resume(ckpt_path, output, hparams)
    os.makedirs(output, exist_ok=True)
    loggers = build_loggers(output, run)

    # Models load only now, after every cheap check above has passed.
    pl.seed_everything(seed, workers=True, verbose=False)
    tokenizer = load_tokenizer(encoder.name)
    module = RerankerModule(**hparams)
    datamodule = _datamodule(rerank_data, tokenizer, encoder, loader, optim, settings, seed)
    # The step-0 model sits beside, not in, checkpoints/: ModelCheckpoint warns about a non-empty folder.
    best, last = checkpoint_callbacks(os.path.join(output, "checkpoints"), run.save_every)
    history = ValidationHistory()
    flags = {
        "abstain": abstain,
        **priors,
        "seed": seed,
        "margin": margin,
        "max_rerank_lm_inputs": max_rerank_lm_inputs,
        "no_lm_export": no_lm_export,
    }
    config = _run_config(data, encoder, loader, optim, run, settings, flags)
    step0 = step0_file(output, **priors)
    export_settings = _export_settings(
        output, rerank_data, module, hardware, config, run, loader, loggers, fitted, step0
    )
    export = ExportDecided(export_settings, best, last, history)
    fallback = [StartFallback(step0, resuming=resume is not None)] if step0 else []
    callbacks = [best, last, history, *fallback, *extra_callbacks, export]
    fitter = build_trainer(run, settings, hardware, output, loggers, callbacks)
    started = time.time()
    with allowed_checkpoint_types():  # Lightning's own load of a resumed checkpoint: data, no code
        fitter.fit(module, datamodule=datamodule, ckpt_path=resume)
    if not fitter.is_global_zero:
        return {}
    return export.summary or _summary_written_since(output, started)


def _split_rows(
    data: str, loader: LoaderOptions, *, abstain: bool, bm25_prior: bool, zero_shot_prior: bool, seed: int
) -> RerankData:
    """The dataset's rows, checked and split into training, validation and decision prefixes."""
    return load_rerank_data(
        data,
        abstain=abstain,
        val_fraction=loader.val_fraction,
        seed=seed,
        max_val_prefixes=loader.max_val_prefixes,
        bm25_prior=bm25_prior,
        zero_shot_prior=zero_shot_prior,
        decision_fraction=loader.decision_fraction,
    )


def _checked_resume(ckpt_path: str | None, output: str, hparams: dict) -> str | None:
    """The checkpoint to resume from, refused now if its model is not this run's (before any model loads),
    or if it holds objects other than tensors and plain containers (``read_checkpoint``): Lightning then
    loads a file that unpickles to data only."""
    resume = resolve_ckpt_path(ckpt_path, output)
    if resume is not None and os.path.isfile(resume):  # a DeepSpeed checkpoint is a folder of shards
        check_compatible(resume, read_checkpoint(resume).get("hyper_parameters", {}), hparams)
    return resume


def _datamodule(
    rerank_data: RerankData,
    tokenizer,
    encoder: EncoderOptions,
    loader: LoaderOptions,
    optim: OptimOptions,
    settings: dict,
    seed: int,
) -> RerankDataModule:
    """Batches of tokenized pairs; `total_batches` counts micro-batches (optimizer steps x accumulation)."""
    return RerankDataModule(
        rerank_data,
        tokenizer,
        batch_size=loader.batch_size,
        val_batch_size=loader.val_batch_size,
        total_batches=optim.max_steps * settings["accumulate_grad_batches"],
        max_length=encoder.max_pair_tokens,
        max_prefix_tokens=encoder.max_prefix_tokens,
        num_workers=loader.num_workers,
        seed=seed,
        rank_target=optim.rank_weight > 0,
    )


def _run_config(
    data: str,
    encoder: EncoderOptions,
    loader: LoaderOptions,
    optim: OptimOptions,
    run: RunOptions,
    settings: dict,
    flags: dict,
) -> dict:
    """The run's options as given, for summary.json (`flags`: the export's settings, by their names)."""
    return {
        "encoder": asdict(encoder),
        "loader": asdict(loader),
        "optim": asdict(optim),
        "run": asdict(run),
        "trainer": _json_safe(settings),
        **flags,
        "data": data,
    }


def _export_settings(
    output: str,
    rerank_data: RerankData,
    module: RerankerModule,
    hardware: dict,
    config: dict,
    run: RunOptions,
    loader: LoaderOptions,
    loggers: list,
    fitted: FittedStart,
    step0: str | None,
) -> ExportSettings:
    """What the export callback needs; the data, flags, seed and margin are the run's, as `config`
    (``_run_config``) records them; `step0` the start's file (``step0_file``)."""
    return ExportSettings(
        out_dir=output,
        data=config["data"],
        rerank_data=rerank_data,
        hparams=dict(module.hparams),
        hardware=_json_safe(hardware),
        config=config,
        seed=config["seed"],
        abstain=config["abstain"],
        step0=step0,
        keep_checkpoints=run.keep_checkpoints,
        loggers=loggers,
        val_batch_size=loader.val_batch_size,
        start=fitted.start,
        threshold=fitted.threshold,
        margin=config["margin"],
        max_lm_inputs=config["max_rerank_lm_inputs"],
        no_lm_export=config["no_lm_export"],
    )


def _summary_written_since(output: str, started: float) -> dict:
    """Under ddp_spawn the export ran in the spawned rank-0 worker: its summary.json, if this run wrote it."""
    path = os.path.join(output, "summary.json")
    if os.path.exists(path) and os.path.getmtime(path) >= started:
        with open(path) as f:
            return json.load(f)
    return {}
