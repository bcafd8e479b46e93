"""An `ralm eval ppl --compare` folder's conditions on the windows whose targets start at a token or later.

    .venv/bin/python bench/compare_from.py runs/posthoc/eval-related-whole --first-target 4096

The demo's report compares conditions on the retrieving windows (targets from the window length on). This
reads the same ``windows.jsonl`` of each condition and recomputes the demo report's comparisons
(``ralm.pipeline.verdicts.retrieving_comparisons``: paired block bootstrap, one block length per set from
the BM25 − no retrieval difference, 2,000 resamples, seed 0) on the windows from `--first-target` on, e.g.
to score a longer text apart from the part of it that was read before (the README's post-hoc checks).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ralm.eval.ppl.outputs import read_config, read_windows
from ralm.pipeline.verdicts import retrieving_comparisons
from ralm.statistics import format_change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the --output folder of ralm eval ppl --compare")
    parser.add_argument("--first-target", type=int, default=None, help="default: the LM input length")
    args = parser.parse_args()
    compare = json.loads((args.folder / "compare.json").read_text())
    dirs = {name: Path(result["dir"]).name for name, result in compare["results"].items()}
    rows = {name: read_windows(args.folder / d) for name, d in dirs.items()}
    first = args.first_target or read_config(args.folder / next(iter(dirs.values())))["max_length"]
    comparisons = retrieving_comparisons(rows, first)
    if not comparisons:
        raise SystemExit(f"{args.folder}: no window has its targets from token {first} on")
    any_row = next(iter(comparisons.values()))
    print(
        f"{args.folder}: windows with targets from token {first} on: {any_row['windows']} windows, "
        f"{any_row['scored_tokens']} tokens; 95% paired block-bootstrap intervals"
    )
    print(f"{'condition':<40} {'token ppl':>9}  {'vs no retrieval':<24} vs BM25")
    for name, entry in comparisons.items():
        against = [format_change(entry[k]) if k in entry else "" for k in ("vs_no_retrieval", "vs_bm25")]
        print(f"{name:<40} {entry['token_ppl']:9.3f}  {against[0]:<24} {against[1]}")


if __name__ == "__main__":
    main()
