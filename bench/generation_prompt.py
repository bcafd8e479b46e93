"""The prompt of a KV-cached generation (FLARE, QA, look-ahead queries): the LM head asked for by index
against the int ``logits_to_keep=1`` that transformers turns into a slice, in one process, same prompts.

    .venv/bin/python bench/generation_prompt.py [--lm PATH.gguf] [--dtype bf16] [--rows 1 8] [--tokens 479]

Baseline: ``model(input_ids, logits_to_keep=1, use_cache=True)``. transformers then applies the head to
``hidden_states[:, -1:, :]``, a view whose batch stride spans the whole prompt; torch's bf16 linear on a CPU
repacks the head weight for such an input (Gemma 3: 262k x 640). ralm (``ralm.lm.hf_forward.HFDecoding``):
the same call with ``logits_to_keep=tensor([T - 1])``, which gathers the last position into a fresh tensor.
Prints seconds per prompt of both, their ratio, and the largest logit difference between them.
"""

from __future__ import annotations

import argparse
import time

import torch

from ralm.lm.hf_forward import HFDecoding
from ralm.lm.loading import load_lm


def _timed(fn, repeats: int) -> tuple[float, torch.Tensor]:
    out = fn()  # warm-up
    started = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    return (time.perf_counter() - started) / repeats, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm", default="/root/.cache/ralm/gguf/gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--tokens", type=int, default=479)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    lm = load_lm(args.lm, dtype=args.dtype)
    print(f"{lm.name}, {lm.dtype}, {torch.get_num_threads()} threads, prompts of {args.tokens} tokens")
    header = ("rows", "slice s/prompt", "index s/prompt", "speed-up", "max |logit diff|")
    print("{:>4} {:>15} {:>15} {:>9} {:>17}".format(*header))
    generator = torch.Generator().manual_seed(0)
    for rows in args.rows:
        ids = torch.randint(100, 20_000, (rows, args.tokens), generator=generator)

        def sliced(ids=ids):
            with torch.inference_mode():
                return lm.model(input_ids=ids, use_cache=True, logits_to_keep=1).logits[:, -1].float()

        def indexed(ids=ids):
            with torch.inference_mode():
                return HFDecoding(lm.model).feed(ids)

        base_s, base = _timed(sliced, args.repeats)
        ours_s, ours = _timed(indexed, args.repeats)
        diff = float((base - ours).abs().max())
        speed_up = f"{base_s / ours_s:.1f}x"
        print(f"{rows:>4} {base_s / rows:>15.3f} {ours_s / rows:>15.3f} {speed_up:>9} {diff:>17.3g}")


if __name__ == "__main__":
    main()
