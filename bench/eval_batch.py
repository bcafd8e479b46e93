"""Eval windows per second against the rows per LM forward (`--batch-size`), on a demo run's eval set, in one
process.

    OMP_NUM_THREADS=2 .venv/bin/python bench/eval_batch.py RUN/eval-related-KEY [--max-tokens 2048] \\
        [--sizes 2,4,6,2]

Re-runs the folder's ``ralm eval ppl --compare`` (the same text, LM, dtype, windows, index, passage form and
retrieval cache, read from its ``bm25`` condition's results.json) on the text's first --max-tokens tokens,
with the conditions no-retrieval, bm25, zero-shot and oracle (one table: k + 1 LM inputs per retrieving
window), once per batch size in the order given, each into a fresh folder; repeating the first size at the
end shows the machine's drift. The LM loads once per run and is not timed: the times are the runs' own
``scoring_s``. Each run's table is compared with the first's: the per-candidate NLL change (bf16 sums
depend on which rows share a forward) and how often the zero-shot pick and the best of k agree.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ralm.eval.ppl.conditions import parse_conditions
from ralm.eval.ppl.options import BatchOptions
from ralm.eval.ppl.outputs import read_config
from ralm.lm.options import LMOptions, WindowOptions
from ralm.passage_rules import BM25
from ralm.retrieval.options import RetrievalOptions

CONDITIONS = "no-retrieval,bm25,zero-shot,oracle"


def table(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per retrieving window: the candidates' NLL (with no passage first) and their y' log-probs."""
    rows = [json.loads(line) for line in (folder / "candidates.jsonl").open()]
    rows = [r for r in rows if r["candidates"]]
    nll = np.array([[r["no_passage_nll"], *(c["nll"] for c in r["candidates"])] for r in rows])
    rank = np.array([[c["rank_logprob"] for c in r["candidates"]] for r in rows])
    return nll, rank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("eval", type=Path, help="an ralm eval ppl --compare folder of a demo run")
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--sizes", default="2,4,6,2", help="rows per LM forward, run in this order")
    args = parser.parse_args()
    from ralm.eval.ppl.ppl_command import eval_ppl

    config = read_config(args.eval / BM25)
    lm = LMOptions(model=config["lm"], dtype=config["dtype"], max_length=config["max_length"])
    window = WindowOptions(
        stride=config["stride"],
        query_tokens=config["query_tokens"],
        max_passage_tokens=config["max_passage_tokens"],
    )
    retrieval = RetrievalOptions(index=config["index"]["dir"], k=config["k"])
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for i, size in enumerate(sizes):
            out = Path(scratch) / f"{i}-batch{size}"
            eval_ppl(
                config["text"],
                str(out),
                lm=lm,
                retrieval=retrieval,
                max_tokens=args.max_tokens,
                retrieval_cache=config["retrieval_cache"],
                compare=parse_conditions(CONDITIONS),
                print_table=False,
                window=window,
                passage_form=config.get("passage_form", "retrieved"),
                batching=BatchOptions(batch_size=size),
                progress=False,
            )
            timings = json.loads((out / BM25 / "results.json").read_text())["timings"]
            runs.append((size, timings["scoring_s"], *table(out)))
    first_size, first_seconds, first_nll, first_rank = runs[0]
    windows = len(first_nll)
    print(
        f"{config['text']}: first {args.max_tokens} tokens, {windows} retrieving windows, "
        f"{first_nll.shape[1]} LM inputs each; {config['lm']} in {config['dtype']}"
    )
    header = f"{'rows per forward':>16} {'scoring s':>10} {'windows/s':>10} {'vs first':>9}"
    print(f"{header}  NLL change vs first")
    for size, seconds, nll, rank in runs:
        change = np.abs(nll - first_nll)
        same_pick = np.mean(rank.argmax(1) == first_rank.argmax(1))
        same_best = np.mean(nll[:, 1:].argmin(1) == first_nll[:, 1:].argmin(1))
        print(
            f"{size:>16} {seconds:>10.1f} {windows / seconds:>10.2f} {first_seconds / seconds:>8.2f}x  "
            f"mean {change.mean():.3f}, max {change.max():.3f} nats; zero-shot pick the same "
            f"{same_pick:.0%}, best of k the same {same_best:.0%}"
        )


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
