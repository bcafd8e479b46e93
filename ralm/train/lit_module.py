"""The LightningModule: cross-encoder scores, the configured loss, AdamW with linear warmup and decay.

Validation accumulates ``SelectionSums`` (top-1 agreement with the LM's best candidate, LM log-prob
of the pick against BM25's top-1 and the oracle), adds them across processes, and logs
``val/gain_recovered``, the metric the best checkpoint is chosen by.
"""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
from transformers import get_linear_schedule_with_warmup

from ralm.rerank.export_record import ANCHORS
from ralm.rerank.model import load_cross_encoder, output_head, zero_output_head
from ralm.train.batch import RankBatch, scatter_scores
from ralm.train.losses import rank_target_loss, rerank_loss
from ralm.train.metrics import SelectionSums, per_prefix_logprobs, selection_sums

SCALAR_PARAMETERS = ("prior_weight", "abstain_bias", "abstain_weight", "zero_shot_weight", "zero_shot_bias")


def gather_rows(rows: list[torch.Tensor]) -> torch.Tensor:
    """This process's per-prefix rows, concatenated with every other process's (ranks may differ in size)."""
    local = torch.cat(rows).cpu() if rows else torch.zeros(0, 3, dtype=torch.float64)
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return local
    parts: list = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(parts, local)
    return torch.cat(parts)


class RerankerModule(pl.LightningModule):
    """Trains ``f(prefix, passage)`` so that ``softmax_i f`` puts its mass where the frozen LM does best."""

    def __init__(
        self,
        encoder_name: str,
        *,
        loss: str = "marginal",
        temperature: float = 1.0,
        rank_weight: float = 0.0,
        rank_temperature: float = 1.0,
        lr: float = 1e-5,
        weight_decay: float = 0.01,
        warmup_steps: int = 1000,
        max_steps: int = 10_000,
        gradient_checkpointing: bool = False,
        attention_dropout: float | None = None,
        abstain: bool = False,
        max_length: int = 512,
        max_prefix_tokens: int = 256,
        bm25_prior: bool = False,
        prior_lr: float = 1e-2,
        head_lr: float | None = None,
        bm25_top_mean: float = 0.0,
        bm25_top_std: float = 1.0,
        abstain_anchor: str = "zero",
        abstain_init: tuple[float, float] | None = None,
        zero_shot_prior: bool = False,
        zero_shot_init: tuple[float, float] | None = None,
    ):
        super().__init__()
        # Stored in every checkpoint: resuming checks them, export writes them to ralm_reranker.json.
        self.save_hyperparameters()
        self.encoder = load_cross_encoder(
            encoder_name, gradient_checkpointing=gradient_checkpointing, attention_dropout=attention_dropout
        )
        # from_pretrained returns eval mode; Lightning keeps a module's mode, and dropout belongs in training.
        self.encoder.train()
        # Score = f(x, d) + w * z(BM25): with f's head zeroed and w = 1 the untrained model ranks exactly
        # like BM25, so a few steps on little data refine BM25 instead of starting from a random ranking.
        self.prior_weight: torch.nn.Parameter | None = None
        self.abstain_bias: torch.nn.Parameter | None = None
        self.abstain_weight: torch.nn.Parameter | None = None
        if bm25_prior:
            zero_output_head(self.encoder)
            # Shape (1,), not (): DeepSpeed's parameter broadcast views every parameter as bytes, which a
            # 0-dim tensor cannot be (checkpoints of 0-dim scalars are reshaped on load).
            self.prior_weight = torch.nn.Parameter(torch.ones(1))
            if abstain:
                # The empty passage scores f(x, "") + b + c * t, t the prefix's best BM25 score standardised
                # over the training prefixes: how strongly the best passage matches is the feature that can
                # say when a passage helps (data-gen's summary measures BM25's gain by band of that score:
                # bench/RESULTS.md, "When BM25's passage helps"). At b = c = 0 the untrained model still
                # ranks like BM25: BM25's top-1 has z > 0 whenever the scores differ (and wins ties, being
                # first), so the empty passage (score 0) only wins once training moves f, b or c.
                # anchor "top" (ralm train's): the empty passage also gets the top-1's prior w * z_top, so
                # b + c * t is the margin of abstaining over BM25's top-1 and "no passage when t < T" is
                # b = k (T - mean) / std, c = -k, exactly (ralm.train.scalar_init); "zero": the earlier
                # models, whose empty passage had no prior term (read from their checkpoints).
                if abstain_anchor not in ANCHORS:
                    raise ValueError(f"abstain_anchor {abstain_anchor!r}: expected one of {ANCHORS}")
                bias, slope = abstain_init or (0.0, 0.0)
                self.abstain_bias = torch.nn.Parameter(torch.full((1,), float(bias)))
                self.abstain_weight = torch.nn.Parameter(torch.full((1,), float(slope)))
        self.zero_shot_weight: torch.nn.Parameter | None = None
        self.zero_shot_bias: torch.nn.Parameter | None = None
        if zero_shot_prior:
            if bm25_prior:
                raise ValueError("zero_shot_prior and bm25_prior are two starts: choose one")
            # The stacked reranker: score = f(x, d) + a * log p(y' | [d; x]) for a passage and
            # f(x, "") + a * log p(y' | x) + b for the empty one. With f's head zeroed, a > 0 and b = a * M
            # the untrained model IS the zero-shot rule that abstains below a y' gain of M
            # (``zero-shot-above``; without --abstain, ``zero-shot``): training learns a correction of the
            # LM's own rerank (ralm.train.scalar_init.zero_shot_start fits a and M on the training prefixes).
            zero_output_head(self.encoder)
            weight, bias = zero_shot_init or (1.0, 0.0)
            self.zero_shot_weight = torch.nn.Parameter(torch.full((1,), float(weight)))
            if abstain:
                self.zero_shot_bias = torch.nn.Parameter(torch.full((1,), float(bias)))
        self._val_sums = SelectionSums()
        self._val_loss_sum = 0.0
        self._val_rows: list[torch.Tensor] = []
        self.val_per_prefix: torch.Tensor | None = None
        """(prefixes, 3) after each validation: log-prob given the pick, BM25 top-1, no passage."""
        self._pending_rng: dict | None = None

    def forward(self, batch: RankBatch) -> torch.Tensor:
        """Scores on the (prefixes, k) grid; padded slots hold MASKED."""
        # one score per real pair, prefix-major
        flat = self.encoder(**batch.encoder_inputs()).logits.squeeze(-1).float()
        scores = scatter_scores(flat, batch.mask)
        if self.prior_weight is not None:
            if not batch.has_bm25:
                raise ValueError(
                    "a module trained with the BM25 prior needs batches with BM25 scores "
                    "(GroupDataset(..., bm25_prior=True))"
                )
            # Padding stays far below every real score: its prior is 0 and MASKED is -1e9.
            scores = scores + self.prior_weight * batch.bm25_prior
        if self.abstain_bias is not None:
            strength = (batch.bm25_top - self.hparams.bm25_top_mean) / self.hparams.bm25_top_std
            empty = self.abstain_bias + self.abstain_weight * strength[:, None]
            if self.hparams.abstain_anchor == "top":  # candidate 0, BM25's top-1, has the group's largest z
                empty = empty + self.prior_weight * batch.bm25_prior[:, :1]
            scores = scores + empty * batch.is_empty.to(scores.dtype)
        if self.zero_shot_weight is not None:
            scores = scores + self._zero_shot_terms(batch)
        return scores

    def _zero_shot_terms(self, batch: RankBatch) -> torch.Tensor:
        """a * y' (the LM's log-prob of the prefix's last tokens under each passage, or none) plus b on the
        empty passage; 0 on padding, whose MASKED score stays far below every real one."""
        rank = batch.rank_logprobs
        if rank is None:
            raise ValueError(
                "a module trained with the zero-shot prior needs batches with y' "
                "(RerankData(zero_shot_prior=True).groups(...))"
            )
        terms = self.zero_shot_weight * torch.where(batch.mask, rank, torch.zeros_like(rank))
        if self.zero_shot_bias is not None:
            terms = terms + self.zero_shot_bias * batch.is_empty.to(terms.dtype)
        return terms

    def _loss(self, scores: torch.Tensor, batch: RankBatch) -> torch.Tensor:
        hp = self.hparams
        loss = rerank_loss(hp.loss, scores, batch.lm_logprobs, batch.mask, hp.temperature)
        if (
            hp.rank_weight > 0 and batch.rank_logprobs is not None
        ):  # training batches carry y' (--rank-weight)
            loss = loss + hp.rank_weight * rank_target_loss(
                scores, batch.rank_logprobs, batch.mask, hp.rank_temperature
            )
        return loss

    def training_step(self, batch: RankBatch, batch_idx: int) -> torch.Tensor:
        loss = self._loss(self(batch), batch)
        n = batch.prefixes
        self.log("train/loss", loss, prog_bar=True, batch_size=n)
        self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=n)
        return loss

    def on_validation_epoch_start(self) -> None:
        self._val_sums, self._val_loss_sum, self._val_rows = SelectionSums(), 0.0, []

    def validation_step(self, batch: RankBatch, batch_idx: int) -> None:
        scores = self(batch)
        self._val_loss_sum += float(self._loss(scores, batch)) * batch.prefixes
        self._val_sums = self._val_sums + selection_sums(
            scores, batch.lm_logprobs, batch.mask, batch.is_empty
        )
        self._val_rows.append(per_prefix_logprobs(scores, batch.lm_logprobs, batch.mask, batch.is_empty))

    def on_validation_epoch_end(self) -> None:
        # Sum over processes before taking ratios: a mean of per-process ratios would be biased.
        local = torch.cat(
            [self._val_sums.as_tensor(), torch.tensor([self._val_loss_sum], dtype=torch.float64)]
        )
        total = self.trainer.strategy.reduce(local.to(self.device), reduce_op="sum").cpu()
        sums = SelectionSums.from_tensor(total[:-1])
        self.val_per_prefix = gather_rows(self._val_rows)
        metrics = sums.metrics()
        metrics["loss"] = float(total[-1]) / max(sums.count, 1.0)
        if not self.hparams.abstain:
            metrics.pop("none_logprob")  # no empty passage in the groups: no no-retrieval log-prob to report
        for name, value in metrics.items():
            # gain_recovered is NaN when BM25's top-1 is always the oracle; 0 ("no gain") keeps
            # checkpoint selection well defined.
            value = value if math.isfinite(value) else 0.0
            self.log(
                f"val/{name}", value, prog_bar=name in ("top1_agreement", "gain_recovered"), sync_dist=False
            )

    def configure_optimizers(self):
        hp = self.hparams
        # No weight decay on biases and LayerNorm weights (the usual BERT fine-tuning recipe).
        # The fresh one-logit head may learn faster (head_lr): zeroed under the BM25 prior, it moves only
        # as fast as its learning rate allows.
        head = {id(p) for p in output_head(self.encoder).parameters()}
        head_lr = hp.head_lr or hp.lr
        groups = {(is_head, decays): [] for is_head in (False, True) for decays in (True, False)}
        for param in self.encoder.parameters():
            if param.requires_grad:
                groups[(id(param) in head, param.dim() >= 2)].append(param)
        groups = [
            {
                "params": params,
                "weight_decay": hp.weight_decay if decays else 0.0,
                "lr": head_lr if is_head else hp.lr,
            }
            for (is_head, decays), params in groups.items()
            if params
        ]
        if self.prior_weight is not None:
            # A scalar of order 1: at the encoder's learning rate (1e-5) it would not move in a short run.
            # No decay either: it would pull the model away from BM25.
            scalars = [self.prior_weight]
            if self.abstain_bias is not None:
                scalars += [self.abstain_bias, self.abstain_weight]
            groups.append({"params": scalars, "weight_decay": 0.0, "lr": hp.prior_lr})
        if self.zero_shot_weight is not None:  # the same reasons: scalars of order 1, decay would pull
            scalars = [p for p in (self.zero_shot_weight, self.zero_shot_bias) if p is not None]
            groups.append({"params": scalars, "weight_decay": 0.0, "lr": hp.prior_lr})
        optimizer = torch.optim.AdamW(groups, lr=hp.lr)
        schedule = get_linear_schedule_with_warmup(optimizer, hp.warmup_steps, hp.max_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # Dropout draws from the global RNG; keeping its state in the checkpoint makes a resumed run
    # reproduce the uninterrupted one exactly.
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["ralm_rng"] = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            checkpoint["ralm_rng"]["cuda"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._pending_rng = checkpoint.get("ralm_rng")
        state = checkpoint.get("state_dict", {})
        old = [name for name in SCALAR_PARAMETERS if name in state and state[name].dim() == 0]
        for name in old:  # saved before the scalars became shape (1,)
            state[name] = state[name].reshape(1)
        if old:  # their AdamW moments too (the only 0-dim moments: every other parameter has dims)
            for optimizer in checkpoint.get("optimizer_states", []):
                for moments in optimizer.get("state", {}).values():
                    for key in ("exp_avg", "exp_avg_sq"):
                        if key in moments and moments[key].dim() == 0:
                            moments[key] = moments[key].reshape(1)

    def on_train_start(self) -> None:
        if self._pending_rng is not None:
            torch.set_rng_state(self._pending_rng["torch"])
            if "cuda" in self._pending_rng and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(self._pending_rng["cuda"])
            self._pending_rng = None
