"""The demo's report and its bf16 check take what the eval ran with from the eval's own results: the LM input
length capped at the LM's context (``LMOptions.input_length``), not the scale's uncapped max_length, and the
dtype the LM ran in, whatever name chose it (``fastest`` and ``auto`` are bf16 on a GPU that computes it).

The LM here has 96 positions and the scale asks for 128-token inputs, so every eval input is 96 tokens."""

# ruff: noqa: F811  (session fixtures imported from ppl_fixtures are used as arguments)

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from ppl_fixtures import build_bm25_index, build_tiny_lm

from ralm.pipeline.dtype_check import DTYPE_CHECK_WINDOWS, check_dtype, resolved_dtype
from ralm.pipeline.plan import eval_stage, lm_options
from ralm.pipeline.report import build_report
from ralm.pipeline.scale import QUICK
from ralm.pipeline.stages import StageRunner
from ralm.retrieval.options import RetrievalOptions

CONTEXT = 96
SCALE = replace(
    QUICK, eval_tokens=320, stride=16, query_tokens=16, max_length=128, max_passage_tokens=32, k=2
)


@pytest.fixture(scope="module")
def short_lm(tiny_lm_dir, tmp_path_factory):
    return build_tiny_lm(tiny_lm_dir, tmp_path_factory.mktemp("short_lm"), n_positions=CONTEXT)


@pytest.fixture(scope="module")
def corpus(real_documents, tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    index, passages = build_bm25_index(real_documents, root, words=40)
    text = root / "held-out.txt"
    text.write_text("\n\n".join(d["text"] for d in real_documents[:2]))
    return RetrievalOptions(index=str(index), passages=str(passages), k=SCALE.k), text


def run_eval(run_dir, lm, corpus, dtype: str):
    """The demo's eval stage (every baseline condition in one --compare table), run as the pipeline does."""
    retrieval, text = corpus
    stage = eval_stage(
        run_dir, "held-out", text, retrieval, lm_options(str(lm), SCALE, dtype), SCALE, {}, None, "eval"
    )
    runner = StageRunner(run_dir)
    runner.run(stage)
    return runner, stage


def recorded(stage, key: str):
    return json.loads((stage.output.parent / "no-retrieval" / "results.json").read_text())["config"][key]


@pytest.fixture(scope="module")
def bf16_run(short_lm, corpus, tmp_path_factory):
    """An eval in bf16 on the CPU, asked for as "bfloat16": bf16 under another name than "bf16"."""
    runner, stage = run_eval(tmp_path_factory.mktemp("bf16"), short_lm, corpus, "bfloat16")
    times: dict[str, float] = {}
    return stage, check_dtype(runner, stage, SCALE, times), times


def test_the_reports_retrieving_windows_start_where_the_capped_input_ends(short_lm, corpus, tmp_path):
    runner, stage = run_eval(tmp_path, short_lm, corpus, "fp32")
    assert recorded(stage, "max_length") == CONTEXT
    assert check_dtype(runner, stage, SCALE, {}) is None  # fp32: nothing to check
    conditions = json.loads(stage.output.read_text())["results"]
    paths = {c: stage.output.parent / c / "results.json" for c in conditions}
    report = build_report(tmp_path, {"held-out": paths}, {}, {}, SCALE, {}, total_seconds=0.0)
    # Window 0 scores the first 96 tokens with no passage; every later window retrieves, 16 targets each.
    for condition in ("no-retrieval", "bm25", "oracle"):
        retrieving = report["sets"]["held-out"]["retrieving"][condition]
        assert retrieving["windows"] == len(range(CONTEXT, SCALE.eval_tokens, SCALE.stride)) == 14
        assert retrieving["scored_tokens"] == SCALE.eval_tokens - CONTEXT
    assert f"targets from token {CONTEXT} on" in report["table"]


def test_an_eval_that_ran_in_bf16_is_checked_in_fp32(bf16_run):
    stage, check, times = bf16_run
    assert recorded(stage, "dtype") == "bfloat16"
    assert check is not None and "bf16 check" in times
    assert set(check) == {"no-retrieval", "bm25"}
    for change in check.values():  # bf16 against fp32: a small change, not a different computation
        assert change["nll_fp32"] > 0 and abs(change["relative_change"]) < 0.05


def test_the_bf16_check_rescores_the_first_windows_of_the_capped_input(bf16_run):
    _, check, _ = bf16_run
    # Window 0 and the DTYPE_CHECK_WINDOWS windows after it: the text cut where the 8th of them ends
    # (token 96 + 8 x 16), not where it would end with 128-token inputs.
    for change in check.values():
        assert change["windows"] == DTYPE_CHECK_WINDOWS + 1


@pytest.mark.gpu
def test_on_a_gpu_the_fastest_dtype_runs_bf16_and_is_checked(short_lm, corpus, tmp_path):
    from ralm.devices import native_bf16, resolve_device

    if not native_bf16(resolve_device("auto")):
        pytest.skip("this GPU emulates bf16: fastest is fp32 here, with nothing to check")
    dtype = resolved_dtype("fastest")
    assert dtype == "auto"  # ralm's own rule on a GPU, which resolves to bf16 on this one
    runner, stage = run_eval(tmp_path, short_lm, corpus, dtype)
    assert recorded(stage, "dtype") == "bfloat16"
    check = check_dtype(runner, stage, SCALE, {})
    assert check is not None and all(c["windows"] == DTYPE_CHECK_WINDOWS + 1 for c in check.values())
