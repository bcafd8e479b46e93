"""An independent check of an `ralm eval ppl --compare` folder's no-retrieval rows: every input starts as the
LM expects (``--special-tokens every-input``).

    .venv/bin/python bench/fair_baseline.py runs/demo/eval-related-* --windows 24

For the first `--windows` retrieving windows (those BM25's row gave a passage), scores with transformers
directly (its own tokenizer call, its own window arithmetic, one unbatched forward per window, full logits)
the input the rule describes: the tokenizer's special prefix (Gemma: its BOS), then the window's last
``max_length - len(prefix)`` tokens; and, beside it, the plain window without the prefix (``--special-tokens
eval-lm``, eval_lm.py's input). Prints ralm's no-retrieval total over those windows against both and the
token perplexity of each, so a reader sees which of the two ralm's rows are (within bf16 noise when the run
was bf16) and what the prefix is worth.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch


def windows(num_tokens: int, input_length: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, prev_end, end) of each window, written from eval_lm.py's loop."""
    out, prev_end = [], 0
    for begin in range(0, num_tokens, stride):
        end = min(begin + input_length, num_tokens)
        out.append((begin, prev_end, end))
        prev_end = end
        if end == num_tokens:
            break
    return out


def nll(model, ids: list[int], num_targets: int) -> float:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    logprobs = torch.log_softmax(logits[-num_targets - 1 : -1], dim=-1)
    return -float(logprobs.gather(1, torch.tensor(ids[-num_targets:])[:, None]).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the --output folder of ralm eval ppl --compare")
    parser.add_argument("--windows", type=int, default=24, help="retrieving windows to rescore")
    parser.add_argument("--dtype", default=None, help="default: the run's (bf16 or fp32)")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ralm.eval.ppl.eval_text import read_eval_text
    from ralm.lm.loading import default_special_prefix, gguf_cache_folder

    compare = json.loads((args.folder / "compare.json").read_text())
    folders = {name: args.folder / Path(r["dir"]).name for name, r in compare["results"].items()}
    bare = folders["no-retrieval"]
    config = json.loads((bare / "results.json").read_text())["config"]
    retrieving = {
        r["end"]
        for r in map(json.loads, (folders["bm25"] / "windows.jsonl").read_text().splitlines())
        if r["chosen_rank"] is not None
    }
    lm = config["lm"]
    folder = str(gguf_cache_folder(Path(lm))) if lm.endswith(".gguf") else lm
    dtype = getattr(
        torch, {"bf16": "bfloat16", "fp32": "float32"}.get(args.dtype, args.dtype or config["dtype"])
    )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    # ralm's own reading of the prefix is what is checked against here; it is read off the tokenizer, not
    # from ralm's rows, and printed so a reader can compare it with the tokenizer's configuration.
    prefix = list(default_special_prefix(tokenizer))
    tokens = tokenizer(read_eval_text(config["text"]), add_special_tokens=False)["input_ids"]
    tokens = tokens[: config["max_tokens"]] if config["max_tokens"] else tokens
    length = config["max_length"]
    rows = {r["end"]: r["nll"] for r in map(json.loads, (bare / "windows.jsonl").read_text().splitlines())}
    ours = with_prefix = without = 0.0
    count = scored = 0
    for begin, prev_end, end in windows(len(tokens), length, config["stride"]):
        if end not in retrieving or count == args.windows:
            continue
        n = end - prev_end
        window = tokens[begin:end]
        kept = window[max(0, len(prefix) + len(window) - length) :]  # the lead, then the last L - |lead|
        with_prefix += nll(model, prefix + kept, n)
        without += nll(model, window, n)
        ours += rows[end]
        count, scored = count + 1, scored + n
    print(f"{args.folder}: {count} retrieving windows, {scored} tokens, {config['dtype']} run, {dtype} check")
    print(f"special prefix {prefix}; ralm records special_tokens={config.get('special_tokens', '(none)')}")
    for name, total in (
        ("ralm no retrieval", ours),
        ("prefix + last L-1 tokens", with_prefix),
        ("window without prefix", without),
    ):
        print(f"  {name:<26} total NLL {total:10.2f}  token ppl {math.exp(total / scored):8.3f}")
    print(f"ralm against the prefixed input: {100 * (ours - with_prefix) / with_prefix:+.3f}% of total NLL")


if __name__ == "__main__":
    main()
