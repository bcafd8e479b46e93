"""Shards: contiguous slices of the prefix sample, each written atomically and skipped once complete.

Layout under the output folder::

    shards/shard-00003-of-00008/          a saved `datasets` dataset + ralm_shard.json (complete)
    shards/.shard-00003-of-00008.tmp-HOST-PID/   being written by process PID on HOST

A shard directory appears under its final name only by a rename (``atomic_files.publish_first``) of a fully
written temporary directory, so a killed run leaves either a complete shard or a temporary one (removed on the
next run once its process is gone), never a half shard under a final name.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from datasets import Dataset

from ralm.atomic_files import publish_first, write_json_atomic
from ralm.data_gen.metadata import read_json, refuse_if_different
from ralm.data_gen.schema import FEATURES
from ralm.errors import RalmInputError

SHARD_META = "ralm_shard.json"


@dataclass(frozen=True)
class Shard:
    """Prefix indices ``start <= i < stop`` of the sample; shard ``index`` of ``count``."""

    index: int
    count: int
    start: int
    stop: int

    @property
    def name(self) -> str:
        return f"shard-{self.index:05d}-of-{self.count:05d}"


def plan_shards(num_examples: int, num_shards: int) -> list[Shard]:
    """Cut ``range(num_examples)`` into `num_shards` contiguous slices whose sizes differ by at most one."""
    if num_shards < 1:
        raise RalmInputError(f"--num-shards: must be at least 1, got {num_shards}")
    base, extra = divmod(num_examples, num_shards)
    shards, start = [], 0
    for i in range(num_shards):
        stop = start + base + (1 if i < extra else 0)
        shards.append(Shard(i, num_shards, start, stop))
        start = stop
    return shards


def worker_from_env(env: Mapping[str, str]) -> tuple[int, int]:
    """(rank, world size) under torchrun (RANK/WORLD_SIZE); (0, 1) for a plain process."""
    try:
        return int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1))
    except ValueError:
        raise RalmInputError(
            f"RANK/WORLD_SIZE: not integers ({env.get('RANK')!r}, {env.get('WORLD_SIZE')!r})"
        ) from None


def check_world(num_shards: int | None, shard_id: int | None, rank: int, world_size: int) -> None:
    """Refuse, before any model loads, a launcher layout that would leave processes unevenly loaded."""
    if not 0 <= rank < world_size:
        raise RalmInputError(f"RANK={rank} is not in 0..{world_size - 1} (WORLD_SIZE={world_size})")
    if shard_id is None and num_shards and world_size > 1 and num_shards % world_size:
        fix = world_size * max(1, round(num_shards / world_size))
        raise RalmInputError(
            f"--num-shards {num_shards} does not divide among WORLD_SIZE={world_size} processes: "
            f"use a multiple of {world_size} (e.g. --num-shards {fix}) or leave it unset"
        )


def shards_for_worker(shards: list[Shard], shard_id: int | None, rank: int, world_size: int) -> list[Shard]:
    """The shards this process runs: the one named by --shard-id, else every `world_size`-th from `rank`."""
    if shard_id is not None:
        if not 0 <= shard_id < len(shards):
            raise RalmInputError(
                f"--shard-id: {shard_id} is not in 0..{len(shards) - 1} (--num-shards {len(shards)})"
            )
        return [shards[shard_id]]
    if not 0 <= rank < world_size:
        raise RalmInputError(f"RANK={rank} is not in 0..{world_size - 1} (WORLD_SIZE={world_size})")
    return shards[rank::world_size]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


class ShardStore:
    """The ``shards/`` folder of one output: which shards are complete, and writing new ones atomically."""

    def __init__(self, output: Path) -> None:
        self.root = Path(output) / "shards"

    def path(self, shard: Shard) -> Path:
        return self.root / shard.name

    def complete(self) -> list[Path]:
        return sorted(p for p in self.root.glob("shard-*") if (p / SHARD_META).exists())

    def is_complete(self, shard: Shard) -> bool:
        return (self.path(shard) / SHARD_META).exists()

    def prepare(self, config: dict) -> None:
        """Create the folder, refuse shards of another config, remove temporaries of dead local processes."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RalmInputError(f"{self.root}: cannot create the shards folder ({err.strerror})") from None
        for done in self.complete():
            refuse_if_different(done / SHARD_META, config, read_json(done / SHARD_META).get("config", {}))
        host = socket.gethostname()
        for tmp in self.root.glob(".shard-*.tmp-*"):
            tmp_host, _, pid = tmp.name.rsplit(".tmp-", 1)[1].rpartition("-")
            if tmp_host == host and pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(tmp, ignore_errors=True)

    def write(self, shard: Shard, rows: list[dict], meta: dict) -> Path:
        """Save `rows` as shard `shard` (temp folder, then rename); OS errors leave nothing behind."""
        final = self.path(shard)
        tmp = self.root / f".{shard.name}.tmp-{socket.gethostname()}-{os.getpid()}"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            Dataset.from_list(rows, features=FEATURES).save_to_disk(str(tmp))
            write_json_atomic(
                tmp / SHARD_META,
                {**meta, "rows": len(rows), "start": shard.start, "stop": shard.stop},
                sort_keys=True,
                default=str,
            )
            # Another process that finished the same shard first wrote identical rows: its copy is kept.
            publish_first(tmp, final, lambda _final: self.is_complete(shard))
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            reason = err.strerror or str(err)
            raise RalmInputError(f"{final}: cannot write shard ({reason}); nothing was left behind") from None
        return final
