"""Data-gen labels in bf16 against fp32: pairs/s of each and how much the labels change, in one process.

    OMP_NUM_THREADS=2 .venv/bin/python bench/data_gen_dtype.py [--lm SMOLLM2.gguf] [--prefixes 12] [--k 4]

The same prefixes and candidates (stdlib prose, as bench/data_gen.py) go through
``ralm.data_gen.scoring.score_prefix`` with the LM loaded in fp32 and in bf16, alternating per prefix so a
change in the shared machine's load hits both alike. Prints pairs/s of each and their ratio, the largest
and mean |log-prob difference| per target token and per summed label, and how often the two dtypes agree
on the LM's best candidate (the oracle a reranker is trained towards). Whether bf16 is faster depends on
the CPU: with AVX-512 BF16 or AMX the matmuls run natively, on AVX2 they are emulated.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_gen import bench_prefixes  # noqa: E402 - bench scripts sit beside each other, not in a package
from lm_engines import score_in_turns  # noqa: E402

from ralm.lm.loading import load_lm  # noqa: E402
from ralm.lm.scoring import ScoringSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm", default=None, help="LM (default: the demo's offline SmolLM2-135M)")
    parser.add_argument("--prefixes", type=int, default=12)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--stride", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--max-passage-tokens", type=int, default=96)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.lm is None:
        from ralm.pipeline.models import default_lm

        args.lm = default_lm()
    lms = {dtype: load_lm(args.lm, device=args.device, dtype=dtype) for dtype in ("float32", "bfloat16")}
    lm = lms["float32"]
    prefixes = bench_prefixes(lm, args.prefixes, args.k, args.max_length, args.stride, passage_words=64)
    settings = ScoringSettings(input_length=args.max_length, max_passage_tokens=args.max_passage_tokens)
    print(
        f"LM {lm.name}, {args.prefixes} prefixes x ({args.k} candidates + no retrieval), max_length "
        f"{args.max_length}, threads {torch.get_num_threads()}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    scored, seconds = score_in_turns(lms, prefixes, settings)
    labels = {d: [(s.candidates, s.no_retrieval) for s in scores] for d, scores in scored.items()}
    token_diffs, sum_diffs, agree = [], [], 0
    for (c32, n32), (c16, n16) in zip(labels["float32"], labels["bfloat16"], strict=True):
        for a, b in zip([*c32, n32], [*c16, n16], strict=True):
            token_diffs += [abs(x - y) for x, y in zip(a, b, strict=True)]
            sum_diffs.append(abs(sum(a) - sum(b)))
        best32 = max(range(len(c32)), key=lambda i: sum(c32[i]))
        best16 = max(range(len(c16)), key=lambda i: sum(c16[i]))
        agree += best32 == best16
    pairs = args.prefixes * (args.k + 1)
    for dtype in lms:
        print(f"{dtype:9} {pairs / seconds[dtype]:7.2f} pairs/s")
    print(f"ratio bf16 / fp32 = {seconds['float32'] / seconds['bfloat16']:.2f}x")
    print(
        f"|log-prob difference| per token: max {max(token_diffs):.3f}, "
        f"mean {sum(token_diffs) / len(token_diffs):.4f}; "
        f"per summed label ({args.stride} tokens): max {max(sum_diffs):.3f}, "
        f"mean {sum(sum_diffs) / len(sum_diffs):.3f} nats"
    )
    print(f"best candidate the same in fp32 and bf16: {agree} of {args.prefixes} prefixes")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
