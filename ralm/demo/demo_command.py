"""`ralm demo`: the whole pipeline of both papers' retrieval-augmented LM on real offline assets.

    ralm demo --quick                 # the small scale (one seed; README: its time on a 2-core CPU)
    ralm demo                         # the full demo (three training seeds)
    ralm demo --split dev             # the dev book, for choosing settings (never reported)
    ralm demo --domain python-docs    # the same on the Python documentation (the paper's passage)
    ralm demo --flare [--quick]       # FLARE against its baselines on long-form generation

King James Bible as retrieval corpus minus the dev and test books, the World English Bible's other books as
training text, each BM25 candidate handed to the LM as its continuation at the full scale (from its
best-matching sentence into the next passage of its document; chosen on the dev book); then `ralm index` ->
`ralm data-gen` -> `ralm train` (one reranker per seed, with abstention) -> one `ralm eval ppl --compare`
table per eval set: no retrieval, no retrieval with the context cut as BM25's passage cuts it, BM25 top-1,
random among the top k, zero-shot LM reranking, the threshold rules, each trained reranker, and the best of
k (with and without the option of no passage); beside them BM25's top-1 in the other passage form and for
the true next tokens (a bound); each with paired
bootstrap CIs against BM25 and no retrieval, and a report (tables, verdicts, plot) in the run folder beside
the exact commands of each stage. The window keeps the paper's proportions: a passage takes at most a quarter
of the LM's input (the presets: 128 of 512 tokens; the paper: 256 of 1,024). The test split has text the
corpus retells (retrieval should help), text it does not and (the full demo) text it cannot inform (the
reranker should abstain on both).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from ralm.cli.command_args import call_with_args, parser_for
from ralm.demo.assets import bible_texts, check_bible_books, python_docs_texts
from ralm.demo.presets import BookOptions, bible_scale, describe_books, resolve_books
from ralm.errors import RalmInputError
from ralm.pipeline.models import default_encoder, default_lm
from ralm.pipeline.runner import run_pipeline
from ralm.pipeline.scale import ScaleOptions, describe, resolve_scale

_SCALE, _BOOKS = ScaleOptions(), BookOptions()  # never mutated; the parser builds fresh ones


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
    scale: ScaleOptions = _SCALE,
    books: BookOptions = _BOOKS,
    flare: bool = False,
) -> dict:
    """The whole In-Context RALM pipeline on real offline assets, ending with a table and a plot.

    Args:
        quick: The small scale (one seed, fewer prefixes and windows) instead of the full demo (three seeds).
        output: Folder for every output and the commands (default: runs/demo or runs/demo-quick).
        split: Score the test books (default; what the README reports: the related and the unrelated set) or
            the dev books (for choosing settings; never reported). All are kept out of the corpus and training
            text.
        domain: The offline preset: the Bibles (King James corpus, World English text), or the Python 3.11
            documentation (library reference as corpus, HOWTOs and references to train, tutorial pages held
            out).
        corpus: Your own retrieval corpus (JSONL {id, title, text}, folder of .txt, or datasets folder)
            instead of the King James Bible.
        train_text: Your own training documents for data-gen (default: the corpus; candidates from a
            prefix's own document are excluded), minus the eval documents and --exclude.
        eval_text: Your own held-out evaluation text (needed with --corpus); its documents and their
            copies (same id or title, or same text) are left out of the corpus and the training text.
        exclude: With --corpus: titles, ids or re:PATTERNs of documents to leave out of the corpus and the
            training text (any other version of your eval text); counted in the report.
        lm: Frozen LM: Hugging Face id, folder or .gguf file (default: the offline Gemma-3-270m base).
        encoder: Reranker encoder: Hugging Face id or folder (default: the offline all-MiniLM-L6-v2).
        scale: Overrides of the chosen scale's settings.
        books: The Bible demo's dev and test books (World English Bible OSIS ids), instead of the scale's.
        flare: Instead of the perplexity pipeline, the long-form generation test (``ralm.demo.flare_demo``):
            the LM continues prompts of the related test book with no retrieval, single-time retrieval,
            retrieval every few tokens and FLARE (theta chosen on the dev book), scored against the book's
            own continuation (default folder: runs/demo-flare or runs/demo-flare-quick).
    """
    started = time.perf_counter()
    bible = corpus is None and domain == "bible"
    settings = bible_scale(quick, scale) if bible else resolve_scale(quick, scale)
    split_books = resolve_books(quick, books)
    if (corpus is None) != (eval_text is None):
        raise RalmInputError("--corpus and --eval-text: give both (your own texts) or neither (the Bibles)")
    if corpus is None and exclude:
        raise RalmInputError("--exclude: only with --corpus (the Bible demo excludes its dev and test books)")
    default_dir = ("runs/demo" + ("-flare" if flare else "") + ("-quick" if quick else "")) + (
        "" if domain == "bible" else f"-{domain}"
    )
    if flare:
        if corpus is not None or domain != "bible" or split != "test":
            raise RalmInputError(
                "--flare runs only on the Bible demo's test books: leave out --corpus, --domain and --split"
            )
        from ralm.demo.flare_demo import flare_demo

        check_bible_books(split_books)
        out = Path(output or default_dir)
        out.mkdir(parents=True, exist_ok=True)
        return flare_demo(quick, out, split_books, lm or default_lm(), settings)
    if corpus is not None:  # your own texts: `ralm run` with the demo's folder
        from ralm.pipeline.run_command import run

        return run(corpus, eval_text, train_text, exclude, lm, encoder, quick, output or default_dir, scale)
    if domain == "bible":
        check_bible_books(split_books)
    lm_path, encoder_path = lm or default_lm(), encoder or default_encoder()
    out = Path(output or default_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(
        f"[demo] {'quick' if quick else 'full'} demo in {out}, {split} split\n"
        f"[demo] settings: {describe(settings)}" + (f"  {describe_books(split_books)}" if bible else ""),
        flush=True,
    )
    t0 = time.perf_counter()
    # The full demo's test split adds text the corpus cannot inform (ralm.demo.assets.foreign_rows).
    texts = (
        bible_texts(out / "data", split_books, split, foreign=not quick)
        if bible
        else python_docs_texts(out / "data", split, foreign=not quick)
    )
    for role, text in texts.description.items():
        print(f"[demo] {role}: {text}", flush=True)
    times = {"assets": time.perf_counter() - t0}
    description = {"split": split, **({"books": describe_books(split_books)} if bible else {})}
    return run_pipeline(out, texts, lm_path, encoder_path, settings, times, description, started, "demo")


RENAMED = {
    "run_dir": "output",
    "scale.test_books": "books.related_books",
    "scale.dev_books": "books.dev_books",
    "scale.related_books": "books.related_books",
    "scale.unrelated_books": "books.unrelated_books",
}
"""Former option names -> their new names (the books left the scale: `ralm run` has none)."""


def build_parser():
    return parser_for(demo, prog="ralm demo", renamed=RENAMED)


def main(argv: list[str] | None = None) -> None:
    call_with_args(demo, build_parser(), argv)
