"""Training progress in a log file: what Lightning's bar would show, as one line every few seconds.

Lightning's tqdm bar redraws with carriage returns, which a piped log (``ralm train > log``) turns into
fragments, and with the bar off a long training is silent. This callback, used when stderr is not a
terminal, prints ``train: 40/150 step (27%), 0.6 step/s, 3m05s left, loss 2.31`` through
``ralm.progress.LineProgress`` and one line per validation.
"""

from __future__ import annotations

import sys

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

from ralm.progress import LineProgress

_SHOWN = ("val/gain_recovered", "val/top1_agreement", "val/retrieval_rate")


class TrainLogLines(Callback):
    def __init__(self, every: float | None = None):
        self.every = every
        self.bar: LineProgress | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return  # one process speaks for all under DDP
        self.bar = LineProgress(
            trainer.max_steps, desc="train", unit="step", initial=trainer.global_step, every=self.every
        )

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        if self.bar is None or trainer.global_step == self.bar.n:
            return  # within gradient accumulation: no optimizer step yet
        loss = trainer.callback_metrics.get("train/loss")
        if loss is not None:
            self.bar.set_postfix_str(f"loss {float(loss):.3f}")
        self.bar.update(trainer.global_step - self.bar.n)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        shown = [
            f"{key[4:]} {float(trainer.callback_metrics[key]):.3f}"
            for key in _SHOWN
            if key in trainer.callback_metrics
        ]
        print(f"validation at step {trainer.global_step}: " + ", ".join(shown), file=sys.stderr, flush=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.bar is not None:
            self.bar.close()
