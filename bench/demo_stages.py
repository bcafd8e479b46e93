"""Each stage of a finished `ralm demo`/`ralm run` folder: wall time, work, achieved GFLOP/s and share of the
CPU's estimated peak and of a GEMM measured in the same run (bench/hardware.py), optionally beside a
baseline run folder of another code version.

Work is counted from what the run recorded, as model FLOPs (2 x non-embedding parameters per token forward,
6 x in training, plus attention's 2 x layers x width x context per token; the LM head only at scored
positions, as ralm computes it):
- data-gen: prefixes x (k + 1) LM inputs (k passages and none) of max_length tokens (ralm_data_gen.json);
- train: steps x batch x (k + 1) pairs (the empty pair with --abstain) of max_pair_tokens, forward and
  backward, plus one forward over the selection prefixes per validation and one over the decision prefixes;
- eval: retrieving windows x (k + 2) LM inputs (k passages, none, the context-matched cut) plus one per
  other window, of max_length tokens (results.json counts); a forward-looking row's stage: 2 LM inputs per
  retrieving window (its one candidate and no passage).
Token counts are upper bounds (an input shorter than max_length counts as full), so the shares are too.

    .venv/bin/python bench/demo_stages.py RUN_DIR [--baseline OTHER_RUN_DIR]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import torch
from hardware import cpu_peak, gemm_gflops


def _shape(model_dir: str) -> tuple[float, int, int]:
    """(non-embedding parameters, layers, width) of a Hugging Face model folder, built on the meta device."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModel.from_config(config)
    params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    text = getattr(config, "text_config", config)
    return float(params), int(text.num_hidden_layers), int(text.hidden_size)


def _per_token(shape: tuple[float, int, int], context: int, passes: int) -> float:
    params, layers, width = shape
    return passes * (params + layers * width * context)


def data_gen_work(run: Path) -> tuple[float, str, str]:
    record = json.loads(next(run.glob("rerank-data-*/ralm_data_gen.json")).read_text())["config"]
    inputs = record["num_examples"] * (record["k"] + 1)
    tokens = inputs * record["max_length"]
    flop = tokens * _per_token(_shape(record["tokenizer"]), record["max_length"], 2)
    return flop, f"{inputs:,} LM inputs, {tokens / 1e6:.2f}M tokens", record["dtype"]


def train_work(summary: dict, run: Path) -> tuple[float, str, str]:
    config = summary["config"]
    data = json.loads((_resolve(config["data"], run) / "ralm_data_gen.json").read_text())["config"]
    pairs_per_prefix = data["k"] + (1 if config["abstain"] else 0)
    tokens = config["encoder"]["max_pair_tokens"]
    _, selection, decision = (
        int(n) for n in re.findall(r"(\d+) (?:train|selection|decision)", summary["data"])
    )
    # every val_every steps taken and at the last (early stopping ends on a validation), plus the start's
    validations = -(-summary["steps"] // config["run"]["val_every"]) + 1
    shape = _shape(config["encoder"]["name"])
    trained = summary["steps"] * config["loader"]["batch_size"] * pairs_per_prefix * tokens
    read = (validations * selection + decision) * pairs_per_prefix * tokens
    flop = trained * _per_token(shape, tokens, 6) + read * _per_token(shape, tokens, 2)
    return flop, f"{(trained + read) / 1e6:.2f}M encoder tokens", summary["precision"]


def eval_work(results: dict, per_retrieving: int | None = None) -> tuple[float, str, str]:
    """`per_retrieving`: LM inputs per retrieving window (default k + 2)."""
    config, counts = results["config"], results["counts"]
    retrieving = counts["retrieving_windows"]
    inputs = retrieving * (per_retrieving or config["k"] + 2) + counts["windows"] - retrieving
    tokens = inputs * config["max_length"]
    flop = tokens * _per_token(_shape(config["tokenizer"]), config["max_length"], 2)
    return flop, f"{inputs:,} LM inputs, {tokens / 1e6:.2f}M tokens", config["dtype"]


def _resolve(path: str, run: Path) -> Path:
    """A recorded path: absolute, or relative to where the run was started (an ancestor of its folder)."""
    if Path(path).is_absolute():
        return Path(path)
    for base in (Path.cwd(), *run.resolve().parents):
        if (base / path).exists():
            return base / path
    raise FileNotFoundError(f"{path}: not found from {run} or its parent folders")


def _output(command: list[str], run: Path) -> Path:
    return _resolve(command[command.index("--output") + 1], run)


def stage_rows(run: Path) -> dict[str, tuple[float, float, str, str]]:
    """{stage: (seconds, FLOP, work, dtype)}; stages.json keeps every stage a run folder has seen (dev and
    test runs, a 1-seed key beside a 3-seed one): each output folder is counted once, under its first key."""
    rows, seen = {}, set()
    for key, stage in json.loads((run / "stages.json").read_text()).items():
        output = _output(stage["command"], run)
        if output in seen or key == "index":
            continue
        seen.add(output)
        if key == "data-gen":
            work = data_gen_work(run)
        elif key.startswith("train"):
            work = train_work(json.loads((output / "summary.json").read_text()), run)
        else:  # eval sets and the bf16 check (fp32, no retrieval and BM25 over a few windows)
            # BM25's record: its counts hold the retrieving windows (no retrieval's hold none)
            results = json.loads((output / "bm25" / "results.json").read_text())
            work = eval_work(results)
            if key.startswith("bf16"):
                work = (work[0] * 2 / (results["config"]["k"] + 2), "2 conditions of its windows", work[2])
            elif key.startswith("forward"):  # one condition at k = 1: its passage and no passage
                work = eval_work(results, per_retrieving=2)
        rows[key] = (stage["seconds"], *work)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--baseline", type=Path, help="a run folder of another code version, same settings")
    args = parser.parse_args()
    peak = cpu_peak()
    gemm = {dtype: gemm_gflops(dtype) for dtype in ("fp32", "bf16")}
    print(
        f"{peak.description}; nominal peak fp32 {peak.fp32_gflops:.0f}, bf16 {peak.bf16_gflops:.0f} GFLOP/s;"
        f" measured now on a 2048^3 GEMM: fp32 {gemm['fp32']:.0f}, bf16 {gemm['bf16']:.0f} GFLOP/s"
    )
    rows = stage_rows(args.run)
    base = stage_rows(args.baseline) if args.baseline else {}
    print(
        "| stage | seconds | work | dtype | GFLOP | GFLOP/s | share of peak | share of GEMM |"
        + (" baseline s | speed-up |" if base else "")
    )
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if base else ""))
    for key, (seconds, flop, work, dtype) in rows.items():
        rate = flop / seconds / 1e9
        kind = "bf16" if dtype in ("bf16", "bfloat16", "bf16-mixed") else "fp32"
        share, attained = rate / peak.peak(kind), rate / gemm[kind]
        line = (
            f"| {key} | {seconds:.0f} | {work} | {dtype} | {flop / 1e9:,.0f} | {rate:.0f} | {share:.0%} "
            f"| {attained:.0%} |"
        )
        if base:
            other = base.get(key)
            line += f" {other[0]:.0f} | {other[0] / seconds:.2f}x |" if other else " | |"
        print(line)


if __name__ == "__main__":
    main()
