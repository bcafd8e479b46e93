"""The README's results table of a demo run, rendered from its ``report.json`` (so the README's numbers come
from a command, not from copying).

    .venv/bin/python bench/readme_table.py runs/demo-quick [--sets related,unrelated] [--short]

One row per condition on the retrieving windows (where the conditions differ): token perplexity and the
change against no retrieval, BM25's top-1 and the context-matched baseline with their paired
block-bootstrap 95% intervals (``tie`` when the interval holds 0, ``same picks`` when no window differs),
and the copy rate from the whole-text table; the forward-looking rows last, paired on the same windows.
Labels are the report's, with the threshold's T filled in and, for each trained seed, what its training
exported and the step selection chose (its ``summary.json``). ``--short`` is the README's table: the
conditions a reader compares first (no retrieval, BM25's top-1, the zero-shot rule, each seed's exports with
their thresholds, the bound and the forward-looking rows) and the changes against no retrieval and BM25.
Reads only the JSON files.
"""

from __future__ import annotations

import argparse
import json
import os
import re

from ralm.pipeline.labels import NO_LM_PREFIX, STACKED_EXPORT, TRAINED_PREFIX, exported_as
from ralm.statistics import format_change

REFERENCES = (
    ("vs_no_retrieval", "no-retrieval"),
    ("vs_bm25", "bm25"),
    ("vs_matched", "no-retrieval-matched"),
)
LABELS = {
    "no-retrieval": "no retrieval",
    "no-retrieval-matched": "no retrieval, context cut as BM25's passage cuts it",
    "bm25": "BM25 top-1",
    "random": "random of BM25's top k",
    "zero-shot": "zero-shot LM rerank",
    "oracle": "bound: best of k",
    "oracle-or-none": "bound: best of k or none",
}


def change(comparison: dict | None, own: bool) -> str:
    """The report's own wording (``ralm.statistics.format_change``: 'tie' where the interval holds 0) with
    typographic minus signs; 'same picks' where no window differs; '' for the condition itself."""
    if own or comparison is None:
        return ""
    if comparison["differing_windows"] == 0:
        return "0.0% (same picks)"
    return format_change(comparison).replace("-", "\u2212")


SHORT_DROPS = ("no-retrieval-matched", "random", "bm25-above", "oracle-or-none")
"""Conditions the README's table (``--short``) leaves to docs/results.md's full one."""


def _summaries(run: str) -> list[str]:
    """The summary.json of each reranker this run's ``commands.sh`` trains: a run folder may also hold the
    reranker folders of earlier settings (other keys), which must not stand for a seed."""
    with open(os.path.join(run, "commands.sh")) as f:
        trained = re.findall(r"\bralm train .*--output (\S+)", f.read())
    return [os.path.join(run, os.path.basename(folder), "summary.json") for folder in trained]


def exports(run: str, short: bool = False) -> dict[str, str]:
    """``trained-seedN`` -> what seed N's training exported and the step selection chose (summary.json), and
    ``no-lm-seedN`` -> its export with no LM at rerank time;
    `short`: the export alone, with the threshold T of a ``bm25-above`` export (M of ``zero-shot-above``)."""
    out = {}
    for path in _summaries(run):
        with open(path) as f:
            summary = json.load(f)
        step = summary["decision_evidence"]["selection"]["step"]
        seed = summary["config"]["seed"]
        stacked = exported_as(summary) == STACKED_EXPORT
        what = "exported `trained`, stacked" if stacked else f"exported `{summary['decision']}`"
        if stacked and short:
            what += f" (step {step})"
        elif not short:
            what += f" (selected: step {step})"
        elif summary["decision"] == "bm25-above":
            what += f" (T = {summary['threshold']:.1f})"
        elif summary["decision"] == "zero-shot-above":
            what += f" (M = {summary['rank_threshold']:.1f})"
        out[f"{TRAINED_PREFIX}{seed}"] = what
        if no_lm := summary.get("no_lm_export"):  # the best rule with no LM at rerank time
            threshold = f" (T = {no_lm['threshold']:.1f})" if no_lm["decision"] == "bm25-above" else ""
            out[f"{NO_LM_PREFIX}{seed}"] = f"no LM: exported `{no_lm['decision']}`{threshold}"
    return out


def label(name: str, metrics: dict, exported: dict[str, str]) -> str:
    if name == "bm25-above":
        return f"BM25 top-1 if its score \u2265 {float(metrics['rule']):.2f}"
    if name == "zero-shot-above":
        return f"zero-shot LM rerank if its y' gain \u2265 {float(metrics['rule']):.2f} nats"
    if name in LABELS:
        return LABELS[name]
    if not name.startswith((TRAINED_PREFIX, NO_LM_PREFIX)):
        return name  # the forward-looking rows are keyed by their report label
    seed = name.removeprefix(TRAINED_PREFIX).removeprefix(NO_LM_PREFIX)
    return f"seed {seed}, {exported[name]}" if name in exported else f"trained reranker ({name})"


def rows(report: dict, sets: list[str], exported: dict[str, str], short: bool = False) -> list[str]:
    names = [n for n in report["sets"][sets[0]]["retrieving"] if not (short and n in SHORT_DROPS)]
    references = REFERENCES[:2] if short else REFERENCES
    out = []
    for name in names:
        cells = [label(name, report["sets"][sets[0]]["metrics"][name], exported)]
        for set_name in sets:
            entry = report["sets"][set_name]["retrieving"][name]
            cells.append(f"{entry['token_ppl']:.2f}")
            cells += [change(entry.get(key), name == ref) for key, ref in references]
            if not short:
                copies = report["sets"][set_name]["metrics"][name]["comparison"].get("copy_rate", 0.0)
                cells.append(
                    f"{100 * copies:.1f}%" if name not in ("no-retrieval", "no-retrieval-matched") else ""
                )
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="a demo run folder (holds report.json)")
    parser.add_argument("--sets", default=None, help="comma-separated set names (default: all, in order)")
    parser.add_argument("--short", action="store_true", help="the README's rows and columns")
    args = parser.parse_args()
    with open(os.path.join(args.run, "report.json")) as f:
        report = json.load(f)
    sets = args.sets.split(",") if args.sets else list(report["sets"])
    header = ["condition"]
    for set_name in sets:
        header += [f"{set_name}: ppl", "vs no retrieval", "vs BM25"]
        header += [] if args.short else ["vs context-matched", "copies"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    print("\n".join(rows(report, sets, exports(args.run, args.short), args.short)))


if __name__ == "__main__":
    main()
