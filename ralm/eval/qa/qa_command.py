"""`ralm eval qa`: the RALM paper's open-domain QA, closed book (``--docs 0``) or open book.

Passages come from a DPR-format results file (``ctxs`` with each question) or are retrieved on the fly
from ``--index`` (optionally reranked). Writes ``predictions.jsonl`` (resumable), ``run.json`` and
``results.json`` (exact match, has-answer rate of the passages shown) into ``--output``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from jsonargparse import ArgumentParser

from ralm.cli.command_args import call_with_args, parser_for
from ralm.config_types import NonNegativeInt, PositiveInt, check_arguments
from ralm.errors import RalmInputError
from ralm.eval.qa.data import load_examples
from ralm.eval.qa.odqa import QARunner
from ralm.eval.qa.predictions import RESULTS, PredictionWriter, mean_of, recorded_settings, write_results
from ralm.eval.qa.retrieval import RENAMED_OPTIONS, open_source
from ralm.lm.options import LMOptions
from ralm.progress import progress
from ralm.retrieval.options import RetrievalOptions

# The options recorded in run.json besides `data` (they change the predictions; a rerun into the same
# folder with others is refused), under their names from before the option groups (`recorded_settings`).
_RECORDED = ("lm", "docs", "index", "format", "split", "reranker", "k", "max_new_tokens", "max_length")


def eval_qa(
    data: str,
    output: str,
    lm: LMOptions = LMOptions(),  # noqa: B008 (a default read by the parser, never changed)
    docs: NonNegativeInt = 2,
    retrieval: RetrievalOptions = RetrievalOptions(),  # noqa: B008 (likewise)
    format: str = "auto",
    split: str = "dev",
    reranker: str = "none",
    max_new_tokens: PositiveInt = 10,
    batch_size: PositiveInt = 8,
    limit: PositiveInt | None = None,
    overwrite: bool = False,
) -> dict:
    """Open-domain QA with a frozen LM: closed book (docs 0) or the top `docs` passages in the prompt.

    Args:
        data: Questions: JSONL {id, question, answers}, a DPR results file (question, answers, ctxs) or a
            2WikiMultihopQA / StrategyQA / ASQA file.
        output: Folder for predictions.jsonl, run.json and results.json (a rerun resumes).
        lm: The frozen LM (--lm MODEL, --max-length, --device, --dtype, --gguf-file); its input is
            --max-length tokens (default 1024), never more than the LM's context.
        docs: Passages shown to the LM (0: closed book).
        retrieval: Where passages come from when the data carries no ctxs (--index, --passages), the BM25
            candidates handed to the reranker (--k) and the threads of a batch's search (--threads).
        format: Input format: auto, jsonl, 2wiki, strategyqa, asqa or dpr.
        split: ASQA split to read.
        reranker: none, zero-shot (the LM scores each candidate) or a trained reranker folder.
        max_new_tokens: Greedy tokens generated per answer (the paper: 10).
        batch_size: Examples decoded together.
        limit: Only the first this many examples.
        overwrite: Discard predictions already in `output` instead of resuming.
    """
    arguments = dict(locals())  # taken first: exactly the parameters
    check_arguments(eval_qa, arguments)  # the CLI checked them already; a Python caller has not
    lm.require()
    examples = load_examples(data, format, split, limit)
    if docs > 0 and retrieval.index is None:
        missing = next((ex for ex in examples if ex.ctxs is None), None)
        if missing is not None:
            raise RalmInputError(f"{data}: example '{missing.id}' has no ctxs; give --index or --docs 0")
    settings = {
        "command": "eval qa",
        **recorded_settings(_RECORDED, arguments, lm, retrieval),
        "data": str(Path(data).resolve()),
    }
    writer = PredictionWriter(output, settings, overwrite=overwrite)
    model = lm.load()
    input_length = lm.input_length(model.context_length)  # the one cap rule, applied once
    source = open_source(retrieval, model, reranker, input_length) if docs > 0 else None
    runner = QARunner(model, docs, source, max_new_tokens=max_new_tokens, input_length=input_length)
    runner.check(examples)
    start = time.perf_counter()
    records = _answer_all(runner, examples, writer, batch_size)
    summary = _summary(records, len(examples))
    results = write_results(output, "ralm-eval-qa/1", settings, summary, runner.fitter.cuts, start, model)
    m = results["metrics"]
    book = "closed book" if docs == 0 else f"open book, {docs} passages"
    has = f"  has-answer {m['has_answer']:.3f}" if m["has_answer"] is not None else ""
    print(f"qa ({book}) {len(records)} examples: EM {m['em']:.3f}{has}  -> {Path(output) / RESULTS}")
    return results


def _summary(records: list[dict], total: int) -> dict:
    """Counts and metrics over the finished records (has-answer: None when no prompt showed passages)."""
    metrics = {
        key: mean_of(records, field)
        for key, field in (("em", "em"), ("has_answer", "has_answer"), ("seconds_per_example", "seconds"))
    }
    return {"examples": total, "done": len(records), "metrics": metrics}


def _answer_all(runner: QARunner, examples: list, writer: PredictionWriter, batch_size: int) -> list[dict]:
    """Answer the examples not yet in `writer`, `batch_size` at a time; every finished record, in order."""
    todo = [ex for ex in examples if ex.id not in writer.done]
    with (
        writer,
        progress(len(examples), initial=len(examples) - len(todo), desc="qa", unit="question") as bar,
    ):
        for i in range(0, len(todo), batch_size):
            chunk = todo[i : i + batch_size]
            for record in runner.answer_batch(chunk):
                writer.write(record)
            bar.update(len(chunk))
        return writer.records([ex.id for ex in examples])


def build_parser() -> ArgumentParser:
    return parser_for(eval_qa, prog="ralm eval qa", renamed=RENAMED_OPTIONS)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    call_with_args(eval_qa, build_parser(), argv)


if __name__ == "__main__":
    main()
