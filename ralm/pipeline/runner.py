"""Run a pipeline: every stage of the plan (or reuse it), the fitted threshold rules, the bf16 check, and
the report. `ralm run` calls it with the user's texts, `ralm demo` with the offline presets."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ralm.eval.ppl.compare import COMPARE_FILE
from ralm.passage_rules import BM25_ABOVE, ZERO_SHOT_ABOVE
from ralm.pipeline.dtype_check import check_dtype, resolved_dtype
from ralm.pipeline.plan import plan_pipeline
from ralm.pipeline.report import build_report
from ralm.pipeline.scale import ScaleSettings
from ralm.pipeline.stage_progress import (
    CountingStageRunner,
    StageProgress,
    eval_per_data_gen_input,
    eval_set_size,
)
from ralm.pipeline.texts import PipelineTexts


def run_pipeline(
    out: Path,
    texts: PipelineTexts,
    lm: str,
    encoder: str,
    settings: ScaleSettings,
    times: dict[str, float],
    description: dict,
    started: float,
    label: str = "run",
) -> dict:
    """Every stage, then the report (tables, verdicts, plot) in `out`; `times` already holds the assets'
    seconds, `description` what the report says of the texts besides theirs (split, books), `label` tags
    each line (the command: ``[run]``, ``[demo]``) and `started` is when the run began (its elapsed time)."""
    results, train_dirs, exclusions, dtype_check = _run_stages(
        out, texts, lm, encoder, settings, times, label, started
    )
    report = build_report(
        out,
        results,
        train_dirs,
        times,
        settings,
        {**texts.description, **description, "excluded": exclusions},
        total_seconds=time.perf_counter() - started,
        dtype_check=dtype_check,
    )
    print(report["table"], flush=True)
    return report


def _run_stages(
    out: Path,
    texts: PipelineTexts,
    lm: str,
    encoder: str,
    settings: ScaleSettings,
    times: dict[str, float],
    label: str,
    started: float,
) -> tuple[dict[str, dict[str, Path]], dict[str, Path], str, dict | None]:
    """Run (or reuse) every stage, recording seconds in `times` and printing each stage's progress line
    (`label`, `started`: `run_pipeline`'s); returns each eval set's conditions' results files, the
    rerankers' training folders by seed, the exclusions line, and the bf16 check (or None)."""
    from ralm.train.scalar_init import (
        fit_bm25_threshold,
        fit_rank_threshold,  # imports Lightning: not for `--help`
    )

    dtype = resolved_dtype(settings.dtype)
    plan = plan_pipeline(out, texts, lm, encoder, settings, dtype)
    # The planned stages are the count; the bf16 check joins them if it runs.
    keys = [stage.key for stage in plan.stages]
    sizes = {s.key: eval_set_size(settings, name) for name, s in zip(texts.evals, plan.evals, strict=True)}
    sizes |= {stage.key: eval_set_size(settings, name) for name, _, stage in plan.forwards}
    progress = StageProgress(label, started, eval_per_data_gen_input(settings), keys, sizes=sizes)
    runner = CountingStageRunner(out, progress)
    for stage in (plan.index, plan.data_gen, *plan.trains):
        times[stage.key] = runner.run(stage)
    # The trivial abstention rule and the LM's own, fitted on the training prefixes, join the eval.
    thresholds = {BM25_ABOVE: fit_bm25_threshold(str(plan.data_gen.output))}
    rank_threshold = fit_rank_threshold(str(plan.data_gen.output))
    if rank_threshold is not None:  # None: data without y'; inf (never retrieve) is a row, as T's is
        thresholds[ZERO_SHOT_ABOVE] = rank_threshold
    rules = (
        f"fitted on the training prefixes: {BM25_ABOVE} retrieves when BM25 >= {thresholds[BM25_ABOVE]:.3f}"
    )
    if ZERO_SHOT_ABOVE in thresholds:
        rules += f", {ZERO_SHOT_ABOVE} when the zero-shot pick raises y' by >= {rank_threshold:.3f} nats"
    print(f"[{progress.label}] {rules}", flush=True)
    plan = plan_pipeline(out, texts, lm, encoder, settings, dtype, thresholds)
    results = {}
    for name, stage in zip(texts.evals, plan.evals, strict=True):
        times[stage.key] = runner.run(stage)
        results[name] = _condition_results(stage)
    # The forward-looking rows join their set's table under the row's name (paired window by window).
    for name, row, stage in plan.forwards:
        times[stage.key] = runner.run(stage)
        results[name][row.name] = stage.output
    dtype_check = check_dtype(runner, plan.evals[0], settings, times)
    train_dirs = {
        f"seed {seed}": stage.output.parent
        for seed, stage in zip(settings.train_seeds, plan.trains, strict=True)
    }
    exclusions = _exclusions(Path(f"{plan.passages}.excluded.json"), plan.data_gen.output)
    print(f"[{progress.label}] exclusions: {exclusions}", flush=True)
    return results, train_dirs, exclusions, dtype_check


def _condition_results(stage) -> dict[str, Path]:
    """An eval stage's conditions -> their results.json, from its ``--compare`` summary."""
    eval_dir = stage.output.parent
    summary = json.loads((eval_dir / COMPARE_FILE).read_text())
    return {c: eval_dir / c / "results.json" for c in summary["results"]}


def _exclusions(index_record: Path, data_dir: Path) -> str:
    """One line on what the index stage left out of the corpus (``ralm passages``' record) and, where it
    left anything out, data-gen of the training text (its metadata's ``excluded``)."""
    from ralm.data_gen.schema import METADATA_FILE
    from ralm.retrieval.passages import describe_exclusion

    if not index_record.is_file():
        return "not recorded (the index was built by an older ralm)"
    line = describe_exclusion(json.loads(index_record.read_text()), "corpus documents")
    meta = data_dir / METADATA_FILE
    training = json.loads(meta.read_text()).get("excluded", {}) if meta.is_file() else {}
    if training.get("rules"):
        line += f"; training text: {describe_exclusion(training, 'documents')}"
    return line
