"""An `ralm eval ppl --compare` folder's conditions on the windows whose targets start at a token or later.

    .venv/bin/python bench/compare_from.py runs/posthoc/eval-related-whole --first-target 4096
    .venv/bin/python bench/compare_from.py runs/dev-eval --against zero-shot-above   # a third column

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

import numpy as np

from ralm.eval.ppl.outputs import read_config, read_windows
from ralm.passage_rules import BM25, NO_RETRIEVAL
from ralm.pipeline.verdicts import retrieving_comparisons
from ralm.statistics import dependent_blocks, format_change, paired_bootstrap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the --output folder of ralm eval ppl --compare")
    parser.add_argument("--first-target", type=int, default=None, help="default: the LM input length")
    parser.add_argument("--against", default=None, help="a condition to compare every row with, too")
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
    third = _against(rows, first, args.against) if args.against else {}
    print(
        f"{'condition':<40} {'token ppl':>9} {'passage':>8}  {'vs no retrieval':<24} {'vs BM25':<24}"
        + (f" vs {args.against}" if args.against else "")
    )
    for name, entry in comparisons.items():
        against = [format_change(entry[k]) if k in entry else "" for k in ("vs_no_retrieval", "vs_bm25")]
        kept = [r for r in rows[name] if r.target_start >= first]
        passage = sum(r.chosen_rank is not None for r in kept) / len(kept)
        print(
            f"{name:<40} {entry['token_ppl']:9.3f} {passage:8.0%}  {against[0]:<24} {against[1]:<24} "
            f"{third.get(name, '')}"
        )


def _against(rows: dict, first: int, base: str) -> dict[str, str]:
    """Each condition's change against `base` on the same windows, as ``retrieving_comparisons`` computes
    its columns (its block length: from the BM25 − no retrieval difference; 2,000 resamples, seed 0)."""
    if base not in rows:
        raise SystemExit(f"--against {base}: not a condition of this folder ({', '.join(rows)})")
    kept = {name: [r for r in rs if r.target_start >= first] for name, rs in rows.items()}
    nll = {name: [r.nll for r in rs] for name, rs in kept.items()}
    n = [r.num_targets for r in kept[base]]
    blocks = dependent_blocks(np.subtract(nll[BM25], nll[NO_RETRIEVAL]))
    return {
        name: format_change(
            paired_bootstrap(values, nll[base], n, blocks=blocks, resamples=2000, seed=0).as_dict()
        )
        for name, values in nll.items()
        if name != base
    }


if __name__ == "__main__":
    main()
