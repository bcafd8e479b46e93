"""What `ralm train` adds to Lightning's loop, as Lightning callbacks: the checkpoints (best and last), early
stopping (`--patience`), the BM25 fallback, the last validation, and the export of the decided model
(``ralm.train.decision``) with its summary.

Each is a ``Callback`` so the Trainer owns when it runs (rank, resume, the end of fit), and the setup in
``ralm.train.fit`` only wires them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint

from ralm.atomic_files import atomic_path, write_text_atomic
from ralm.rerank.export import export_reranker
from ralm.rerank.export_record import EXPORT_FOLDER, NO_LM_EXPORT_FOLDER
from ralm.train.dataset import RerankData, describe, finite_or_none
from ralm.train.decision import (
    DEFAULT_MARGIN,
    RULE_SENTENCE,
    Decision,
    Selected,
    decide_export,
    step0_selection,
)
from ralm.train.loggers import log_final_summary
from ralm.train.selection import ValidationHistory

BEST_METRIC = "val/gain_recovered"
STEP0_FILE = "step0-bm25.ckpt"
"""The untrained ``--bm25-prior`` model (exactly BM25's ranking): exported when no step beats it."""
ZERO_SHOT_STEP0_FILE = "step0-zero-shot.ckpt"
"""The untrained ``--zero-shot-prior`` model (exactly the zero-shot rule, abstaining below M)."""


def step0_file(output: str, *, bm25_prior: bool, zero_shot_prior: bool) -> str | None:
    """Where a run with a prior keeps its untrained model, which competes in checkpoint selection; None
    without a prior (an untrained head is no rule worth keeping)."""
    if zero_shot_prior:
        return os.path.join(output, ZERO_SHOT_STEP0_FILE)
    return os.path.join(output, STEP0_FILE) if bm25_prior else None


class ValidateAtEnd(Callback):
    """Validate after the last step too when max_steps is not a multiple of val_every."""

    def __init__(self, val_every: int):
        self.val_every = val_every

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        if trainer.global_step >= trainer.max_steps and trainer.global_step % self.val_every:
            trainer.should_stop = True  # Lightning validates once more when asked to stop


def checkpoint_callbacks(ckpt_dir: str, save_every: int) -> tuple[ModelCheckpoint, ModelCheckpoint]:
    """The best checkpoint by gain recovered, and last.ckpt every `save_every` steps (for resuming)."""
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
        every_n_train_steps=save_every,
        save_top_k=0,
        save_last=True,
        save_on_train_epoch_end=True,
    )
    return best, last


def early_stopping(patience: int | None) -> list[Callback]:
    """Stop after `patience` validations without a new best (strictly greater, as ModelCheckpoint keeps one).

    Selection reads the same metric, so stopping changes nothing it picks unless a later validation would
    have been the best: the schedule keeps max_steps' length and every step taken is the full run's."""
    if patience is None:
        return []
    return [EarlyStopping(BEST_METRIC, mode="max", patience=patience, check_on_train_epoch_end=False)]


class StartFallback(Callback):
    """Saves the untrained prior model before the first step of a fresh run: with the BM25 prior it IS
    BM25's ranking (gain recovered exactly 0, or the threshold rule with --abstain), with the zero-shot prior
    the LM's own rule; it competes in selection, so training never exports a model worse than its start on
    the selection prefixes."""

    def __init__(self, path: str, resuming: bool):
        self.path, self.resuming = path, resuming

    def setup(self, trainer: pl.Trainer, module: pl.LightningModule, stage: str) -> None:
        # setup runs before the strategy moves, casts (DeepSpeed bf16, *-true precisions) or shards (ZeRO-3)
        # the parameters: the fallback holds the plain fp32 weights, whole, as the module was built.
        if stage == "fit" and trainer.is_global_zero and not self.resuming:
            state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
            with atomic_path(self.path) as tmp:  # a kill mid-save must not leave a fallback that cannot load
                torch.save({"state_dict": state, "hyper_parameters": dict(module.hparams)}, tmp)


@dataclass
class ExportSettings:
    """What the export needs besides the Trainer: the run's folder, data and settings."""

    out_dir: str
    data: str
    rerank_data: RerankData
    hparams: dict
    hardware: dict
    """The accelerator, precision and strategy resolved at run time (JSON-safe)."""
    config: dict
    """The run's options as given (encoder, loader, optim, run, trainer, flags, seed, data), for
    summary.json."""
    seed: int
    abstain: bool
    step0: str | None
    """The untrained prior model's file (``step0_file``), None without a prior."""
    keep_checkpoints: bool
    loggers: list = field(default_factory=list)
    val_batch_size: int = 32
    """Prefixes per batch when the decision prefixes are scored."""
    start: dict | None = None
    """The fitted start (``ralm.train.scalar_init.threshold_start``; None without prior and abstain)."""
    threshold: float | None = None
    """T of the threshold rule, fitted on the training prefixes (infinite: it never retrieves); None
    without --abstain."""
    margin: float = DEFAULT_MARGIN
    """δ of the promise (``ralm.train.decision``)."""
    max_lm_inputs: int | None = None
    """The most frozen-LM inputs per retrieval an exported rule may read (None: any)."""
    no_lm_export: bool = False
    """Also export the best rule that reads no frozen LM at rerank time, to ``OUTPUT/reranker-no-lm``."""


class ExportDecided(Callback):
    """At the end of fit (rank zero): the checkpoint selection chose (best gain recovered on the selection
    prefixes, the step-0 model included) competes with no retrieval, BM25's top-1 and the threshold rule
    on the decision prefixes, which chose nothing (``ralm.train.decision``: the
    best rule that keeps the promise); the winner is exported to ``OUTPUT/reranker`` (with
    ``--no-lm-export``, the best rule that reads no frozen LM to ``OUTPUT/reranker-no-lm`` too) and
    ``OUTPUT/summary.json`` written (``self.summary``)."""

    def __init__(
        self,
        settings: ExportSettings,
        best: ModelCheckpoint,
        last: ModelCheckpoint,
        history: ValidationHistory,
    ):
        self.settings, self.best, self.last, self.history = settings, best, last, history
        self.summary: dict = {}
        self._started = 0.0

    def setup(self, trainer: pl.Trainer, module: pl.LightningModule, stage: str) -> None:
        self._started = time.perf_counter()  # (process-group and strategy setup included, as before)

    def on_fit_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.is_global_zero:
            self.summary = self._export(trainer, time.perf_counter() - self._started)

    def _selected(self, step0: str | None, device: torch.device) -> Selected:
        """The checkpoint callback's best, with its step and score from the validation history; the step-0
        model (`step0`, the start of a prior) competes too, and wins a tie (it is the simpler)."""
        best = self.best
        score = finite_or_none(float(best.best_model_score)) if best.best_model_score is not None else None
        validations = len(self.history.steps)
        if step0 is not None:
            s = self.settings
            start = step0_selection(
                s.rerank_data, step0, s.hparams, batch_size=s.val_batch_size, device=device
            )
            if start is not None and (score is None or start >= score):
                return Selected(step0, 0, start, validations + 1)
            validations += 1
        return Selected(
            checkpoint=best.best_model_path or None,
            step=self.history.step_at_score(BEST_METRIC, score),
            gain_recovered=score,
            validations=validations,
        )

    def _export(self, trainer: pl.Trainer, seconds: float) -> dict:
        """Decide, export the winner, drop what the export no longer needs, write and log summary.json."""
        s = self.settings
        step0 = s.step0 if s.step0 is not None and os.path.exists(s.step0) else None
        selected = self._selected(step0, trainer.strategy.root_device)
        decision = decide_export(
            s.rerank_data,
            selected,
            s.hparams,
            step0=step0,
            seed=s.seed,
            batch_size=s.val_batch_size,
            device=trainer.strategy.root_device,
            margin=s.margin,
            max_lm_inputs=s.max_lm_inputs,
            threshold=s.threshold,
            no_lm_export=s.no_lm_export,
        )
        at_best = self.history.at_step(decision.evidence["selection"]["step"])
        export_dir = self._write_reranker(decision, at_best, EXPORT_FOLDER)
        if decision.no_lm is not None:  # before the checkpoints go: it may hold the trained weights
            self._write_reranker(decision.no_lm, at_best, NO_LM_EXPORT_FOLDER)
        if not s.keep_checkpoints:  # the export is complete: it needs none of these any more
            shutil.rmtree(os.path.join(s.out_dir, "checkpoints"), ignore_errors=True)
            if step0 is not None:
                os.remove(step0)
        summary = self._summary(trainer, seconds, selected, decision, at_best, export_dir)
        write_text_atomic(os.path.join(s.out_dir, "summary.json"), json.dumps(summary, indent=2))
        log_final_summary(s.loggers, summary)
        return summary

    def _write_reranker(self, decision: Decision, at_best: dict, folder: str) -> str:
        """``OUTPUT/<folder>``: the decided weights (or none) with what they were trained on and why."""
        s, data = self.settings, self.settings.rerank_data
        trained_on = {
            "path": os.path.abspath(s.data),
            "format": data.meta.get("format"),
            "lm": data.meta.get("lm"),
            # How the labels' inputs started (ralm.lm.special_tokens): abstention learned against that
            # no-retrieval row. Absent for an LM whose tokenizer adds no special tokens (both modes agree).
            "special_tokens": data.meta.get("config", {}).get("special_tokens"),
            "train_prefixes": len(data.train_rows),
            "val_prefixes": len(data.val_rows),
            "decision_prefixes": len(data.decision_rows),
        }
        return export_reranker(
            decision.exported,
            os.path.join(s.out_dir, folder),
            hyper_parameters=s.hparams,
            trained_on=trained_on,
            metrics={"best_" + BEST_METRIC: decision.gain_recovered, "validation_at_best": at_best},
            decision=decision.choice,
            decision_evidence=decision.evidence,
            threshold=decision.threshold,
            rank_tokens=data.meta.get("rank_tokens"),
        )

    def _summary(
        self,
        trainer: pl.Trainer,
        seconds: float,
        selected: Selected,
        decision: Decision,
        at_best: dict,
        export_dir: str,
    ) -> dict:
        """summary.json: the run, what selection and the decision chose and why, and the last validation."""
        s = self.settings
        metrics = {
            k: finite_or_none(float(v)) for k, v in trainer.callback_metrics.items() if k.startswith("val/")
        }
        return {
            "data": describe(s.rerank_data),
            "steps": trainer.global_step,
            # --patience ended the run before max_steps (the schedule still had max_steps' length)
            "stopped_early": trainer.global_step < trainer.max_steps,
            "seconds": round(seconds, 2),
            **s.hardware,
            "world_size": trainer.world_size,
            "best_checkpoint": selected.checkpoint,
            "exported_checkpoint": decision.exported,
            "best_gain_recovered": decision.gain_recovered,
            "decision": decision.choice,
            "decision_rule": RULE_SENTENCE,
            "margin": s.margin,
            "threshold": decision.evidence["promise"].get("threshold"),
            "rank_threshold": decision.evidence["promise"].get("rank_threshold"),
            "start": s.start,
            "decision_evidence": decision.evidence,
            "validation_at_best": at_best,
            "last_validation": metrics,
            "reranker": export_dir,
            "no_lm_export": _no_lm_summary(decision.no_lm, s.out_dir),
            "config": s.config,
        }


def _no_lm_summary(decision: Decision | None, out_dir: str) -> dict | None:
    """summary.json's record of the ``--no-lm-export`` decision (its full evidence is in its folder)."""
    if decision is None:
        return None
    return {
        "decision": decision.choice,
        "exported_checkpoint": decision.exported,
        "threshold": decision.threshold,
        "reranker": os.path.join(out_dir, NO_LM_EXPORT_FOLDER),
        "over_budget": decision.evidence["costs"]["over_budget"],
    }
