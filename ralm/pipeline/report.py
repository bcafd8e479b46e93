"""The demo's report: per eval set, the whole text's table and the retrieving windows' one (perplexity, paired
bootstrap CIs, rates) with the set's verdicts in words; the export decisions, stage times, and a plot.

Reads only the stages' own output files (each condition's ``results.json`` and ``windows.jsonl``, the
rerankers' summaries and CSV logs), so the report can be rebuilt from a finished run folder at any time.
"""

from __future__ import annotations

import csv
import json
import math
import statistics as stats_lib
from dataclasses import asdict
from pathlib import Path

from ralm.atomic_files import write_text_atomic
from ralm.eval.ppl.compare_stats import TableRow, format_compare_table
from ralm.eval.ppl.outputs import read_config, read_windows
from ralm.eval.ppl.registry import kind_named
from ralm.lm.special_tokens import describe as describe_special_tokens
from ralm.passage_rules import BM25, ZERO_SHOT

# The demo's conditions come from the registry through ralm.pipeline.labels; re-exported for importers.
from ralm.pipeline.labels import BASELINES as BASELINES
from ralm.pipeline.labels import NO_LM_PREFIX, TRAINED_PREFIX, exported_as, label, trained_seed
from ralm.pipeline.labels import UPPER_BOUNDS as UPPER_BOUNDS
from ralm.pipeline.plan import FORWARD_ROWS
from ralm.pipeline.report_plot import plot
from ralm.pipeline.scale import ScaleSettings
from ralm.pipeline.verdicts import retrieving_comparisons, verdicts
from ralm.rerank.model_card import cost_text
from ralm.retrieval.passage_forms import CONTINUATION
from ralm.statistics import format_change


def relative_change(value: float, baseline: float) -> float:
    """Change of `value` against `baseline` in percent (negative: lower perplexity than the baseline)."""
    return 100.0 * (value - baseline) / baseline


def read_metrics(results_paths: dict[str, Path]) -> dict[str, dict]:
    """Per condition: perplexity, counts and its ``comparison`` statistics from its results.json."""
    out = {}
    for condition, path in results_paths.items():
        results = json.loads(Path(path).read_text())
        metrics, counts = results["metrics"], results["counts"]
        out[condition] = {
            "token_ppl": float(metrics["token_ppl"]),
            "word_ppl": float(metrics["word_ppl"]),
            "scored_tokens": int(metrics["scored_tokens"]),
            "text_tokens": int(counts.get("text_tokens", counts["tokens"])),
            "windows": int(counts["windows"]),
            "retrieval_rate": float(metrics.get("retrieval_rate") or 0.0),
            "comparison": results.get("comparison") or run_copies(counts),
            "rule": results["config"].get("reranker") if kind_named(condition).value == "threshold" else None,
            "rerank_seconds": float(results.get("timings", {}).get("rerank_s") or 0.0),
        }
    return out


def run_copies(counts: dict) -> dict:
    """A run of one condition (a forward-looking row) has no comparison statistics: its copy count and rate
    in the keys a table's statistics give them (``compare_stats.condition_statistics``)."""
    if "copy_windows" not in counts:
        return {}
    retrieving = counts["retrieving_windows"]
    copies = counts["copy_windows"]
    return {"copy_windows": copies, "copy_rate": copies / retrieving if retrieving else 0.0}


def read_gain_curve(train_dir: Path) -> list[tuple[int, float]]:
    """(step, validation gain recovered) pairs from the reranker's CSV log, in step order."""
    points = []
    for log in sorted(train_dir.glob("logs/csv/version_*/metrics.csv")):
        with open(log, newline="") as f:
            for row in csv.DictReader(f):
                value = row.get("val/gain_recovered")
                if value not in (None, ""):
                    # Lightning logs validation at step index global_step - 1: +1 gives the optimizer steps
                    # done, the number in the checkpoint names (best-step10 after ten steps).
                    points.append((int(float(row.get("step") or 0)) + 1, float(value)))
    return sorted(set(points))


def _summary(train_dir: Path) -> dict:
    path = train_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _decision(train_dir: Path) -> str:
    """What the export decision chose (ralm.train.decision), from the run's summary.json; a trained stacked
    reranker (``--zero-shot-prior``) as ``STACKED_EXPORT``, since its row reads the LM too."""
    summary = _summary(train_dir)
    return exported_as(summary) if summary else "?"


def _no_lm_decision(train_dir: Path) -> str:
    """The seed's export among the rules that read no frozen LM (``--no-lm-export``), from summary.json."""
    return ((_summary(train_dir) or {}).get("no_lm_export") or {}).get("decision", "?")


def _no_lm_text(no_lm: dict | None, costs: dict) -> str:
    """The decision line's part on the seed's no-LM export: the rule, and its cost per retrieval as a share
    of the zero-shot rule's (the milliseconds the decision measured; unknown without both rates)."""
    if not no_lm:
        return ""
    per_retrieval = costs.get("per_retrieval") or {}
    own, lm = (per_retrieval.get(r, {}).get("ms") for r in (no_lm["decision"], ZERO_SHOT))
    if own is None or not lm:
        cost = "n/a"
    elif own == 0:
        cost = f"nothing beyond BM25, against the zero-shot rule's ~{lm:.0f} ms"
    else:
        cost = f"~{own:.0f} ms, {own / lm:.2g}x the zero-shot rule's ~{lm:.0f} ms"
    return f"; with no LM at rerank time: exported {no_lm['decision']} (cost per retrieval: {cost})"


def decision_lines(train_dirs: dict[str, Path]) -> list[str]:
    """Per seed: the export decision, on how many decision prefixes (disjoint from those that selected the
    checkpoint), and the comparisons behind it."""
    lines = []
    for name, folder in train_dirs.items():
        summary = _summary(folder)
        evidence = summary.get("decision_evidence") or {}
        decided = evidence.get("decision") or {}
        promise = evidence.get("promise") or {}
        kept = [
            f"{rule} {t['difference']:+.3f} (bound {t['bound']:+.3f} vs {t['margin']:+.3f}: "
            f"{'kept' if t['passes'] else 'not kept'}, {t['items']} prefixes)"
            for rule, t in (promise.get("tests") or {}).items()
        ]
        parts = [
            f"{rule} {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
            for rule, d in (evidence.get("comparisons") or {}).items()
        ]
        threshold, rank_threshold = promise.get("threshold"), promise.get("rank_threshold")
        fitted = f"T = {'n/a' if threshold is None else f'{threshold:.2f}'}"
        if rank_threshold is not None:
            fitted += f", M = {rank_threshold:.2f}"
        lines.append(
            f"{name}: exported {summary.get('decision', '?')} on {decided.get('prefixes', '?')} decision "
            f"prefixes; the promise (not worse than {promise.get('reference', 'no retrieval')} by more than "
            f"{promise.get('margin', 0.0):.0%}), nats per prefix, one-sided 95% bound: "
            f"{'; '.join(kept) or 'n/a'}; {fitted} "
            f"(training prefixes); the ranking, 95% CI: {'; '.join(parts) or 'n/a'}"
            + (f"; cost per retrieval: {cost}" if (cost := cost_text(evidence.get("costs") or {})) else "")
            + _no_lm_text(summary.get("no_lm_export"), evidence.get("costs") or {})
        )
    return lines


def exports(metrics: dict[str, dict]) -> dict[str, str]:
    """Each demo seed's export decision by condition name (the verdicts name a row by what it plays)."""
    return {n: m["exported"] for n, m in metrics.items() if m.get("exported")}


def seed_spread(metrics: dict[str, dict]) -> dict | None:
    """Perplexity of the trained rerankers over seeds: values, mean and sample standard deviation."""
    ppl = {trained_seed(n): m["token_ppl"] for n, m in metrics.items() if trained_seed(n) is not None}
    if not ppl:
        return None
    values = list(ppl.values())
    return {
        "seeds": list(ppl),
        "token_ppl": values,
        "mean": stats_lib.fmean(values),
        "sd": stats_lib.stdev(values) if len(values) > 1 else 0.0,
    }


def retrieving_table(comparisons: dict[str, dict], first_target: int, metrics: dict[str, dict]) -> str:
    """The retrieving windows' table: each condition's perplexity and changes with their 95% intervals
    (`metrics`: each condition's results, for its label)."""
    if not comparisons:
        return "no retrieving windows"
    width = max([len(label(n, metrics.get(n))) for n in comparisons] + [18])
    any_row = next(iter(comparisons.values()))
    head = (
        f"{'retrieving windows':<{width}}  {'token ppl':>9}  {'vs BM25':>25}  {'vs no retrieval':>25}  "
        f"{'vs context-matched':>25}"
    )
    lines = [head]
    for name, c in comparisons.items():
        cells = [format_change(c[k]) if k in c else "" for k in ("vs_bm25", "vs_no_retrieval", "vs_matched")]
        lines.append(
            f"{label(name, metrics.get(name)):<{width}}  {c['token_ppl']:>9.3f}  "
            + "  ".join(f"{x:>25}" for x in cells)
        )
    change = any_row["vs_no_retrieval"]
    lines.append(
        f"retrieving windows only (targets from token {first_target} on): {any_row['windows']} windows, "
        f"{any_row['scored_tokens']} tokens; "
        f"CIs: paired bootstrap over {change['blocks']} blocks of consecutive windows "
        f"({change['resamples']} resamples, seed {change['seed']}); 'tie': the interval holds 0."
    )
    return "\n".join(lines)


def set_section(name: str, metrics: dict[str, dict], comparisons: dict[str, dict], first_target: int) -> str:
    """One eval set: the whole text's table, the retrieving windows' table and the verdicts. The
    forward-looking rows (``FORWARD_ROWS``) come from runs of their own, whose statistics compare them with
    themselves as BM25: they join the retrieving windows' table, paired there with this table's rows."""
    forward = [row.name for row in FORWARD_ROWS if row.name in metrics]
    rows = [
        TableRow(label(n, m), m["token_ppl"], m["comparison"]) for n, m in metrics.items() if n not in forward
    ]
    first = next(iter(metrics.values()), {})
    beside = (
        f"beside it (runs of their own on the same windows, paired in the next table): {', '.join(forward)}"
    )
    lines = [
        "",
        f"== {name}: scored {first.get('scored_tokens', 0)} of {first.get('text_tokens', 0)} tokens ==",
        "whole text:",
        format_compare_table(rows),
        *([beside] if forward else []),
        "",
        retrieving_table(comparisons, first_target, metrics),
        "verdict (retrieving windows):",
        *(f"  {line}" for line in verdicts(name, comparisons, exports(metrics))),
    ]
    spread = seed_spread(metrics)
    if spread and len(spread["seeds"]) > 1:
        lines.append(
            f"trained over seeds {','.join(spread['seeds'])}: "
            f"token ppl {spread['mean']:.3f} ± {spread['sd']:.3f} "
            f"(mean ± sd; {', '.join(f'{v:.3f}' for v in spread['token_ppl'])})"
        )
    return "\n".join(lines)


def inputs_line(results: dict[str, dict[str, Path]]) -> str:
    """How every LM input of the eval started (the first eval set's config; every set shares the LM)."""
    first = next(iter(next(iter(results.values())).values()))
    config = read_config(Path(first).parent)
    prefix, mode = config.get("special_prefix", []), config.get("special_tokens", "every-input")
    line = f"LM inputs: {describe_special_tokens(prefix, mode)}"
    if config.get("passage_form") == CONTINUATION:
        line += (
            "; each passage from its sentence that best matches the query on into the next passage of its"
            " document (--passage-form continuation)"
        )
    return line


def dtype_line(check: dict | None) -> str:
    """What bf16 changed against fp32 (the eval's first windows rescored in fp32), or that it was fp32."""
    if not check:
        return "LM dtype: fp32 (the exactness reference)"
    parts = [
        f"{name} {100 * c['relative_change']:+.3f}% over {c['windows']} windows" for name, c in check.items()
    ]
    return (
        "LM dtype: bf16 (measured faster here); total NLL in bf16 against fp32 on the same windows: "
        + ", ".join(parts)
    )


def orderings(comparisons: dict[str, dict]) -> dict[str, bool]:
    """The claims a reader checks on one set's retrieving windows, each with its 95% interval."""
    checks = {}
    if BM25 in comparisons:
        checks["bm25 < no retrieval (CI)"] = comparisons[BM25]["vs_no_retrieval"]["high"] < 0
    trained = [c for n, c in comparisons.items() if trained_seed(n) is not None]
    if trained:
        checks["trained < bm25 (CI, every seed)"] = all(c["vs_bm25"]["high"] < 0 for c in trained)
        checks["trained < no retrieval (CI, every seed)"] = all(
            c["vs_no_retrieval"]["high"] < 0 for c in trained
        )
    return checks


def build_report(
    run_dir: Path,
    results: dict[str, dict[str, Path]],
    train_dirs: dict[str, Path],
    times: dict[str, float],
    scale: ScaleSettings,
    texts: dict,
    total_seconds: float,
    dtype_check: dict | None = None,
) -> dict:
    """Write report.json, report.txt and report.png in `run_dir`; returns the report (with its table).

    `results` maps each eval set's name to its conditions' results.json paths."""
    sets, sections = {}, []
    # What each seed's row plays: its export decision, by the condition name the eval compared it under.
    decisions = {name: _decision(folder) for name, folder in train_dirs.items()}
    exported = {f"{TRAINED_PREFIX}{n.removeprefix('seed ')}": decision for n, decision in decisions.items()}
    exported |= {
        f"{NO_LM_PREFIX}{n.removeprefix('seed ')}": _no_lm_decision(d) for n, d in train_dirs.items()
    }
    for name, paths in results.items():
        sets[name], section = _read_eval_set(name, paths, exported)
        sections.append(section)
    title = f"ralm demo, {texts.get('split', 'test')} split"
    inputs = inputs_line(results)
    table = _report_table(title, sections, train_dirs, times, texts, total_seconds, dtype_check, inputs)
    curves = {f"{name}: exported {decisions[name]}": read_gain_curve(d) for name, d in train_dirs.items()}
    plot(
        {n: s["retrieving"] for n, s in sets.items()},
        curves,
        title,
        run_dir / "report.png",
        decision_lines(train_dirs),
        next(iter(sets.values()))["metrics"] if sets else None,
    )
    report = {
        "sets": sets,
        "times": times,
        "total_seconds": total_seconds,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(scale).items()},
        "texts": texts,
        "dtype_check": dtype_check,
        "inputs": inputs,
        "gain_curves": curves,
        "table": table,
    }
    _write_report(run_dir, report, table)
    if any(not math.isfinite(m["token_ppl"]) for s in sets.values() for m in s["metrics"].values()):
        print("[demo] warning: a perplexity is not finite; see the eval results", flush=True)
    return report


def _read_eval_set(name: str, paths: dict[str, Path], exported: dict[str, str]) -> tuple[dict, str]:
    """One eval set read back from its conditions' output files: its part of report.json (metrics, the
    retrieving windows' comparisons, the orderings a reader checks, the verdicts) and its table section."""
    metrics = read_metrics(paths)
    for condition, decision in exported.items():
        if condition in metrics:
            metrics[condition]["exported"] = decision
    rows = {c: read_windows(Path(p).parent) for c, p in paths.items()}
    # Window 0 ends at the input length eval used: the scale's max_length capped at the LM's context.
    first_target = read_config(Path(next(iter(paths.values()))).parent)["max_length"]
    comparisons = retrieving_comparisons(rows, first_target)
    part = {
        "metrics": metrics,
        "retrieving": comparisons,
        "orderings": orderings(comparisons),
        "verdicts": verdicts(name, comparisons, exports(metrics)),
    }
    return part, set_section(name, metrics, comparisons, first_target)


def _report_table(
    title: str,
    sections: list[str],
    train_dirs: dict[str, Path],
    times: dict[str, float],
    texts: dict,
    total_seconds: float,
    dtype_check: dict | None,
    inputs: str,
) -> str:
    """report.txt: the texts used, the LM's dtype, how inputs start, each set's section, the export
    decisions, stage times."""
    data = [f"{role}: {texts[role]}" for role in ("corpus", "excluded", "train", "eval") if role in texts]
    stage_times = ", ".join(f"{k} {v:.0f}s" for k, v in times.items())
    return "\n".join(
        [
            title,
            *data,
            dtype_line(dtype_check),
            inputs,
            "",
            *sections,
            "",
            *decision_lines(train_dirs),
            f"stage times: {stage_times}; all stages {sum(times.values()):.0f}s, "
            f"this run {total_seconds:.0f}s "
            "(finished stages are reused)",
        ]
    )


def _write_report(run_dir: Path, report: dict, table: str) -> None:
    """report.json and report.txt, each written whole or not at all."""
    for name, content in (
        ("report.json", json.dumps(report, indent=1, default=str) + "\n"),
        ("report.txt", table + "\n"),
    ):
        write_text_atomic(run_dir / name, content)
