"""Single-condition `ralm eval ppl` runs of one text that differ only in their query (``--query-form``),
compared window by window: each against no retrieval and against BM25's top-1 for the paper's past query.

    .venv/bin/python bench/query_forms.py no-retrieval=RUN/none bm25=RUN/past \\
        future=RUN/future lookahead=RUN/look0 [--first-target 512]

Every folder is an `--output` of `ralm eval ppl` on the same text, LM and windows (checked); `no-retrieval`
and `bm25` name the baselines, any other NAME one query form's run (BM25's top-1 for its query unless the
run says otherwise). The changes are the demo report's (``ralm.pipeline.verdicts.retrieving_comparisons``:
token perplexity on the windows whose targets start at `--first-target` or later, paired block bootstrap,
one block length from the BM25 − no retrieval difference, 2,000 resamples, seed 0). The last column says
each run's query and passage form, and what its query generated: look-ahead tokens per retrieving window and
seconds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ralm.eval.ppl.outputs import read_windows
from ralm.pipeline.verdicts import retrieving_comparisons
from ralm.statistics import format_change


def _cost(folder: Path) -> str:
    results = json.loads((folder / "results.json").read_text())
    timings, config = results["timings"], results["config"]
    if not results["counts"]["retrieving_windows"]:
        return "no query"
    generated = timings.get("lookahead_generated_tokens")
    form = config.get("query_form", "past")
    if config.get("passage_form"):
        form += f", {config['passage_form']} passages"
    if not generated:
        return form
    retrieving = results["counts"]["retrieving_windows"]
    return f"{form}: {generated / retrieving:.0f} tokens/retrieval, {timings['lookahead_s']:.0f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=FOLDER (no-retrieval=... and bm25=... among them)")
    parser.add_argument("--first-target", type=int, default=512, help="default: 512 (the demo's input)")
    args = parser.parse_args()
    folders = dict(item.split("=", 1) for item in args.runs)
    missing = {"no-retrieval", "bm25"} - set(folders)
    if missing:
        raise SystemExit(f"missing {', '.join(sorted(missing))}=FOLDER")
    rows = {name: read_windows(Path(folder)) for name, folder in folders.items()}
    spans = {name: [(r.window, r.target_start, r.end) for r in rs] for name, rs in rows.items()}
    if len({tuple(s) for s in spans.values()}) != 1:
        raise SystemExit("the runs' windows differ: compare runs of one text, LM and window layout")
    comparisons = retrieving_comparisons(rows, args.first_target)
    any_row = next(iter(comparisons.values()))
    print(
        f"windows with targets from token {args.first_target} on: {any_row['windows']} windows, "
        f"{any_row['scored_tokens']} tokens; 95% paired block-bootstrap intervals"
    )
    print(f"{'run':<14} {'token ppl':>9}  {'vs no retrieval':<24} {'vs BM25 (past)':<24} query")
    for name, entry in comparisons.items():
        against = [format_change(entry[k]) if k in entry else "" for k in ("vs_no_retrieval", "vs_bm25")]
        cost = _cost(Path(folders[name]))
        print(f"{name:<14} {entry['token_ppl']:9.3f}  {against[0]:<24} {against[1]:<24} {cost}")


if __name__ == "__main__":
    main()
