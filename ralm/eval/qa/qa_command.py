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

from ralm.command_args import call_with_args, parser_for
from ralm.config_types import NonNegativeInt, PositiveInt, check_arguments
from ralm.errors import RalmInputError
from ralm.eval.qa.data import load_examples
from ralm.eval.qa.odqa import QARunner
from ralm.eval.qa.predictions import RESULTS, PredictionWriter, mean_of, write_results
from ralm.eval.qa.retrieval import RENAMED_OPTIONS, open_source
from ralm.progress import progress

# The options recorded in run.json besides `data` (they change the predictions; a rerun into the same
# folder with others is refused).
_RECORDED = ("lm", "docs", "index", "format", "split", "reranker", "k", "max_new_tokens", "max_length")


def eval_qa(
    data: str,
    output: str,
    lm: str,
    docs: NonNegativeInt = 2,
    index: str | None = None,
    passages: str | None = None,
    format: str = "auto",
    split: str = "dev",
    reranker: str = "none",
    k: PositiveInt = 16,
    max_new_tokens: PositiveInt = 10,
    max_length: PositiveInt = 1024,
    batch_size: PositiveInt = 8,
    limit: PositiveInt | None = None,
    device: str = "auto",
    dtype: str = "auto",
    gguf_file: str | None = None,
    overwrite: bool = False,
) -> dict:
    """Open-domain QA with a frozen LM: closed book (docs 0) or the top `docs` passages in the prompt.

    Args:
        data: Questions: JSONL {id, question, answers}, a DPR results file (question, answers, ctxs) or a
            2WikiMultihopQA / StrategyQA / ASQA file.
        output: Folder for predictions.jsonl, run.json and results.json (a rerun resumes).
        lm: Hugging Face id or folder of the causal LM, or a .gguf file.
        docs: Passages shown to the LM (0: closed book).
        index: Index folder to retrieve from when the data carries no ctxs.
        passages: Passages JSONL of the index, when it moved since indexing.
        format: Input format: auto, jsonl, 2wiki, strategyqa, asqa or dpr.
        split: ASQA split to read.
        reranker: none, zero-shot (the LM scores each candidate) or a trained reranker folder.
        k: BM25 candidates handed to the reranker.
        max_new_tokens: Greedy tokens generated per answer (the paper: 10).
        max_length: Context cap in tokens (the LM's own context if smaller).
        batch_size: Examples decoded together.
        limit: Only the first this many examples.
        device: auto (cuda when available), cpu or cuda[:n].
        dtype: auto (bf16 on cuda, fp32 on cpu), float32, bfloat16 or float16.
        gguf_file: GGUF file name inside the `lm` folder.
        overwrite: Discard predictions already in `output` instead of resuming.
    """
    arguments = dict(locals())  # taken first: exactly the parameters
    check_arguments(eval_qa, arguments)  # the CLI checked them already; a Python caller has not
    examples = load_examples(data, format, split, limit)
    if docs > 0 and index is None:
        missing = next((ex for ex in examples if ex.ctxs is None), None)
        if missing is not None:
            raise RalmInputError(f"{data}: example '{missing.id}' has no ctxs; give --index or --docs 0")
    settings = {
        "command": "eval qa",
        **{name: arguments[name] for name in _RECORDED},
        "data": str(Path(data).resolve()),
    }
    from ralm.lm.loading import load_lm

    writer = PredictionWriter(output, settings, overwrite=overwrite)
    model = load_lm(lm, device=device, dtype=dtype, gguf_file=gguf_file)
    source = open_source(index, model, reranker, k, max_length, passages) if docs > 0 else None
    runner = QARunner(model, docs=docs, source=source, max_new_tokens=max_new_tokens, max_length=max_length)
    runner.check(examples)
    start = time.perf_counter()
    records = _answer_all(runner, examples, writer, batch_size)
    summary = {
        "examples": len(examples),
        "done": len(records),
        "metrics": {
            "em": mean_of(records, "em"),
            "has_answer": mean_of(records, "has_answer"),
            "seconds_per_example": mean_of(records, "seconds"),
        },
    }
    results = write_results(output, "ralm-eval-qa/1", settings, summary, runner.fitter.cuts, start, model)
    m = results["metrics"]
    book = "closed book" if docs == 0 else f"open book, {docs} passages"
    has = f"  has-answer {m['has_answer']:.3f}" if m["has_answer"] is not None else ""
    print(f"qa ({book}) {len(records)} examples: EM {m['em']:.3f}{has}  -> {Path(output) / RESULTS}")
    return results


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
