"""`ralm demo`: the whole pipeline of both papers' retrieval-augmented LM on real offline assets.

    ralm demo --quick                 # the small scale (one seed; README: its time on a 2-core CPU)
    ralm demo                         # the full demo (three training seeds)
    ralm demo --split dev             # the dev book, for choosing settings (never reported)
    ralm demo --domain python-docs    # the same on the Python documentation

King James Bible as retrieval corpus minus the dev and test books, the World English Bible's other books as
training text; then `ralm index` -> `ralm data-gen` -> `ralm train` (one reranker per seed, with
abstention) -> one `ralm eval ppl --compare` table per eval set: no retrieval, no retrieval with the context
cut as BM25's passage cuts it, BM25 top-1, random among the top k, zero-shot LM reranking, the rule "BM25 only
above a score", each trained reranker, and the best of k (with and without the option of no passage), each
with paired bootstrap CIs against BM25 and no retrieval, and a report (tables, verdicts, plot) in the run
folder beside the exact commands of each stage. The window keeps the paper's proportions: a passage takes
at most a quarter of the LM's input (the presets: 128 of 512 tokens; the paper: 256 of 1,024). The test
split has two eval sets: text the corpus retells (retrieval should help) and text it does not (the reranker
should abstain).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

from ralm.command_args import call_with_args, parser_for
from ralm.demo.assets import (
    DemoTexts,
    bible_texts,
    check_bible_books,
    check_user_texts,
    default_encoder,
    default_lm,
    python_docs_texts,
    user_texts,
)
from ralm.demo.dtype_check import check_dtype, resolved_dtype
from ralm.demo.held_out import describe_copies, leave_out_eval_documents
from ralm.demo.presets import DemoScale, Overrides, describe, resolve_scale
from ralm.demo.report import BASELINES, UPPER_BOUNDS, build_report
from ralm.demo.stages import Stage, StageRunner, short_hash
from ralm.errors import RalmInputError
from ralm.eval.ppl.compare import COMPARE_FILE
from ralm.eval.ppl.conditions import BM25_ABOVE
from ralm.fingerprints import path_fingerprint

_OVERRIDES = Overrides()  # never mutated; the parser builds a fresh one from the command line


def _stage_plan(
    run_dir: Path, texts: DemoTexts, lm: str, encoder: str, scale: DemoScale, threshold: float | None = None
) -> list[Stage]:
    """Every stage's command line; output folders are keyed by a hash of the inputs that make them.

    `threshold` (fitted on the data-gen rows, so known only after that stage) adds the `bm25-above`
    rule to the eval's conditions.
    """
    # Keyed by the input files' contents, not their names: an edited file gets a fresh folder.
    contents = {role: path_fingerprint(getattr(texts, role)) for role in ("corpus", "train")}
    exclude = ["--exclude", json.dumps(list(texts.exclude))] if texts.exclude else []
    index_key = short_hash(
        [contents["corpus"], str(scale.passage_words), str(scale.passage_stride), *exclude]
    )
    index_dir = run_dir / f"index-{index_key}"
    passages = Path(f"{index_dir}.passages.jsonl")
    index = Stage(
        "index",
        ["index", "--documents", str(texts.corpus), "--output", str(index_dir), "--passages", str(passages),
         "--passage-words", str(scale.passage_words), "--passage-stride", str(scale.passage_stride), *exclude,
         "--overwrite", "true"],
        index_dir,
    )  # fmt: skip
    # `ralm run`: the eval documents and --exclude leave the training text too (ralm.demo.held_out).
    train_exclude = ["--exclude", json.dumps(list(texts.train_exclude))] if texts.train_exclude else []
    gen_args = ["--documents", str(texts.train), "--index", str(index_dir), "--passages", str(passages),
                "--lm", lm, "--num-prefixes", str(scale.num_prefixes),
                "--prefixes-per-shard", str(scale.prefixes_per_shard), *train_exclude, *_lm_window(scale),
                "--dtype", resolved_dtype(scale.dtype)]  # fmt: skip
    data_dir = run_dir / f"rerank-data-{short_hash([index_key, contents['train'], *gen_args])}"
    data_gen = Stage("data-gen", ["data-gen", *gen_args, "--output", str(data_dir)], data_dir)
    trains = [_train_stage(run_dir, data_dir, encoder, scale, seed) for seed in scale.train_seeds]

    trained = {f"trained-seed{seed}": t.output for seed, t in zip(scale.train_seeds, trains, strict=True)}
    evals = [_eval_stage(run_dir, name, path, index_dir, lm, scale, trained, threshold, len(texts.evals))
             for name, path in texts.evals.items()]  # fmt: skip
    return [index, data_gen, *trains, *evals]


def _eval_stage(
    run_dir: Path,
    name: str,
    text: Path,
    index_dir: Path,
    lm: str,
    scale: DemoScale,
    trained: dict[str, Path],
    threshold: float | None,
    sets: int,
) -> Stage:
    """One eval set's `ralm eval ppl --compare` table: every condition on the same windows and candidates."""
    passages = Path(f"{index_dir}.passages.jsonl")
    eval_args = ["--text", str(text), "--lm", lm, *_lm_window(scale), "--dtype", resolved_dtype(scale.dtype)]
    if scale.eval_tokens is not None:
        eval_args += ["--max-tokens", str(scale.eval_tokens)]
    eval_key = short_hash([index_dir.name, path_fingerprint(text), *eval_args])
    cache = run_dir / f"retrieval-cache-{eval_key}.jsonl"
    retrieval = ["--index", str(index_dir), "--passages", str(passages), "--retrieval-cache", str(cache)]
    # One table of k + 2 LM scores per window serves every condition (`--compare`): the same windows,
    # candidates and scores for each, and each trained seed costs only its encoder passes.
    rule = [] if threshold is None else [f"{BM25_ABOVE}={threshold!r}"]
    compare = ",".join(
        [c for c in BASELINES if c not in UPPER_BOUNDS]
        + rule
        + [f"{n}={p}" for n, p in trained.items()]
        + list(UPPER_BOUNDS)
    )
    # The trained rerankers' folder names already carry their training settings.
    eval_dir = run_dir / f"eval-{name}-{short_hash([eval_key, compare])}"
    key = "eval" if sets == 1 else f"eval {name}"
    # The report prints the table, with labels: the stage leaves it out (--print-table false).
    return Stage(key, ["eval", "ppl", *eval_args, *retrieval, "--compare", compare, "--print-table", "false",
                       "--output", str(eval_dir)], eval_dir / COMPARE_FILE)  # fmt: skip


def _lm_window(scale: DemoScale) -> list[str]:
    return ["--stride", str(scale.stride), "--query-tokens", str(scale.query_tokens),
            "--max-length", str(scale.max_length), "--max-passage-tokens", str(scale.max_passage_tokens),
            "--k", str(scale.k)]  # fmt: skip


def _train_stage(run_dir: Path, data_dir: Path, encoder: str, scale: DemoScale, seed: int) -> Stage:
    train_args = [
        "--data", str(data_dir), "--encoder.name", encoder, "--encoder.max_length", str(scale.encoder_max_length),
        "--max-prefix-tokens", str(scale.max_prefix_tokens), "--batch-size", str(scale.batch_size),
        "--val-batch-size", str(scale.batch_size), "--val-fraction", str(scale.val_fraction),
        # The export is decided once, at the end, on documents that chose nothing (neither trained on nor
        # selecting the checkpoint): no LM scoring, only encoder passes, so it gets the larger share (power).
        "--decision-fraction", str(scale.decision_fraction),
        "--loss", scale.loss, "--lr", str(scale.lr), "--head-lr", str(scale.head_lr),
        # Warmup must end before the last step; a short override run keeps a tenth of its steps for it.
        "--warmup-steps", str(min(scale.warmup_steps, scale.train_steps // 10)),
        "--max-steps", str(scale.train_steps), "--val-every", str(scale.val_every),
        "--save-every", str(scale.val_every), "--log-every-n-steps", "10", "--wandb", "off", "--keep-checkpoints", "false",
        # Start from BM25's ranking and learn corrections: with a few dozen prefixes a reranker trained from
        # a random head ranks far worse than BM25 (measured 13.71 ppl against 10.59 at --quick).
        "--bm25-prior", "true", "--abstain", str(scale.abstain).lower(), "--seed", str(seed),
    ]  # fmt: skip
    train_dir = run_dir / f"reranker-{short_hash(train_args)}"
    return Stage(
        "train" if len(scale.train_seeds) == 1 else f"train seed {seed}",
        ["train", *train_args, "--output", str(train_dir)],
        train_dir / "reranker",
        resume_options=["--ckpt-path", "last"],
    )


def demo(
    quick: bool = False,
    output: str | None = None,
    split: Literal["test", "dev"] = "test",
    domain: Literal["bible", "python-docs"] = "bible",
    corpus: str | None = None,
    train_text: str | None = None,
    eval_text: str | None = None,
    exclude: list[str] | None = None,
    lm: str | None = None,
    encoder: str | None = None,
    scale: Overrides = _OVERRIDES,
) -> dict:
    """The whole In-Context RALM pipeline on real offline assets, ending with a table and a plot.

    Args:
        quick: The small scale (one seed, fewer prefixes and windows) instead of the full demo (three seeds).
        output: Folder for every output and the commands (default: runs/demo or runs/demo-quick).
        split: Score the test books (default; what the README reports: the related and the unrelated set) or
            the dev books (for choosing settings; never reported). All are kept out of the corpus and training text.
        domain: The offline preset: the Bibles (King James corpus, World English text), or the Python 3.11
            documentation (library reference as corpus, HOWTOs and references to train, tutorial pages held out).
        corpus: Your own retrieval corpus (JSONL {id, title, text}, folder of .txt, or datasets folder)
            instead of the King James Bible.
        train_text: Your own training documents for data-gen (default: the corpus; candidates from a
            prefix's own document are excluded), minus the eval documents and --exclude.
        eval_text: Your own held-out evaluation text (needed with --corpus); its documents and their
            copies (same id or title, or same text) are left out of the corpus and the training text.
        exclude: With --corpus: titles, ids or re:PATTERNs of documents to leave out of the corpus and the
            training text (any other version of your eval text); counted in the report.
        lm: Frozen LM: Hugging Face id, folder or .gguf file (default: the offline SmolLM2-135M).
        encoder: Reranker encoder: Hugging Face id or folder (default: the offline all-MiniLM-L6-v2).
        scale: Overrides of the chosen scale's settings.
    """
    started = time.perf_counter()
    settings = resolve_scale(quick, scale)
    if (corpus is None) != (eval_text is None):
        raise RalmInputError("--corpus and --eval-text: give both (your own texts) or neither (the Bibles)")
    if corpus is None and exclude:
        raise RalmInputError("--exclude: only with --corpus (the Bible demo excludes its dev and test books)")
    default_dir = ("runs/demo-quick" if quick else "runs/demo") + ("" if domain == "bible" else f"-{domain}")
    out = Path(output or default_dir)
    texts, copies = None, None
    if corpus is not None:
        # Every input is read once before any work, so a bad line fails in seconds, not after the index,
        # data-gen and training; and a failed start leaves no run folder behind. The eval documents' copies
        # found there leave the corpus and the training text (ralm.demo.held_out).
        copies = leave_out_eval_documents(user_texts(corpus, train_text, eval_text, tuple(exclude or ())))
        texts = copies.texts
        # Words, not tokens (the LM is not loaded yet): BPE gives about 1.3 tokens a word, so this is the
        # generous side of the first window (max_length tokens, no passage) and one retrieving window.
        check_user_texts(texts, min_eval_words=(settings.max_length + settings.stride) * 2 // 3)
    elif domain == "bible":
        check_bible_books(settings)
    lm_path = lm or default_lm()
    encoder_path = encoder or default_encoder()
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"[demo] {'quick' if quick else 'full'} demo in {out}, {split} split\n"
        f"[demo] settings: {describe(settings, bible=corpus is None and domain == 'bible')}",
        flush=True,
    )
    t0 = time.perf_counter()
    if texts is None:
        texts = (python_docs_texts(out / "data", split) if domain == "python-docs"
                 else bible_texts(out / "data", settings, split))  # fmt: skip
    for role, text in texts.description.items():
        print(f"[demo] {role}: {text}", flush=True)
    if copies is not None:
        print(f"[demo] {describe_copies(copies)}", flush=True)
    times = {"assets": time.perf_counter() - t0}
    results, train_dirs, exclusions, dtype_check = _run_stages(
        out, texts, lm_path, encoder_path, settings, times
    )
    report = build_report(
        out,
        results,
        train_dirs,
        times,
        settings,
        {**texts.description, "excluded": exclusions, "split": split},
        total_seconds=time.perf_counter() - started,
        dtype_check=dtype_check,
    )
    print(report["table"], flush=True)
    return report


def _run_stages(
    out: Path, texts: DemoTexts, lm: str, encoder: str, settings: DemoScale, times: dict[str, float]
) -> tuple[dict[str, dict[str, Path]], dict[str, Path], str, dict | None]:
    """Run (or reuse) every stage, recording seconds in `times`; returns each eval set's conditions' results
    files, the rerankers' training folders by seed, the exclusions line, and the bf16 check (or None)."""
    from ralm.rerank.selection import fit_bm25_threshold  # imports Lightning: not for `--help`

    runner = StageRunner(out)
    plan = _stage_plan(out, texts, lm, encoder, settings)
    evals = len(texts.evals)
    for stage in plan[:-evals]:
        times[stage.key] = runner.run(stage)
    # The trivial abstention rule, fitted on the training prefixes, joins the eval as a baseline.
    threshold = fit_bm25_threshold(str(plan[1].output))
    print(f"[demo] {BM25_ABOVE} rule fitted on the training prefixes: retrieve when BM25 >= {threshold:.3f}")
    plan = _stage_plan(out, texts, lm, encoder, settings, threshold)
    results = {}
    for name, stage in zip(texts.evals, plan[-evals:], strict=True):
        times[stage.key] = runner.run(stage)
        eval_dir = stage.output.parent
        summary = json.loads((eval_dir / COMPARE_FILE).read_text())
        results[name] = {c: eval_dir / c / "results.json" for c in summary["results"]}
    dtype_check = check_dtype(runner, plan[-evals], settings, times)
    trains = [stage.output.parent for stage in plan if stage.command[0] == "train"]
    train_dirs = {f"seed {seed}": d for seed, d in zip(settings.train_seeds, trains, strict=True)}
    exclusions = _exclusions(Path(f"{plan[0].output}.passages.jsonl.excluded.json"), plan[1].output)
    print(f"[demo] exclusions: {exclusions}", flush=True)
    return results, train_dirs, exclusions, dtype_check


def _exclusions(index_record: Path, data_dir: Path) -> str:
    """One line on what the index stage left out of the corpus (``ralm passages``' record) and, where it
    left anything out, data-gen of the training text (its metadata's ``excluded``)."""
    from ralm.data_gen.schema import METADATA_FILE
    from ralm.retrieval.passages import describe_exclusion

    if not index_record.is_file():
        return "not recorded (the index was built by an older ralm)"
    line = describe_exclusion(json.loads(index_record.read_text()), "corpus documents")
    meta = data_dir / METADATA_FILE
    training = json.loads(meta.read_text()).get("excluded", {}) if meta.is_file() else {}
    if training.get("rules"):
        line += f"; training text: {describe_exclusion(training, 'documents')}"
    return line


def build_parser():
    return parser_for(
        demo, prog="ralm demo", renamed={"run_dir": "output", "scale.test_books": "scale.related_books"}
    )


def main(argv: list[str] | None = None) -> None:
    call_with_args(demo, build_parser(), argv)
