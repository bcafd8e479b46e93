"""The global batch: prefixes per optimizer step, summed over processes, whatever the world size.

The paper trains with 32 prefixes a step. ``loader.batch_size`` is per process and micro-batch, so under
8-GPU DDP a batch of 32 is 256 prefixes a step. With ``loader.global_batch_size`` set, each process gets
``global / world`` prefixes a step, in micro-batches of at most ``loader.batch_size`` (the rest is gradient
accumulation): 32 = 8 GPUs x 4, or 1 GPU x 32, or 1 GPU x 16 x 2 accumulation when only 16 fit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

import torch

from ralm.errors import RalmInputError
from ralm.train.settings import LoaderOptions


def planned_world_size(trainer: Mapping, env: Mapping[str, str] | None = None) -> int:
    """Processes the Trainer will start (`trainer`: its settings): WORLD_SIZE under a launcher, else
    devices x nodes."""
    env = os.environ if env is None else env
    if env.get("WORLD_SIZE"):
        return int(env["WORLD_SIZE"])
    devices = trainer.get("devices", "auto")
    if devices in ("auto", -1, "-1"):
        on_gpu = trainer.get("accelerator", "auto") in ("auto", "gpu", "cuda") and torch.cuda.is_available()
        count = torch.cuda.device_count() if on_gpu else 1
    elif isinstance(devices, int):
        count = devices
    elif isinstance(devices, str) and "," in devices:
        count = len([d for d in devices.split(",") if d.strip()])
    elif isinstance(devices, (list, tuple)):
        count = len(devices)
    else:
        count = int(devices)
    return max(1, count) * max(1, trainer.get("num_nodes", 1))


def split_global_batch(global_batch: int, max_micro_batch: int, world_size: int) -> tuple[int, int]:
    """(micro-batch per process, accumulation steps) whose product times `world_size` is `global_batch`."""
    if global_batch % world_size:
        raise RalmInputError(
            f"loader.global_batch_size={global_batch} does not divide among {world_size} processes: "
            f"use a multiple of {world_size}"
        )
    per_process = global_batch // world_size
    micro = min(max_micro_batch, per_process)
    while per_process % micro:  # the largest micro-batch that fits and divides the per-process share
        micro -= 1
    return micro, per_process // micro


def with_global_batch(loader: LoaderOptions, settings: dict) -> LoaderOptions:
    """`loader` with its micro-batch for a given global batch size; the accumulation it needs is written
    into the Trainer `settings` (the two are one choice: micro-batch x accumulation x world size)."""
    if loader.global_batch_size is None:
        return loader
    micro, settings["accumulate_grad_batches"] = split_global_batch(
        loader.global_batch_size, loader.batch_size, planned_world_size(settings)
    )
    return replace(loader, batch_size=micro)
