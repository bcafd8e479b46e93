"""Cost of one LM input for two frozen LMs, A/B in one process: the demo's LM choice.

    OMP_NUM_THREADS=2 .venv/bin/python bench/lm_cost.py --lm-a SMOLLM2.gguf --lm-b GEMMA.gguf \
        --text mark.jsonl [--inputs 12] [--rounds 3] [--max-length 512] [--stride 32] [--dtype bf16]

Both LMs score the same text the way data-gen and eval do (``ralm.lm.scoring.score_continuations``: inputs
of ``--max-length`` tokens, the last ``--stride`` scored), each with its own tokenizer cutting the same
characters; the two alternate round by round so a change in the shared machine's load hits both alike.
Prints seconds per input of each, their ratio (B / A) and the tokens per second. Each LM's vocabulary
projection runs only at the scored positions (``logits_to_keep``), so the cost is its transformer body's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from ralm.lm.loading import load_lm
from ralm.lm.scoring import ScoreRequest, ScoringSettings, score_continuations


def requests_for(lm, text: str, inputs: int, input_length: int, stride: int) -> list[ScoreRequest]:
    """`inputs` windows of `input_length` tokens of `text` (no passage), the last `stride` tokens scored."""
    ids = lm.encode(text)
    out = []
    for i in range(inputs):
        start = i * stride
        window = ids[start : start + input_length]
        if len(window) < input_length:
            break
        out.append(ScoreRequest((), tuple(window[:-stride]), tuple(window[-stride:])))
    return out


def timed(lm, requests: list[ScoreRequest], input_length: int) -> float:
    started = time.perf_counter()
    score_continuations(lm, requests, ScoringSettings(input_length=input_length, max_passage_tokens=0))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm-a", required=True)
    parser.add_argument("--lm-b", required=True)
    parser.add_argument("--text", required=True, help="JSONL with a 'text' field (the first row is used)")
    parser.add_argument("--inputs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--stride", type=int, default=32)
    parser.add_argument("--dtype", default="bf16")
    args = parser.parse_args()
    with open(args.text) as f:
        text = json.loads(f.readline())["text"]
    lms = {"A": load_lm(args.lm_a, dtype=args.dtype), "B": load_lm(args.lm_b, dtype=args.dtype)}
    requests = {k: requests_for(lm, text, args.inputs, args.max_length, args.stride) for k, lm in lms.items()}
    for k, lm in lms.items():  # warm-up: first calls allocate and pick kernels
        timed(lm, requests[k][:2], args.max_length)
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    for _ in range(args.rounds):
        for k, lm in lms.items():
            seconds[k].append(timed(lm, requests[k], args.max_length) / len(requests[k]))
    for k, lm in lms.items():
        per_input = statistics.median(seconds[k])
        rounds = ", ".join(f"{s:.3f}" for s in seconds[k])
        print(
            f"{k} {lm.name}: {per_input:.3f} s per {args.max_length}-token input "
            f"({args.max_length / per_input:,.0f} tokens/s; rounds {rounds})"
        )
    ratio = statistics.median(b / a for a, b in zip(seconds["A"], seconds["B"], strict=True))
    print(f"B / A cost per input: {ratio:.2f} (median of the {args.rounds} paired rounds)")


if __name__ == "__main__":
    main()
