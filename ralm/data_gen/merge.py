"""Join complete shards into the final dataset in the output folder (``datasets.load_from_disk(output)``).

The merged dataset is saved to a temporary folder and its files moved into the output folder with
``state.json`` (what ``load_from_disk`` opens) moved last and ``ralm_data_gen.json`` marked complete after
it, so a killed merge never leaves something that loads as a finished dataset. Only one process merges:
the one that creates ``.merge.lock`` (a lock left by a dead local process is taken over).
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

from datasets import concatenate_datasets, load_from_disk

from ralm.atomic_files import publish_file, write_json_atomic
from ralm.data_gen.label_statistics import gain_by_bm25_strength, summarize
from ralm.data_gen.metadata import read_json, refuse_if_different
from ralm.data_gen.schema import METADATA_FILE
from ralm.data_gen.shards import SHARD_META, ShardStore, pid_alive, plan_shards
from ralm.errors import RalmInputError

_DATASET_FILES = ("state.json", "dataset_info.json")


def missing_shards(output: Path, config: dict) -> list[str]:
    """Names of the planned shards that are not complete yet."""
    store = ShardStore(output)
    return [
        s.name for s in plan_shards(config["num_examples"], config["num_shards"]) if not store.is_complete(s)
    ]


def _take_lock(lock: Path) -> bool:
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                host, _, pid = lock.read_text().strip().rpartition("-")
            except FileNotFoundError:  # released between our attempt and the read: try again
                continue
            if host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid)):
                lock.unlink(missing_ok=True)  # left by a killed merge on this machine
                continue
            return False
        with os.fdopen(fd, "w") as f:
            f.write(f"{socket.gethostname()}-{os.getpid()}")
        return True
    return False


def merge_shards(output: str | Path, keep_shards: bool = False) -> dict | None:
    """Merge every shard of the run recorded in `output`; return the final metadata, or None if another
    process holds the merge lock."""
    output = Path(output)
    meta_path = output / METADATA_FILE
    if not meta_path.exists():
        raise RalmInputError(f"{meta_path}: not found; is {output} a `ralm data-gen` output folder?")
    lock = output / ".merge.lock"
    if not _take_lock(lock):
        return None
    try:
        # Read under the lock: a process that merged just before us has marked the run complete.
        meta = read_json(meta_path)
        if meta.get("complete"):
            return meta
        config = meta["config"]
        missing = missing_shards(output, config)
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise RalmInputError(
                f"{output}/shards: {len(missing)} shard(s) missing ({shown}); run them first"
            )
        return _merge_locked(output, meta, keep_shards)
    finally:
        lock.unlink(missing_ok=True)


def _merge_locked(output: Path, meta: dict, keep_shards: bool) -> dict:
    config = meta["config"]
    tmp = output / f".merged.tmp-{socket.gethostname()}-{os.getpid()}"
    try:
        store = ShardStore(output)
        shards = plan_shards(config["num_examples"], config["num_shards"])
        parts, pairs, seconds, copies = [], 0, 0.0, 0
        for shard in shards:
            shard_meta = read_json(store.path(shard) / SHARD_META)
            refuse_if_different(store.path(shard) / SHARD_META, config, shard_meta.get("config", {}))
            pairs += shard_meta.get("pairs", 0)
            seconds += shard_meta.get("seconds", 0.0)
            copies += shard_meta.get("candidates_copying_target", 0)
            parts.append(load_from_disk(str(store.path(shard))))
        merged = concatenate_datasets(parts)
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            for name in _DATASET_FILES + tuple(p.name for p in output.glob("data-*.arrow")):
                (output / name).unlink(missing_ok=True)  # files of a merge killed half way
            merged.save_to_disk(str(tmp))
            names = sorted(p.name for p in tmp.iterdir() if p.name != "state.json")
            for name in [*names, "state.json"]:
                publish_file(tmp / name, output / name)
        except OSError as err:
            raise RalmInputError(
                f"{output}: cannot write the merged dataset ({err.strerror or err})"
            ) from None
        stats = summarize(
            merged["lm_logprobs"],
            merged["no_retrieval_logprob"],
            [len(t) for t in merged["no_retrieval_token_logprobs"]],
            k=config.get("k"),
        )
        stats["gain_by_bm25_strength"] = gain_by_bm25_strength(
            merged["bm25_scores"],
            merged["lm_logprobs"],
            merged["no_retrieval_logprob"],
            [len(t) for t in merged["no_retrieval_token_logprobs"]],
        )
        stats["pairs_per_second"] = pairs / seconds if seconds > 0 else float("nan")
        # Training documents --exclude left out (the evaluation documents): none of their prefixes is a row.
        stats["documents_excluded"] = meta.get("excluded", {}).get("excluded", 0)
        # A leak check: candidates that hold 8 consecutive tokens of their prefix's target
        # (retrieval.overlap).
        stats["candidates_copying_target"] = copies
        stats["candidates_copying_target_rate"] = copies / pairs if pairs else 0.0
        meta = {
            **meta,
            "complete": True,
            "merged": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "summary": stats,
        }
        write_json_atomic(output / METADATA_FILE, meta, sort_keys=True, default=str)
        if not keep_shards:
            shutil.rmtree(store.root, ignore_errors=True)
        return meta
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
