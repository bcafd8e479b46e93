"""The line that starts each stage of `ralm run`/`ralm demo`: its place in the run, the time so far, and a
time left only where finished stages give a basis for every stage still to come."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ralm.pipeline.scale import QUICK
from ralm.pipeline.stage_progress import StageProgress, eval_per_data_gen_input, eval_set_size

KEYS = ["index", "data-gen", "train seed 0", "train seed 1", "eval related", "eval unrelated"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run(progress: StageProgress, clock: Clock, key: str, seconds: float) -> str:
    line = progress.start(key)
    clock.now += seconds
    progress.finish(key, seconds)
    return line


def test_time_left_is_said_only_with_a_basis_and_is_a_lower_bound_until_every_kind_has_one():
    clock = Clock()
    progress = StageProgress("run", 0.0, eval_ratio=0.5, keys=KEYS, clock=clock)
    lines = [_run(progress, clock, key, s) for key, s in zip(KEYS, [10, 100, 200, 220, 80, 70], strict=True)]
    assert lines == [
        "[run] [stage 1/6] index: 0s elapsed, time left unknown (index, data-gen, train, eval not timed yet)",
        "[run] [stage 2/6] data-gen: 10s elapsed, time left unknown (data-gen, train, eval not timed yet)",
        # the eval sets from data-gen's seconds per LM input (0.5 x 100 s each); the seeds not yet
        "[run] [stage 3/6] train seed 0: 1m50s elapsed, over ~1m40s left (train not timed yet)",
        "[run] [stage 4/6] train seed 1: 5m10s elapsed, ~5m00s left",
        "[run] [stage 5/6] eval related: 8m50s elapsed, ~1m40s left",
        # a measured eval set replaces the cost model's estimate
        "[run] [stage 6/6] eval unrelated: 10m10s elapsed, ~1m20s left",
    ]


def test_a_stage_outside_the_plan_joins_the_count_untimed():
    clock = Clock()
    progress = StageProgress("demo", 0.0, eval_ratio=None, keys=["eval"], clock=clock)
    _run(progress, clock, "eval", 90)
    assert progress.start("bf16 check") == (
        "[demo] [stage 2/2] bf16 check: 1m30s elapsed, time left unknown (bf16 check not timed yet)"
    )


def test_without_eval_tokens_no_eval_estimate_comes_from_data_gen():
    clock = Clock()
    progress = StageProgress("run", 0.0, eval_ratio=None, keys=["data-gen", "eval"], clock=clock)
    _run(progress, clock, "data-gen", 60)
    assert progress.start("eval").endswith("time left unknown (eval not timed yet)")


def test_the_cost_model_matches_the_quick_demo_stage_times():
    # README, quick demo: data-gen 88 s, eval sets 81 s and 82 s on the same machine.
    assert 0.8 < eval_per_data_gen_input(QUICK) * 88 / 81 < 1.2
    assert eval_per_data_gen_input(replace(QUICK, eval_tokens=None)) is None


def test_a_larger_eval_set_is_estimated_by_its_windows():
    """The full demo's related set scores 16,384 tokens, the others 4,096: after the unrelated set's 100 s,
    the related one is estimated at 100 s x (16,384 − 512) / (4,096 − 512) = 100 x 496 / 112 s, and a
    measured related set gives the others its seconds per window."""
    settings = replace(QUICK, eval_tokens=4096, max_length=512, stride=32, related_eval_tokens=16384)
    sizes = {key: eval_set_size(settings, key.split()[1]) for key in ("eval related", "eval unrelated")}
    assert sizes == {"eval related": pytest.approx(496 / 112), "eval unrelated": 1.0}
    clock = Clock()
    keys = ["eval unrelated", "eval related"]
    progress = StageProgress("demo", 0.0, eval_ratio=None, keys=keys, clock=clock, sizes=sizes)
    _run(progress, clock, "eval unrelated", 100)
    assert progress.estimate("eval related") == pytest.approx(100 * 496 / 112)
    first_related = StageProgress("demo", 0.0, eval_ratio=None, keys=keys[::-1], clock=clock, sizes=sizes)
    _run(first_related, clock, "eval related", 443)
    assert first_related.estimate("eval unrelated") == pytest.approx(443 * 112 / 496)
