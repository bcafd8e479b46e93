"""The GPU check, in one process: data-gen, training and eval ppl, each in bf16 against fp32.

    bash bench/gpu_check.sh                  # one H200: under 8 minutes; prints one table
    .venv/bin/python bench/gpu_check.py --smoke --device cpu    # the same code at toy sizes (CPU, ~1 min)

1. data-gen: GPT-2 small (124M, random weights, real GPT-2 BPE) scores prefixes x 16 candidates at 1,024
   tokens with 256-token passages (the paper's shapes) through ``ralm.data_gen.scoring.score_prefix``, in
   fp32 and bf16: pairs/s, model FLOP utilisation against this GPU's measured bf16 matmul rate, and the
   bf16 labels against fp32 (largest summed-label difference, same best candidate).
2. training: ``RerankerModule`` (a RoBERTa-base-sized encoder, random weights) under Lightning in
   ``bf16-mixed`` and ``32-true`` on the same batches: steps/s and the loss after the last step of each.
3. eval ppl: ``ralm.eval.ppl.run.evaluate`` (BM25 top-1, stride 4, 1,024 tokens) in fp32 and bf16:
   scored tokens/s and the relative difference of total NLL.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_gen import bench_prefixes, forward_flops, matmul_flops_per_second  # noqa: E402 - bench scripts sit beside each other
from ppl import stdlib_documents  # noqa: E402
from train import synthetic_dataset  # noqa: E402

from ralm.data_gen.scoring import score_prefix  # noqa: E402
from ralm.lm.loading import load_lm  # noqa: E402
from ralm.lm.scoring import ScoringSettings, compose  # noqa: E402
from ralm.testing import gpt2_small  # noqa: E402

ROWS: list[tuple[str, str, str, str]] = []  # (stage, setting, speed, agreement with fp32)


def _synced(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def check_data_gen(args, lm_dir: Path) -> None:
    lms = {d: load_lm(lm_dir, device=args.device, dtype=d) for d in ("float32", "bfloat16")}
    device = lms["float32"].device
    prefixes = bench_prefixes(lms["float32"], args.prefixes, 16, args.max_length, 4)
    opts = {"input_length": args.max_length, "max_passage_tokens": args.max_length // 4}
    ranked = ScoringSettings(**opts, rank_tokens=16)  # data-gen's default y'
    labels, seconds = {d: [] for d in lms}, dict.fromkeys(lms, 0.0)
    for lm in lms.values():
        score_prefix(lm, *prefixes[0], ranked)  # warm-up
    for p, cands in prefixes:
        for dtype, lm in lms.items():
            start = _synced(device)
            scores = score_prefix(lm, p, cands, ranked)
            labels[dtype].append((scores.candidates, scores.no_retrieval))
            seconds[dtype] += _synced(device) - start
    worst, agree = 0.0, 0
    for (c32, n32), (c16, n16) in zip(labels["float32"], labels["bfloat16"], strict=True):
        worst = max(worst, *(abs(sum(a) - sum(b)) for a, b in zip([*c32, n32], [*c16, n16], strict=True)))
        agree += max(range(16), key=lambda i: sum(c32[i])) == max(range(16), key=lambda i: sum(c16[i]))
    lengths = [
        len(compose(c, p.prefix, p.target, **opts))
        for p, cands in prefixes
        for c in [*cands, list(lms["float32"].lead)]
    ]
    config = lms["float32"].model.config
    flops = sum(forward_flops(config, n, n, 4 + 16) for n in lengths)  # the head at the targets and y'.
    pairs = len(prefixes) * 17
    for dtype, peak_dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        peak = matmul_flops_per_second(n=args.matmul_n, device=device, dtype=peak_dtype)
        mfu = flops / seconds[dtype] / peak
        ROWS.append(
            (
                "data-gen",
                dtype,
                f"{pairs / seconds[dtype]:,.0f} pairs/s, {mfu:.0%} of {dtype} matmul peak",
                "reference"
                if dtype == "float32"
                else f"largest label difference {worst:.3f} nats, same best {agree}/{len(prefixes)}",
            )
        )


def check_training(args, tmp: Path) -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from ralm.train.datamodule import RerankDataModule
    from ralm.train.dataset import load_rerank_data
    from ralm.train.lit_module import RerankerModule

    encoder = tmp / "encoder"
    size = (
        dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
        if args.smoke
        else {}
    )
    BertModel(BertConfig(vocab_size=30522, **size)).save_pretrained(encoder)  # BERT/RoBERTa-base shape
    words = sorted({w for w in open(__file__).read().split() if w.isalpha()})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (encoder / "vocab.txt").write_text("\n".join(vocab))
    tokenizer = BertTokenizerFast(str(encoder / "vocab.txt"))
    tokenizer.save_pretrained(encoder)
    steps, batch, k = (6, 4, 4) if args.smoke else (60, 32, 16)
    data = synthetic_dataset(str(tmp / "rerank-data"), (steps + 4) * batch, k)
    split = load_rerank_data(data, abstain=False, val_fraction=0.05, seed=0)
    state = RerankerModule(str(encoder), max_length=512, max_prefix_tokens=256).encoder.state_dict()
    for precision in ("32-true", "bf16-mixed"):
        module = RerankerModule(
            str(encoder), lr=1e-5, warmup_steps=2, max_steps=steps, max_length=512, max_prefix_tokens=256
        )
        module.encoder.load_state_dict(state)
        dm = RerankDataModule(
            split,
            tokenizer,
            batch_size=batch,
            val_batch_size=batch,
            total_batches=steps,
            max_length=512,
            max_prefix_tokens=256,
            seed=0,
        )
        trainer = pl.Trainer(
            accelerator="gpu" if args.device.startswith("cuda") else "cpu",
            devices=1,
            precision=precision,
            max_steps=steps,
            max_epochs=1,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            logger=CSVLogger(tmp, name=precision),
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            use_distributed_sampler=False,
        )
        start = time.perf_counter()
        trainer.fit(module, datamodule=dm)
        rate = steps / (time.perf_counter() - start)
        loss = float(trainer.callback_metrics["train/loss"])
        ROWS.append(
            (
                "train",
                precision,
                f"{rate:.2f} steps/s ({batch} prefixes x {k}, 512 tokens)",
                f"last-step loss {loss:.4f}",
            )
        )


def check_eval_ppl(args, tmp: Path) -> None:
    from ralm.eval.ppl.run import PplSettings, evaluate
    from ralm.retrieval.index import build_index, open_index
    from ralm.retrieval.passages import split_passages, write_passages

    docs = stdlib_documents()
    write_passages(split_passages(docs[6:], words=100), tmp / "passages.jsonl")
    build_index(tmp / "passages.jsonl", tmp / "index", backend="bm25s")
    retriever = open_index(tmp / "index")
    raw = "\n\n".join(d["text"] for d in docs[:6])
    n_tokens = args.max_length + 4 * args.windows
    totals = {}
    for dtype in ("float32", "bfloat16"):
        lm = load_lm(args.lm_dir, device=args.device, dtype=dtype)
        options = PplSettings(
            strides=(4,),
            query_lengths=(32,),
            scoring=ScoringSettings(input_length=args.max_length),
            k=1,
            max_tokens=n_tokens,
        )
        start = _synced(lm.device)
        (point,) = evaluate(
            lm, raw, "held-out", options, tmp / f"ppl-{dtype}", retriever=retriever, progress=False
        )
        results = point.results.to_json()
        seconds = _synced(lm.device) - start
        totals[dtype] = results["metrics"]["total_nll"]
        scored = results["metrics"]["scored_tokens"]
        ROWS.append(
            (
                "eval ppl",
                dtype,
                f"{scored / seconds:,.0f} scored tokens/s ({scored} tokens)",
                "reference"
                if dtype == "float32"
                else (
                    f"total NLL {abs(totals[dtype] - totals['float32']) / abs(totals['float32']):.1e} "
                    "relative"
                ),
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, to check the script on a CPU")
    args = parser.parse_args()
    args.prefixes, args.windows, args.max_length, args.matmul_n = (
        (2, 8, 256, 512) if args.smoke else (64, 400, 1024, 8192)
    )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="ralm-gpu-check-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "lm").mkdir()
        args.lm_dir = gpt2_small(tmp / "lm", torch.float32)
        if args.smoke:  # a 2-layer GPT-2 with the same tokenizer: CPU bf16 is emulated and slow
            from transformers import GPT2Config, GPT2LMHeadModel

            GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2)).save_pretrained(args.lm_dir)
        started = time.perf_counter()
        for check in (check_data_gen, check_training, check_eval_ppl):
            t0 = time.perf_counter()
            if check is check_data_gen:
                check(args, args.lm_dir)
            else:
                check(args, tmp)
            print(f"{check.__name__}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"\n{name}, torch {torch.__version__}, {time.perf_counter() - started:.0f} s in all\n")
    print("| stage | setting | speed | against fp32 |\n|---|---|---|---|")
    for row in ROWS:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
