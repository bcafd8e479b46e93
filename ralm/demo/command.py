"""`ralm demo`: the whole pipeline of both papers' retrieval-augmented LM on real offline assets.

    ralm demo --quick                 # under 5 minutes on a 2-core CPU
    ralm demo                         # the full demo, under 30 minutes
    ralm demo --corpus docs.jsonl --eval-text held_out.jsonl --lm gpt2 --encoder roberta-base

King James Bible as retrieval corpus, World English Bible books split into training and held-out text;
then `ralm index` -> `ralm data-gen` -> `ralm train` -> `ralm eval ppl` with no retrieval, BM25 top-1,
zero-shot LM reranking, the trained reranker and the oracle on the same held-out text and retrieval
results, and a report (table and plot) in the run folder beside the exact commands of each stage.
"""

from __future__ import annotations

import time
from pathlib import Path

from ralm.command_args import call_with_args, parser_for
from ralm.demo.assets import DemoTexts, bible_texts, default_encoder, default_lm, user_texts
from ralm.demo.presets import DemoScale, Overrides, describe, resolve_scale
from ralm.demo.report import COMPARE_NAMES, CONDITIONS, build_report
from ralm.demo.stages import Stage, StageRunner, short_hash
from ralm.errors import RalmInputError
from ralm.eval.compare import COMPARE_FILE

_OVERRIDES = Overrides()  # never mutated; the parser builds a fresh one from the command line


def _stage_plan(run_dir: Path, texts: DemoTexts, lm: str, encoder: str, scale: DemoScale) -> list[Stage]:
    """Every stage's command line; output folders are keyed by a hash of the inputs that make them."""
    index_key = short_hash([str(texts.corpus), str(scale.passage_words), str(scale.passage_stride)])
    index_dir = run_dir / f"index-{index_key}"
    passages = Path(f"{index_dir}.passages.jsonl")
    index = Stage(
        "index",
        ["index", "--documents", str(texts.corpus), "--index-dir", str(index_dir), "--passages", str(passages),
         "--words", str(scale.passage_words), "--stride", str(scale.passage_stride), "--overwrite", "true"],
        index_dir,
    )  # fmt: skip
    lm_window = ["--stride", str(scale.stride), "--query-tokens", str(scale.query_tokens),
                 "--max-length", str(scale.max_length), "--max-passage-tokens", str(scale.max_passage_tokens),
                 "--k", str(scale.k)]  # fmt: skip
    gen_args = ["--documents", str(texts.train), "--index", str(index_dir), "--passages", str(passages),
                "--lm", lm, "--num-prefixes", str(scale.num_prefixes),
                "--prefixes-per-shard", str(scale.prefixes_per_shard), *lm_window]  # fmt: skip
    data_dir = run_dir / f"rerank-data-{short_hash([index_key, *gen_args])}"
    data_gen = Stage("data-gen", ["data-gen", *gen_args, "--output", str(data_dir)], data_dir)
    train_args = [
        "--data", str(data_dir), "--encoder.name", encoder, "--encoder.max_length", str(scale.encoder_max_length),
        "--max-prefix-tokens", str(scale.max_prefix_tokens), "--batch-size", str(scale.batch_size),
        "--val-batch-size", str(scale.batch_size), "--val-fraction", str(scale.val_fraction),
        "--loss", scale.loss, "--lr", str(scale.lr), "--head-lr", str(scale.head_lr),
        # Warmup must end before the last step; a short override run keeps a tenth of its steps for it.
        "--warmup-steps", str(min(scale.warmup_steps, scale.train_steps // 10)),
        "--max-steps", str(scale.train_steps), "--val-every", str(scale.val_every),
        "--save-every", str(scale.val_every), "--log-every", "10", "--wandb", "off",
        # Start from BM25's ranking and learn corrections: with a few dozen prefixes a reranker trained from
        # a random head ranks far worse than BM25 (measured 13.71 ppl against 10.59 at --quick).
        "--bm25-prior", "true",
    ]  # fmt: skip
    train_dir = run_dir / f"reranker-{short_hash(train_args)}"
    train = Stage("train", ["train", *train_args, "--out-dir", str(train_dir)], train_dir / "reranker",
                  resume_options=["--ckpt-path", "last"])  # fmt: skip

    eval_args = ["--text", str(texts.eval), "--lm", lm, "--max-tokens", str(scale.eval_tokens), *lm_window]
    eval_key = short_hash([index_key, *eval_args])
    cache = run_dir / f"retrieval-cache-{eval_key}.jsonl"
    retrieval = ["--index", str(index_dir), "--passages", str(passages), "--retrieval-cache", str(cache)]
    # One table of k + 1 LM scores per window serves all five conditions (`--compare`): the same windows,
    # candidates and scores for each, at less than half the LM work of five separate runs.
    compare = ",".join(f"{COMPARE_NAMES[c]}={train_dir / 'reranker'}" if c == "trained" else COMPARE_NAMES[c]
                       for c in CONDITIONS)  # fmt: skip
    # The trained reranker's folder name already carries its training settings.
    eval_dir = run_dir / f"eval-{eval_key}"
    evaluate = Stage("eval", ["eval", "ppl", *eval_args, *retrieval, "--compare", compare,
                              "--output", str(eval_dir)], eval_dir / COMPARE_FILE)  # fmt: skip
    return [index, data_gen, train, evaluate]


def demo(
    quick: bool = False,
    run_dir: str | None = None,
    corpus: str | None = None,
    train_text: str | None = None,
    eval_text: str | None = None,
    lm: str | None = None,
    encoder: str | None = None,
    scale: Overrides = _OVERRIDES,
) -> dict:
    """The whole In-Context RALM pipeline on real offline assets, ending with a table and a plot.

    Args:
        quick: The small scale (under 5 minutes on a 2-core CPU) instead of the full demo (under 30).
        run_dir: Folder for every output and the commands (default: runs/demo or runs/demo-quick).
        corpus: Your own retrieval corpus (JSONL {id, title, text}, folder of .txt, or datasets folder)
            instead of the King James Bible.
        train_text: Your own training documents for data-gen (default: the corpus; candidates from a
            prefix's own document are excluded).
        eval_text: Your own held-out evaluation text (needed with --corpus).
        lm: Frozen LM: Hugging Face id, folder or .gguf file (default: the offline SmolLM2-135M).
        encoder: Reranker encoder: Hugging Face id or folder (default: the offline all-MiniLM-L6-v2).
        scale: Overrides of the chosen scale's settings.
    """
    started = time.perf_counter()
    settings = resolve_scale(quick, scale)
    if (corpus is None) != (eval_text is None):
        raise RalmInputError("--corpus and --eval-text: give both (your own texts) or neither (the Bibles)")
    out = Path(run_dir or ("runs/demo-quick" if quick else "runs/demo"))
    out.mkdir(parents=True, exist_ok=True)
    lm_path = lm or default_lm()
    encoder_path = encoder or default_encoder()
    print(
        f"[demo] {'quick' if quick else 'full'} demo in {out}\n[demo] settings: {describe(settings)}",
        flush=True,
    )
    t0 = time.perf_counter()
    if corpus is not None:
        texts = user_texts(corpus, train_text, eval_text)
    else:
        texts = bible_texts(out / "data", list(settings.heldout_books))
    for role, text in texts.description.items():
        print(f"[demo] {role}: {text}", flush=True)
    asset_seconds = time.perf_counter() - t0

    runner = StageRunner(out)
    times = {"assets": asset_seconds}
    results_paths = {}
    train_dir = out
    for stage in _stage_plan(out, texts, lm_path, encoder_path, settings):
        times[stage.key] = runner.run(stage)
        if stage.key == "train":
            train_dir = stage.output.parent
        if stage.key == "eval":
            for condition in CONDITIONS:
                results_paths[condition] = stage.output.parent / COMPARE_NAMES[condition] / "results.json"
    report = build_report(
        out,
        results_paths,
        train_dir,
        times,
        settings,
        texts.description,
        total_seconds=time.perf_counter() - started,
    )
    print(report["table"], flush=True)
    return report


def build_parser():
    return parser_for(demo, prog="ralm demo")


def main(argv: list[str] | None = None) -> None:
    call_with_args(demo, build_parser(), argv)
