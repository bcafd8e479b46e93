"""Where `--patience P` would have stopped finished training runs, and whether it keeps their selection.

Reads each reranker folder's validation curve (``logs/csv/*/metrics.csv``, gain recovered per validation)
and its summary.json (the selected step; 0 is the BM25/threshold start, which competes at the end
whatever the patience). With early stopping the steps taken are the full run's (the schedule keeps
max_steps' length), so the selection is unchanged exactly when the best validation comes before the stop.

    .venv/bin/python bench/patience.py RUN_DIR [RUN_DIR ...] [--patience 1 2 3]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def curve(reranker: Path) -> list[tuple[int, float]]:
    """(step, gain recovered) per validation; the CSV logger writes a validation at step s as s - 1."""
    rows = []
    for path in sorted(reranker.glob("logs/csv/*/metrics.csv")):
        for row in csv.DictReader(open(path)):
            if row.get("val/gain_recovered"):
                rows.append((int(row["step"]) + 1, float(row["val/gain_recovered"])))
    return rows


def stop_after(values: list[float], patience: int) -> int:
    """Index of the validation after which `patience` in a row have not strictly beaten the best."""
    best, wait = float("-inf"), 0
    for i, value in enumerate(values):
        best, wait = (value, 0) if value > best else (best, wait + 1)
        if wait >= patience:
            return i
    return len(values) - 1


def verdict(points: list[tuple[int, float]], selected: int, patience: int) -> tuple[int, bool]:
    """(steps run with this patience, whether the selected step is among the validations still run)."""
    stop = stop_after([v for _, v in points], patience)
    kept = selected == 0 or selected in [s for s, _ in points[: stop + 1]]
    return points[stop][0], kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (or reranker folders)")
    parser.add_argument("--patience", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    head = " | ".join(f"P={p}: steps, same selection" for p in args.patience)
    print(f"| reranker | curve (step: gain recovered) | selected | steps run | {head} |")
    print("|---|---|---|---|" + "---|" * len(args.patience))
    for run in args.runs:
        for summary_path in sorted(run.glob("**/summary.json")):
            folder = summary_path.parent
            points = curve(folder)
            if not points:
                continue
            summary = json.loads(summary_path.read_text())
            selected = summary["decision_evidence"]["selection"]["step"]
            cells = []
            for p in args.patience:
                steps, kept = verdict(points, selected, p)
                cells.append(f"{steps}, {'yes' if kept else 'NO'}")
            shown = " ".join(f"{s}: {v:.3f}" for s, v in points)
            print(f"| {folder} | {shown} | {selected} | {summary['steps']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
