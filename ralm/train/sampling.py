"""Batch samplers whose order is a pure function of (seed, position): resuming needs no saved iterator.

Training reads one long stream of prefix indices: pass p over the training set is the permutation
drawn from ``seed + p``. Micro-batch j of the whole run is stream positions ``[j·W·B, (j+1)·W·B)``
(W processes, B prefixes per process), and rank r takes its B-sized slice. A run resumed after j
micro-batches starts at micro-batch j and sees exactly the batches the uninterrupted run would have.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch


class StreamBatchSampler(torch.utils.data.Sampler[list[int]]):
    """This rank's micro-batches of the run, from ``start`` on; ``len`` counts the whole run.

    ``len`` includes the batches consumed before a resume because Lightning restores its batch counter
    and stops the epoch when that counter reaches ``len``.
    """

    def __init__(
        self,
        n_items: int,
        batch_size: int,
        total_batches: int,
        *,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        start: int = 0,
    ):
        if n_items < 1 or batch_size < 1:
            raise ValueError(
                f"need items and a positive batch size, got n_items={n_items}, batch_size={batch_size}"
            )
        self.n_items, self.batch_size, self.total_batches = n_items, batch_size, total_batches
        self.seed, self.rank, self.world_size, self.start = seed, rank, world_size, start
        self._pass, self._perm = -1, np.empty(0, dtype=np.int64)

    def _item(self, position: int) -> int:
        p, offset = divmod(position, self.n_items)
        if p != self._pass:
            self._pass, self._perm = p, np.random.default_rng(self.seed + p).permutation(self.n_items)
        return int(self._perm[offset])

    def batch(self, j: int) -> list[int]:
        """Item indices of this rank's part of micro-batch ``j``."""
        first = (j * self.world_size + self.rank) * self.batch_size
        return [self._item(pos) for pos in range(first, first + self.batch_size)]

    def __iter__(self) -> Iterator[list[int]]:
        for j in range(self.start, self.total_batches):
            yield self.batch(j)

    def __len__(self) -> int:
        return self.total_batches


class ShardBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Validation: rank r gets items r, r+W, ... in order, batched; no padding, so no item counts twice."""

    def __init__(self, n_items: int, batch_size: int, *, rank: int = 0, world_size: int = 1):
        self.items = list(range(rank, n_items, world_size))
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(0, len(self.items), self.batch_size):
            yield self.items[i : i + self.batch_size]

    def __len__(self) -> int:
        return -(-len(self.items) // self.batch_size)
