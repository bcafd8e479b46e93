"""The LM's dtype in a run: ``fastest`` resolved here, and what bf16 changed against fp32 (stated in the
report).

bf16 is used only where ``ralm.devices.fastest_dtype`` finds it native and faster; fp32 stays the exactness
reference. When the eval ran in bf16, the first eval set's first retrieving windows are scored again in
fp32 (no retrieval and BM25 top-1, the same windows) and the report states the change in their total NLL.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ralm.config_types import Dtype
from ralm.eval.ppl.compare import COMPARE_FILE
from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.outputs import read_config, read_windows
from ralm.passage_rules import BM25, NO_RETRIEVAL
from ralm.pipeline.scale import ScaleSettings
from ralm.pipeline.stages import StagePlan, StageRunner


def resolved_dtype(dtype: Dtype) -> Dtype:
    """The scale's dtype as the stages take it: ``fastest`` measured here (``ralm.devices.fastest_dtype``), a
    precision by its short name (``bf16``, which the reranker's training precision follows)."""
    from ralm.devices import SHORT_NAMES, fastest_dtype

    return fastest_dtype() if dtype == "fastest" else SHORT_NAMES.get(dtype, dtype)


DTYPE_CHECK_WINDOWS = 8
"""Retrieving windows rescored in fp32 when the eval ran in bf16, to state bf16's change in NLL."""
CHECKED = (Condition(NO_RETRIEVAL, NO_RETRIEVAL), Condition(BM25, BM25))
"""The conditions rescored in fp32: the LM alone and with BM25's top-1 (both in every demo table)."""


def check_dtype(
    runner: StageRunner, evaluate: StagePlan, settings: ScaleSettings, times: dict[str, float]
) -> dict | None:
    """With bf16 eval: the first eval set's first windows again in fp32 (no retrieval and BM25, the same
    windows: ``max_tokens`` ends the text where the bf16 run's window DTYPE_CHECK_WINDOWS ends), and the
    change in their total NLL."""
    # The dtype the eval recorded, not the name that chose it: ``fastest`` is ``auto`` on a GPU, which is
    # bf16 there (ralm.devices), and ``bfloat16`` is bf16 too.
    recorded = read_config(evaluate.output.parent / NO_RETRIEVAL)
    if recorded["dtype"] != "bfloat16":
        return None
    folder = evaluate.output.parent.with_name(evaluate.output.parent.name + "-fp32-check")
    arguments = replace(
        evaluate.arguments,
        lm=replace(evaluate.arguments.lm, dtype="fp32"),
        compare=list(CHECKED),
        # The eval's input length (scale.max_length capped at the LM's context) ends window 0.
        max_tokens=recorded["max_length"] + DTYPE_CHECK_WINDOWS * settings.stride,
        output=str(folder),
    )
    # The eval stage with these arguments: its inputs keyed as the eval keys them.
    stage = replace(evaluate, key="bf16 check", arguments=arguments, output=folder / COMPARE_FILE)
    times[stage.key] = runner.run(stage)
    return dtype_change(evaluate.output.parent, folder)


def dtype_change(bf16_dir: Path, fp32_dir: Path) -> dict:
    """Total NLL of the fp32 check's windows in bf16 against fp32, per condition (relative change)."""
    out = {}
    for condition in (c.name for c in CHECKED):
        fp32 = _window_nlls(fp32_dir / condition)
        bf16 = _window_nlls(bf16_dir / condition)
        shared = [w for w in fp32 if w in bf16]
        a, b = sum(bf16[w] for w in shared), sum(fp32[w] for w in shared)
        out[condition] = {"windows": len(shared), "nll_bf16": a, "nll_fp32": b, "relative_change": a / b - 1}
    return out


def _window_nlls(folder: Path) -> dict[tuple[int, int], float]:
    return {(r.window, r.end): r.nll for r in read_windows(folder)}
