"""The demo's report: a one-screen table (perplexity, change against BM25, stage times) and a plot.

Reads only the stages' own output files (eval ``results.json``, the reranker's ``summary.json`` and its
CSV log), so the report can be rebuilt from a finished run folder at any time.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict
from pathlib import Path

from ralm.atomic_files import atomic_path, write_text_atomic
from ralm.demo.presets import DemoScale

# Conditions in the order they are shown; one `ralm eval ppl --compare` run scores them all.
CONDITIONS = ("none", "bm25", "zero-shot", "trained", "oracle")
COMPARE_NAMES = {
    "none": "no-retrieval",
    "bm25": "bm25",
    "zero-shot": "zero-shot",
    "trained": "trained",
    "oracle": "oracle",
}
"""Each condition's `--compare` name (and output folder)."""
LABELS = {
    "none": "no retrieval",
    "bm25": "BM25 top-1",
    "zero-shot": "BM25 + zero-shot LM rerank",
    "trained": "BM25 + trained reranker",
    "oracle": "BM25 + oracle (upper bound)",
}


def relative_change(value: float, baseline: float) -> float:
    """Change of `value` against `baseline` in percent (negative: lower perplexity than BM25)."""
    return 100.0 * (value - baseline) / baseline


def read_metrics(results_paths: dict[str, Path]) -> dict[str, dict]:
    """Per condition: token perplexity, scored tokens, retrieval rate and seconds from its results.json."""
    out = {}
    for condition, path in results_paths.items():
        results = json.loads(Path(path).read_text())
        metrics, timings = results["metrics"], results.get("timings", {})
        out[condition] = {
            "token_ppl": float(metrics["token_ppl"]),
            "word_ppl": float(metrics["word_ppl"]),
            "scored_tokens": int(metrics["scored_tokens"]),
            "retrieval_rate": float(metrics.get("retrieval_rate") or 0.0),
            "rerank_seconds": float(timings.get("rerank_s") or 0.0),
        }
    return out


def read_gain_curve(train_dir: Path) -> list[tuple[int, float]]:
    """(step, validation gain recovered) pairs from the reranker's CSV log, in step order."""
    points = []
    for log in sorted(train_dir.glob("logs/csv/version_*/metrics.csv")):
        with open(log, newline="") as f:
            for row in csv.DictReader(f):
                value = row.get("val/gain_recovered")
                if value not in (None, ""):
                    points.append((int(float(row.get("step") or 0)), float(value)))
    return sorted(set(points))


def format_table(metrics: dict[str, dict], times: dict[str, float], title: str, total_seconds: float) -> str:
    """The one-screen table printed at the end of a demo run."""
    bm25 = metrics.get("bm25", {}).get("token_ppl")
    lines = [title, "", f"{'condition':<30} {'token ppl':>10} {'vs BM25':>9} {'retrieval rate':>15}"]
    for condition in CONDITIONS:
        if condition not in metrics:
            continue
        m = metrics[condition]
        change = (
            "" if bm25 is None or condition == "bm25" else f"{relative_change(m['token_ppl'], bm25):+.1f}%"
        )
        lines.append(
            f"{LABELS[condition]:<30} {m['token_ppl']:>10.2f} {change:>9} {m['retrieval_rate']:>15.2f}"
        )
    stage_times = ", ".join(f"{k} {v:.0f}s" for k, v in times.items() if k != "eval")
    lines += [
        "",
        f"stage times: {stage_times}, eval (5 conditions from one table) {times.get('eval', 0.0):.0f}s; "
        f"all stages {sum(times.values()):.0f}s, this run {total_seconds:.0f}s (finished stages are reused)",
    ]
    return "\n".join(lines)


def plot(metrics: dict[str, dict], gain_curve: list[tuple[int, float]], path: Path) -> None:
    """Perplexity per condition (bars) and the reranker's validation gain recovered during training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [c for c in CONDITIONS if c in metrics]
    values = [metrics[c]["token_ppl"] for c in names]
    bars = left.bar(
        range(len(names)), values, color=["#999999", "#4c72b0", "#8172b2", "#55a868", "#c44e52"][: len(names)]
    )
    left.set_xticks(range(len(names)), [LABELS[c].replace("BM25 + ", "").replace(" (upper bound)", "") for c in names],
                    rotation=20, ha="right")  # fmt: skip
    left.set_ylabel("token perplexity (held-out text)")
    left.set_title("Perplexity per condition (lower is better)")
    for bar, value in zip(bars, values, strict=True):
        left.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom")
    if gain_curve:
        steps, gains = zip(*gain_curve, strict=True)
        right.plot(steps, gains, marker="o", color="#55a868")
    right.axhline(0.0, color="#4c72b0", linestyle="--", label="BM25 top-1 (0)")
    right.axhline(1.0, color="#c44e52", linestyle="--", label="oracle (1)")
    right.set_xlabel("reranker training step")
    right.set_ylabel("gain recovered (validation)")
    right.set_title("Share of the BM25-to-oracle gain the reranker recovers")
    right.legend(loc="upper left")
    fig.tight_layout()
    with atomic_path(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def orderings(metrics: dict[str, dict]) -> dict[str, bool]:
    """The claims the demo must show on held-out text."""
    ppl = {c: m["token_ppl"] for c, m in metrics.items()}
    checks = {}
    if {"none", "bm25"} <= ppl.keys():
        checks["bm25 < none"] = ppl["bm25"] < ppl["none"]
    if {"trained", "bm25"} <= ppl.keys():
        checks["trained < bm25"] = ppl["trained"] < ppl["bm25"]
    if "oracle" in ppl:
        checks["oracle lowest"] = all(ppl["oracle"] <= v for c, v in ppl.items())
    return checks


def build_report(
    run_dir: Path,
    results_paths: dict[str, Path],
    train_dir: Path,
    times: dict[str, float],
    scale: DemoScale,
    texts: dict,
    total_seconds: float,
) -> dict:
    """Write report.json, report.txt and report.png in `run_dir`; returns the report (with its table)."""
    metrics = read_metrics(results_paths)
    tokens = next(iter(metrics.values()))["scored_tokens"] if metrics else 0
    title = f"ralm demo: held-out text {texts.get('eval', '')}; {tokens} scored tokens"
    table = format_table(metrics, times, title, total_seconds)
    checks = orderings(metrics)
    table += "\n" + "  ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in checks.items())
    gain_curve = read_gain_curve(train_dir)
    plot(metrics, gain_curve, run_dir / "report.png")
    report = {
        "metrics": metrics,
        "orderings": checks,
        "times": times,
        "total_seconds": total_seconds,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(scale).items()},
        "texts": texts,
        "gain_curve": gain_curve,
        "table": table,
    }
    for name, content in (
        ("report.json", json.dumps(report, indent=1, default=str) + "\n"),
        ("report.txt", table + "\n"),
    ):
        write_text_atomic(run_dir / name, content)
    if any(not math.isfinite(m["token_ppl"]) for m in metrics.values()):
        print("[demo] warning: a perplexity is not finite; see the eval results", flush=True)
    return report
