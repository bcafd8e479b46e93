"""`ralm run`: the whole pipeline on your own data (corpus, held-out eval text, optional training text).

    ralm run --corpus docs.jsonl --eval-text held_out.jsonl [--train-text train.jsonl]
             [--exclude '[re:held-out-.*]'] [--lm gpt2] [--encoder roberta-base] [--quick] [--output DIR]

Index -> data-gen -> train (with abstention and the BM25 prior, one reranker per seed) -> one
`ralm eval ppl --compare` table on the eval text: no retrieval (also with the context cut as BM25's passage
cuts it), BM25 top-1, random, zero-shot, the trained rerankers and both bounds, each with paired bootstrap
CIs and copy rates, and the same on the retrieving windows alone. The window keeps the paper's proportions
(a 128-token passage in a 512-token input by default; at most a quarter is enforced); `report.txt`,
`report.png` and `commands.sh` in the run folder. The eval documents never reach training or retrieval:
they, their copies and what --exclude names are left out of the corpus and the training text
(ralm.pipeline.held_out). Every input is read before any work; stages are reused only when their inputs'
contents and settings are unchanged. `ralm demo` runs the same pipeline on offline presets.
"""

from __future__ import annotations

import time
from pathlib import Path

from ralm.cli.command_args import call_with_args, parser_for
from ralm.pipeline.held_out import describe_copies, leave_out_eval_documents
from ralm.pipeline.models import default_encoder, default_lm
from ralm.pipeline.runner import run_pipeline
from ralm.pipeline.scale import ScaleOptions, describe, resolve_scale
from ralm.pipeline.texts import check_user_texts, user_texts

_SCALE = ScaleOptions()  # never mutated; the parser builds a fresh one from the command line


def run(
    corpus: str,
    eval_text: str,
    train_text: str | None = None,
    exclude: list[str] | None = None,
    lm: str | None = None,
    encoder: str | None = None,
    quick: bool = False,
    output: str = "runs/run",
    scale: ScaleOptions = _SCALE,
) -> dict:
    """The In-Context RALM pipeline on your own corpus and held-out text, ending with a table and a plot.

    Args:
        corpus: Retrieval corpus (JSONL {id, title, text}, folder of .txt, or datasets folder).
        eval_text: Held-out evaluation text (a text file, JSONL documents or a datasets folder).
        train_text: Training documents for data-gen (default: the corpus; a prefix's own document is
            never its candidate). Either way the eval documents and what --exclude names are left out.
        exclude: Titles, ids or re:PATTERNs of documents to leave out of the corpus and the training text:
            every version of the eval text they hold. Copies of the eval documents are left out without
            it: same id or title as an eval document (JSONL or datasets eval text with ids), or the same
            text up to whitespace (docs/formats.md); the report counts what left each input.
        lm: Frozen LM: Hugging Face id, folder or .gguf file (default: the offline Gemma-3-270m base).
        encoder: Reranker encoder: Hugging Face id or folder (default: the offline all-MiniLM-L6-v2).
        quick: The small scale (fewer prefixes and steps, one seed).
        output: Folder for every output and the commands.
        scale: Overrides of the scale's settings (e.g. --k 16).
    """
    started = time.perf_counter()
    settings = resolve_scale(quick, scale)
    # Every input is read once before any work, so a bad line fails in seconds, not after the index,
    # data-gen and training; and a failed start leaves no run folder behind. The eval documents' copies
    # found there leave the corpus and the training text (ralm.pipeline.held_out).
    copies = leave_out_eval_documents(user_texts(corpus, train_text, eval_text, tuple(exclude or ())))
    texts = copies.texts
    # Words, not tokens (the LM is not loaded yet): BPE gives about 1.3 tokens a word, so this is the
    # generous side of the first window (max_length tokens, no passage) and one retrieving window.
    check_user_texts(texts, min_eval_words=(settings.max_length + settings.stride) * 2 // 3)
    lm_path, encoder_path = lm or default_lm(), encoder or default_encoder()
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"[run] {'quick' if quick else 'full'} run in {out}\n[run] settings: {describe(settings)}",
        flush=True,
    )
    for role, text in texts.description.items():
        print(f"[run] {role}: {text}", flush=True)
    print(f"[run] {describe_copies(copies)}", flush=True)
    times = {"assets": time.perf_counter() - started}
    return run_pipeline(out, texts, lm_path, encoder_path, settings, times, {"split": "test"}, started, "run")


def build_parser():
    return parser_for(run, prog="ralm run", renamed={"run_dir": "output"})


def main(argv: list[str] | None = None) -> None:
    call_with_args(run, build_parser(), argv)
