"""How the zero-shot LM rerank's gain over BM25 grows with the number of candidates k, from one table.

    .venv/bin/ralm eval ppl --text web_mark.jsonl --lm GEMMA.gguf --dtype bf16 --max-length 512 \
        --stride 32 --max-passage-tokens 128 --max-tokens 4096 --k 16 \
        --compare no-retrieval,bm25,zero-shot,oracle --output runs/zero-shot-k
    .venv/bin/python bench/zero_shot_k.py runs/zero-shot-k [--ks 1,2,4,8,16]

An ``ralm eval ppl --compare`` table at k = K (``candidates.jsonl``, each window's candidates in BM25 order
with the targets' NLL and y''s log-prob from the same forward) holds every smaller k's table too: BM25's
top k' are its first k' candidates. So one run at K gives, for each k' <= K, the zero-shot pick (the
candidate of the first k' whose y' is most likely, ``ralm.eval.ppl.registry``'s rule) and the best of k'
(a bound that reads the targets), each against BM25's top-1 and no retrieval on the retrieving windows, with
the demo report's paired block bootstrap (one block length from the BM25 − no retrieval difference, never
across a document, 2,000 resamples, seed 0). The paper reranks k = 16 (Ram et al. 2023, §6.1); the demo
k = 4. Run on the dev book only: it measures a setting, it does not choose the demo's.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from ralm.eval.ppl.compare import TABLE_FILE
from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.outputs import read_config
from ralm.eval.ppl.records import WindowScores
from ralm.statistics import dependent_blocks, format_change, paired_bootstrap


def read_table(folder: Path, first_target: int | None) -> tuple[list[WindowScores], int]:
    """The table's windows whose targets start at `first_target` or later (default: the LM input length,
    the retrieving windows) and the k it was scored at."""
    compare = json.loads((folder / "compare.json").read_text())
    a_condition = folder / Path(next(iter(compare["results"].values()))["dir"]).name
    first = first_target if first_target is not None else read_config(a_condition)["max_length"]
    with open(folder / TABLE_FILE) as f:
        table = [WindowScores.from_json(json.loads(line)) for line in f]
    kept = [w for w in table if w.target_start >= first and w.candidates]
    if not kept:
        raise SystemExit(f"{folder}: no window with candidates has its targets from token {first} on")
    k = min(len(w.candidates) for w in kept)
    if any(c.nll is None or c.rank_logprob is None for w in kept for c in w.candidates):
        raise SystemExit(
            f"{folder}: the table lacks a candidate's NLL or y' log-prob (compare zero-shot,oracle)"
        )
    return kept, k


def picks_nll(table: list[WindowScores], k: int) -> dict[str, list[float]]:
    """Per window, the NLL under the zero-shot pick and the best of the first `k` candidates, each picked by
    the rule ``ralm eval ppl`` plays (``ralm.eval.ppl.registry``) on the window's row cut to those k."""
    picks = {"zero-shot": Condition("zero-shot", "zero-shot"), "best": Condition("oracle", "oracle")}
    out: dict[str, list[float]] = {name: [] for name in picks}
    for w in table:
        first = replace(w, candidates=w.candidates[:k])
        for name, condition in picks.items():
            out[name].append(first.candidates[condition.declared.pick(first, 0, None)].nll)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the --output folder of ralm eval ppl --compare")
    parser.add_argument(
        "--ks", default=None, help="comma-separated k' (default: 1, 2, 4, ... up to the table's k)"
    )
    parser.add_argument("--first-target", type=int, default=None, help="default: the LM input length")
    args = parser.parse_args()
    table, k_max = read_table(args.folder, args.first_target)
    ks = (
        [int(x) for x in args.ks.split(",")]
        if args.ks
        else [2**i for i in range(k_max.bit_length()) if 2**i <= k_max]
    )
    if max(ks) > k_max:
        raise SystemExit(f"--ks {args.ks}: the table has {k_max} candidates per window")
    n = [w.num_targets for w in table]
    none = [w.no_passage_nll for w in table]
    bm25 = [w.candidates[0].nll for w in table]
    blocks = dependent_blocks(np.subtract(bm25, none))  # the report's rule: one length per set
    print(
        f"{args.folder}: {len(table)} retrieving windows, {sum(n)} tokens, table k = {k_max}, blocks of "
        f"{len(blocks) // max(1, len(set(blocks)))} windows; token ppl no retrieval "
        f"{np.exp(sum(none) / sum(n)):.3f}, BM25 {np.exp(sum(bm25) / sum(n)):.3f}; 95% paired intervals"
    )
    print(
        f"{'k':>3}  {'zero-shot vs BM25':<26} {'zero-shot vs none':<26} {'best of k vs BM25':<26} "
        "zero-shot picks BM25's top-1"
    )
    for k in ks:
        picks = picks_nll(table, k)
        changes = [
            paired_bootstrap(picks["zero-shot"], bm25, n, blocks=blocks),
            paired_bootstrap(picks["zero-shot"], none, n, blocks=blocks),
            paired_bootstrap(picks["best"], bm25, n, blocks=blocks),
        ]
        same = sum(a == b for a, b in zip(picks["zero-shot"], bm25, strict=True)) / len(table)
        cells = [format_change(c.as_dict()) for c in changes]
        print(f"{k:>3}  {cells[0]:<26} {cells[1]:<26} {cells[2]:<26} {same:.0%}")


if __name__ == "__main__":
    main()
