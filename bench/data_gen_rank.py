"""data-gen's cost of the zero-shot rule's y': the same prefixes scored with and without it, in one process.

    OMP_NUM_THREADS=2 .venv/bin/python bench/data_gen_rank.py --lm GEMMA.gguf [--prefixes 12] [--k 4]

*With y'* is data-gen's path, ``ralm.data_gen.scoring.score_prefix``: each request's target is the prefix's
last `--rank-tokens` tokens followed by the target, so the LM head also runs at those positions. *Without*
is the scorer of format ralm-rerank-data/1: the target alone after the whole prefix, the same candidates and
the no-retrieval input in one batch (``score_group``, as data-gen batches them). Both read the same input
tokens. The two alternate per prefix so a change in the machine's load hits both alike. Prints pairs/s of
each, their ratio, and the largest |difference| of a target token's log-prob between the two (y' must
leave the labels as they were: exact in fp32, within bf16's rounding of a differently shaped head
otherwise).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_gen import bench_prefixes  # noqa: E402 - bench scripts sit beside each other, not in a package

from ralm.data_gen.scoring import score_group, score_prefix  # noqa: E402
from ralm.lm.loading import load_lm  # noqa: E402
from ralm.lm.scoring import ScoringSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm", default=None, help="LM (default: the demo's offline LM)")
    parser.add_argument("--prefixes", type=int, default=12)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--stride", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--max-passage-tokens", type=int, default=128)
    parser.add_argument("--rank-tokens", type=int, default=16)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    if args.lm is None:
        from ralm.pipeline.models import default_lm

        args.lm = default_lm()
    lm = load_lm(args.lm, device="cpu", dtype=args.dtype)
    prefixes = bench_prefixes(lm, args.prefixes, args.k, args.max_length, args.stride, passage_words=100)
    settings = ScoringSettings(
        input_length=args.max_length, max_passage_tokens=args.max_passage_tokens, rank_tokens=args.rank_tokens
    )
    print(
        f"LM {lm.name} ({lm.dtype}), {args.prefixes} prefixes x ({args.k} candidates + no retrieval), "
        f"max_length {args.max_length}, y' {args.rank_tokens} tokens, threads {torch.get_num_threads()}"
    )
    first, first_passages = prefixes[0]  # warm-up
    score_prefix(lm, first, first_passages, settings)
    score_group(lm, first_passages, first.prefix, first.target, settings)
    seconds = {"with": 0.0, "without": 0.0}
    worst = 0.0
    for prefix, passages in prefixes:
        start = time.perf_counter()
        ranked = score_prefix(lm, prefix, passages, settings)
        seconds["with"] += time.perf_counter() - start
        start = time.perf_counter()
        plain = score_group(lm, passages, prefix.prefix, prefix.target, settings)  # no y': format /1
        seconds["without"] += time.perf_counter() - start
        for a, b in zip([*ranked.candidates, ranked.no_retrieval], plain, strict=True):
            worst = max(worst, *(abs(x - y) for x, y in zip(a, b, strict=True)))
    pairs = args.prefixes * (args.k + 1)
    for name, secs in seconds.items():
        print(f"{name:8} y' {pairs / secs:7.2f} pairs/s")
    print(f"pairs/s with y' / without = {seconds['without'] / seconds['with']:.3f}")
    print(f"largest |target log-prob difference| with y' against without: {worst:.2e} nats per token")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
