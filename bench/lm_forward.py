"""Where one scoring forward of the frozen LM goes, and what ``torch.compile`` (inductor) would change, in one
process on the same inputs.

    .venv/bin/python bench/lm_forward.py [--lm PATH.gguf] [--dtype bf16] [--rows 5] [--tokens 512] [--compile]

The input has data-gen's shape: `--rows` inputs of `--tokens` tokens (k = 4 candidates and the no-passage row
of one prefix at the demo's 512; consecutive chunks of the World English Bible's Genesis), the LM head at the
last 48 positions (y' and the targets), as ``ralm.lm.hf_forward.scored_logits`` asks for them. Prints the
eager forward's time and tokens/s and the share of each aten op in its CPU time (``torch.profiler``). With
`--compile`: the forward compiled by inductor as is and with freezing (what ``--compile`` runs:
``ralm.lm.hf_forward.compiled_for_scoring``), each one's time, speed-up and compile seconds, and what each
does to the labels: the log-probability of each scored position's true next token against the same LM in
fp32 (mean and largest absolute change, in nats).
"""

from __future__ import annotations

import argparse
import time

import torch

from ralm.lm.hf_forward import compiled_for_scoring, scored_logits
from ralm.lm.loading import load_lm


def _timed(fn, repeats: int) -> float:
    fn()  # warm-up
    started = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lm", default="/root/.cache/ralm/gguf/gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--scored", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    from ralm.corpora import bible_books

    lm = load_lm(args.lm, dtype=args.dtype)
    genesis = lm.encode(next(d["text"] for d in bible_books("web") if d["id"] == "Gen"))
    text = torch.tensor(genesis[: args.rows * (args.tokens + 1)]).view(args.rows, args.tokens + 1)
    ids, labels = text[:, :-1], text[:, 1:]
    positions = torch.arange(args.tokens - args.scored, args.tokens).expand(args.rows, -1).contiguous()

    def forward(model):
        """The log-prob of each scored position's true next token (the labels data-gen writes)."""
        with torch.inference_mode():
            logprobs = torch.log_softmax(scored_logits(model, ids, positions).float(), dim=-1)
            return torch.gather(logprobs, -1, torch.gather(labels, 1, positions)[..., None])[..., 0]

    eager_s = _timed(lambda: forward(lm.model), args.repeats)
    tokens = args.rows * args.tokens
    print(f"{lm.name}, {lm.dtype}, {torch.get_num_threads()} threads, {args.rows} x {args.tokens} tokens")
    print(f"eager: {eager_s * 1000:.0f} ms per forward, {tokens / eager_s:.0f} tokens/s")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        forward(lm.model)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    print("share of the forward's CPU time by op (self time):")
    for event in events[:8]:
        print(f"  {event.key:<50} {event.self_cpu_time_total / total:6.1%}")
    if args.compile:
        eager = forward(lm.model)
        exact = forward(load_lm(args.lm, dtype="fp32").model)
        _compare(lm.model, "eager", eager, exact)
        # Inductor as is first: `compiled_for_scoring` sets freezing for the rest of the process.
        for name, compile_model in (
            ("compiled (inductor)", lambda: torch.compile(lm.model)),
            ("compiled, freezing (--compile)", lambda: compiled_for_scoring(lm.model, lm.device)),
        ):
            torch._dynamo.reset()  # dynamo caches per code object: the second must not reuse the first
            started = time.perf_counter()
            compiled = compile_model()
            out = forward(compiled)
            compile_s = time.perf_counter() - started
            compiled_s = _timed(lambda compiled=compiled: forward(compiled), args.repeats)
            print(
                f"{name}: {compiled_s * 1000:.0f} ms per forward, {eager_s / compiled_s:.2f}x eager; "
                f"compile {compile_s:.0f} s"
            )
            _compare(compiled, name, out, exact)


def _compare(model, name: str, labels_of: torch.Tensor, exact: torch.Tensor) -> None:
    """The scored labels' change against the same LM in fp32 (nats)."""
    change = (labels_of - exact).abs()
    print(
        f"  {name} labels against fp32: mean |change| {float(change.mean()):.4f}, "
        f"largest {float(change.max()):.3f} nats"
    )


if __name__ == "__main__":
    main()
