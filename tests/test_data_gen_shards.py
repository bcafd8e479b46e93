"""Shard plan, worker assignment, atomic shard files, config-mismatch refusal, and the summary statistics."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ralm.data_gen.label_statistics import summarize
from ralm.data_gen.metadata import config_diff, refuse_if_different
from ralm.data_gen.schema import FEATURES
from ralm.data_gen.shards import ShardStore, check_world, plan_shards, shards_for_worker, worker_from_env
from ralm.errors import RalmInputError
from ralm.retrieval.index_meta import index_fingerprint as index_hash


def _row(i: int) -> dict:
    return {
        "prefix_index": i,
        "doc_id": f"d{i}",
        "position": 32,
        "prefix": "p",
        "target": "t",
        "query": "q",
        "candidate_ids": ["x-0", "y-1"],
        "candidate_doc_ids": ["x", "y"],
        "candidate_texts": ["X\nx", "Y\ny"],
        "bm25_scores": [2.0, 1.0],
        "lm_logprobs": [-1.5, -2.0],
        "lm_token_logprobs": [[-1.0, -0.5], [-1.0, -1.0]],
        "no_retrieval_logprob": -3.0,
        "no_retrieval_token_logprobs": [-1.5, -1.5],
        "lm_rank_logprobs": [-4.0, -5.0],
        "no_retrieval_rank_logprob": -6.0,
    }


@pytest.mark.parametrize("n,count", [(10, 3), (7, 7), (1000, 8), (5, 1)])
def test_plan_shards_matches_array_split(n, count):
    shards = plan_shards(n, count)
    expected = [list(a) for a in np.array_split(np.arange(n), count)]
    assert [list(range(s.start, s.stop)) for s in shards] == expected
    assert [s.name for s in shards][:1] == [f"shard-00000-of-{count:05d}"]


def test_shards_for_worker_round_robin_and_explicit_id():
    shards = plan_shards(100, 5)
    assert [s.index for s in shards_for_worker(shards, None, 1, 2)] == [1, 3]
    assert [s.index for s in shards_for_worker(shards, None, 0, 1)] == [0, 1, 2, 3, 4]
    assert [s.index for s in shards_for_worker(shards, 4, 0, 2)] == [4]
    with pytest.raises(RalmInputError, match="--shard-id"):
        shards_for_worker(shards, 5, 0, 1)
    with pytest.raises(RalmInputError, match="--num-shards"):
        plan_shards(10, 0)


def test_a_launcher_world_that_does_not_divide_the_shards_is_refused_with_the_fix():
    check_world(16, None, 3, 8)  # 2 shards per process
    check_world(None, None, 3, 8)  # unset: data-gen picks a multiple of the world size
    check_world(5, 2, 0, 4)  # one named shard: nothing to divide
    with pytest.raises(
        RalmInputError, match=r"--num-shards 10 does not divide among WORLD_SIZE=8 .*--num-shards 8"
    ):
        check_world(10, None, 0, 8)
    with pytest.raises(RalmInputError, match="RANK=8 is not in 0..7"):
        check_world(None, None, 8, 8)


def test_worker_from_env_reads_torchrun_variables():
    assert worker_from_env({}) == (0, 1)
    assert worker_from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == (3, 4)
    with pytest.raises(RalmInputError, match="RANK"):
        worker_from_env({"RANK": "x"})


def test_config_diff_names_every_differing_field():
    a = {"k": 16, "seed": 0, "s": 4, "lm": "m"}
    b = {"k": 8, "seed": 0, "s": 4, "lm": "n", "extra": 1}
    diffs = config_diff(a, b)
    assert [d.split(":")[0] for d in diffs] == ["extra", "k", "lm"]
    assert "k: found 8, this run 16" in diffs
    with pytest.raises(
        RalmInputError, match=r"ralm_shard.json: made with a different data-gen config \(.*k: found 8"
    ):
        refuse_if_different("x/ralm_shard.json", a, b)


def test_index_hash_ignores_place_and_time_but_not_content():
    meta = {
        "backend": "bm25s",
        "num_passages": 10,
        "passages_sha256": "ab",
        "created": "t1",
        "passages_path": "/a",
    }
    moved = {**meta, "created": "t2", "passages_path": "/b"}
    assert index_hash(meta) == index_hash(moved)
    assert index_hash(meta) != index_hash({**meta, "passages_sha256": "cd"})


def test_shard_store_writes_atomically_and_refuses_other_configs(tmp_path):
    from datasets import load_from_disk

    store = ShardStore(tmp_path)
    store.prepare({"k": 2})
    shard = plan_shards(4, 2)[1]
    store.write(shard, [_row(2), _row(3)], {"config": {"k": 2}, "pairs": 4, "seconds": 1.0})
    assert store.is_complete(shard) and not store.is_complete(plan_shards(4, 2)[0])
    ds = load_from_disk(str(store.path(shard)))
    assert ds.features == FEATURES and ds["prefix_index"] == [2, 3]
    assert json.loads((store.path(shard) / "ralm_shard.json").read_text())["rows"] == 2
    assert [p.name for p in store.root.iterdir()] == [shard.name]  # no temporary left
    with pytest.raises(
        RalmInputError, match=r"shard-00001-of-00002/ralm_shard.json: .*k: found 2, this run 3"
    ):
        ShardStore(tmp_path).prepare({"k": 3})


def test_prepare_removes_temporaries_of_dead_processes_only(tmp_path):
    import socket

    store = ShardStore(tmp_path)
    store.root.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = store.root / f".shard-00000-of-00002.tmp-{socket.gethostname()}-{dead.pid}"
    live = store.root / f".shard-00001-of-00002.tmp-{socket.gethostname()}-{os.getpid()}"
    stale.mkdir()
    live.mkdir()
    store.prepare({})
    assert not stale.exists() and live.exists()


def test_failed_write_leaves_nothing_behind(tmp_path):
    """A real write error from the OS (file size limit: EFBIG, as a full disk gives ENOSPC) mid-shard."""
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from test_rows import ROWS
        from ralm.data_gen.shards import ShardStore, plan_shards
        from ralm.errors import RalmInputError
        store = ShardStore({str(tmp_path / "out")!r})
        store.prepare({{}})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            store.write(plan_shards(1, 1)[0], ROWS, {{"config": {{}}}})
        except RalmInputError as err:
            print("ERROR", err)
        """
    )
    big = {**_row(0), "candidate_texts": ["word " * 5000, "more " * 5000]}
    (tmp_path / "test_rows.py").write_text(f"ROWS = [{big!r}]\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "ERROR" in done.stdout and "cannot write shard" in done.stdout, done.stdout + done.stderr
    assert list((tmp_path / "out" / "shards").iterdir()) == []


def test_summary_against_hand_computation():
    lm = [[-4.0, -2.0, -3.0], [-1.0, -5.0], [], [-2.0, -2.0]]
    none = [-6.0, -1.5, -9.0, -2.5]
    ntok = [4, 2, 4, 1]
    stats = summarize(lm, none, ntok)
    # rows with candidates: best - top1 = 2/4, 0/2, 0/1; best - none = 4/4, 0.5/2, 0.5/1; agree: no, yes, yes
    # (tie)
    assert stats["examples"] == 4 and stats["examples_with_candidates"] == 3
    assert math.isclose(stats["gain_best_over_bm25_top1"], (0.5 + 0 + 0) / 3)
    assert math.isclose(stats["gain_best_over_no_retrieval"], (1.0 + 0.25 + 0.5) / 3)
    assert math.isclose(stats["gain_bm25_top1_over_no_retrieval"], (0.5 + 0.25 + 0.5) / 3)
    assert math.isclose(stats["bm25_top1_is_lm_best"], 2 / 3)
