"""The LightningDataModule: train/validation groups (split by document), tokenized in the loader workers."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from transformers import PreTrainedTokenizerBase

from ralm.train.batch import GroupCollator
from ralm.train.dataset import RerankData
from ralm.train.sampling import ShardBatchSampler, StreamBatchSampler


class _StepLoader(torch.utils.data.DataLoader):
    """A DataLoader that tells Lightning it resumes mid-run correctly.

    The position is not kept here: ``train_dataloader`` recomputes it from the restored global step
    (an iterator-side count would be off by Lightning's one-batch prefetch). The empty state only
    marks the loader as resumable, which is true.
    """

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        pass


class RerankDataModule(pl.LightningDataModule):
    """Batches (``RankBatch``) of ``batch_size`` whole candidate groups per process; padding to the batch's
    longest pair."""

    def __init__(
        self,
        data: RerankData,
        tokenizer: PreTrainedTokenizerBase,
        *,
        batch_size: int,
        val_batch_size: int,
        total_batches: int,
        max_length: int,
        max_prefix_tokens: int,
        num_workers: int = 0,
        seed: int = 0,
        rank_target: bool = False,
    ):
        """`rank_target`: training groups also carry the y' log-probs (``--rank-weight`` > 0)."""
        super().__init__()
        self.data, self.rank_target = data, rank_target
        self.collate = GroupCollator(tokenizer, max_length=max_length, max_prefix_tokens=max_prefix_tokens)
        self.batch_size, self.val_batch_size = batch_size, val_batch_size
        self.total_batches, self.num_workers, self.seed = total_batches, num_workers, seed

    def _rank_world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _loader(self, dataset, batch_sampler) -> _StepLoader:
        return _StepLoader(
            dataset,
            batch_sampler=batch_sampler,
            collate_fn=self.collate,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            # An own generator: creating a loader iterator must not draw from the global RNG, or a
            # resumed run's dropout masks would drift from the uninterrupted run's.
            generator=torch.Generator().manual_seed(self.seed),
        )

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        rank, world = self._rank_world()
        # Lightning restores global_step before asking for the loader: skip what was already trained on.
        start = (
            self.trainer.global_step * self.trainer.accumulate_grad_batches if self.trainer is not None else 0
        )
        sampler = StreamBatchSampler(
            len(self.data.train_rows),
            self.batch_size,
            self.total_batches,
            seed=self.seed,
            rank=rank,
            world_size=world,
            start=start,
        )
        return self._loader(self.data.groups(self.data.train_rows, rank_target=self.rank_target), sampler)

    def val_dataloader(self) -> torch.utils.data.DataLoader:
        rank, world = self._rank_world()
        sampler = ShardBatchSampler(len(self.data.val_rows), self.val_batch_size, rank=rank, world_size=world)
        return self._loader(self.data.groups(self.data.val_rows), sampler)
