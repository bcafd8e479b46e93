"""`ralm eval flare`: FLARE active retrieval and its baselines on QA data, with resumable predictions.

Writes ``predictions.jsonl`` (one line per example, with the trace of every step: its text, the queries
it sent, whether a search's passages reached its prompt, the passage ids), ``run.json`` (the settings) and
``results.json`` (EM, F1, precision and recall of the text after "answer is", yes/no accuracy or ROUGE-L
where the data calls for them; for long-form continuation, ``--format continuation``, ROUGE-L F1, token F1
and name recall of the whole generation against the true continuation; the retrieval rate and the search
rate, searches, LM calls and seconds per example) into ``--output``.
"""

from __future__ import annotations

import codecs
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from jsonargparse import ArgumentParser

from ralm.cli.command_args import call_with_args, parser_for
from ralm.config_types import PositiveInt, check_arguments
from ralm.errors import RalmInputError
from ralm.eval.qa.data import CONTINUATION, FORMATS, QAExample, load_examples, load_exemplars
from ralm.eval.qa.flare import FlareRunner, run_batched
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.flare_sweep import parse_flare_sweep, run_flare_sweep
from ralm.eval.qa.metrics import score_answer
from ralm.eval.qa.predictions import RESULTS, PredictionWriter, mean_of, recorded_settings, write_results
from ralm.eval.qa.retrieval import RENAMED_OPTIONS, PassageSource, open_source
from ralm.lm.options import LMOptions
from ralm.passage_rules import NO_RETRIEVAL
from ralm.progress import progress
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm

log = logging.getLogger(__name__)

# The options recorded in run.json besides `data` and `flare` (they change the predictions; a rerun into
# the same folder with others is refused), under their names from before the option groups
# (`recorded_settings`: the same keys and values, so the format is unchanged).
_RECORDED = ("lm", "index", "format", "split", "exemplars", "reranker", "k", "max_length")
FORMAT = "ralm-eval-flare/2"
"""Format of predictions.jsonl and results.json, recorded in run.json too, so that a folder written with
/1's counts (a search counted as retrieving) is refused instead of mixed with /2's."""


def _record(ex: QAExample, out: dict) -> dict:
    scores = score_answer(out["generation"], ex.answers, ex.task, ex.long_answers, ex.answer_groups)
    return {"id": ex.id, "question": ex.question, "answers": ex.answers, **scores, **out}


def summarize(records: list[dict], total: int) -> dict:
    """Aggregate metrics over finished examples. Retrieval rate: steps whose prompt showed passages of a
    search made during generation; search rate: steps that sent a query during generation (both over all
    steps); searches per example: every query sent, the input's included."""
    steps = sum(r["steps"] for r in records)
    keys = ("em", "f1", "precision", "recall", "accuracy", "rouge_l", "name_recall")
    metrics = {k: mean_of(records, k) for k in keys}
    metrics = {k: v for k, v in metrics.items() if v is not None}
    metrics.update(
        retrieval_rate=sum(r["retrieval_steps"] for r in records) / steps if steps else 0.0,
        search_rate=sum(r["search_steps"] for r in records) / steps if steps else 0.0,
        searches_per_example=mean_of(records, "searches"),
        lm_calls_per_example=mean_of(records, "lm_calls"),
        tokens_fed_per_example=mean_of(records, "tokens_fed"),
        seconds_per_example=mean_of(records, "seconds"),
    )
    return {"examples": total, "done": len(records), "metrics": metrics}


def eval_flare(
    data: str,
    output: str,
    lm: LMOptions = LMOptions(),  # noqa: B008 (a default read by the parser, never changed)
    retrieval: RetrievalOptions = RetrievalOptions(),  # noqa: B008 (likewise)
    format: str = "auto",
    split: str = "dev",
    exemplars: str | None = None,
    flare: FlareOptions = FlareOptions(),  # noqa: B008 (likewise)
    reranker: str = "none",
    batch_size: PositiveInt = 8,
    limit: PositiveInt | None = None,
    overwrite: bool = False,
    sweep: str | None = None,
    passage_form: PassageForm = RETRIEVED,
) -> dict:
    """FLARE active retrieval and its baselines (no-retrieval, single, window, sentence) on QA data.

    Args:
        data: Questions: JSONL {id, question, answers[, context]} or a 2WikiMultihopQA / StrategyQA / ASQA
            file; or texts to continue: JSONL {id, prompt, continuation} (long-form generation).
        output: Folder for predictions.jsonl, run.json and results.json (a rerun resumes).
        lm: The frozen LM (--lm MODEL, --max-length, --device, --dtype, --gguf-file); its input is
            --max-length tokens (default 1024), never more than the LM's context.
        retrieval: The index (--index, needed by every method but no-retrieval; --passages), the BM25
            candidates handed to the reranker (--k) and the threads of a batched search (--threads).
        format: Input format: auto, jsonl, 2wiki, strategyqa, asqa, dpr or continuation.
        split: ASQA split to read.
        exemplars: Few-shot exemplars: JSONL {question, answer} (answer = full target output).
        flare: FLARE and baseline settings.
        reranker: none, zero-shot (the LM scores each candidate) or a trained reranker folder.
        batch_size: Examples decoded together (no-retrieval and single only).
        limit: Only the first this many examples.
        overwrite: Discard predictions already in `output` instead of resuming.
        sweep: FLARE over several values of one setting, e.g. theta=0.2,0.4,0.6,0.8,1.0: one run per value
            in OUTPUT/theta=V plus single-time and no retrieval as references, then sweep.json and
            sweep.png (EM and F1 against the share of sentences that retrieved).
        passage_form: What each retrieved passage hands the LM: itself (retrieved) or from its sentence that
            best matches the query issued on into the next passage of its document (continuation, as
            `ralm eval ppl --passage-form`), cut to the room the prompt leaves.
    """
    arguments = dict(locals())  # taken first: exactly the parameters
    check_arguments(eval_flare, arguments)  # the CLI checked them already; a Python caller has not
    lm.require()
    flare = _checked(flare, format, retrieval)
    plan = parse_flare_sweep(sweep, flare) if sweep is not None else None
    examples = load_examples(data, format, split, limit)
    shots = load_exemplars(exemplars)
    layout = "continuation" if examples[0].task == CONTINUATION else "qa"
    if layout == "continuation" and shots:
        raise RalmInputError("--exemplars: long-form continuation (--format continuation) shows none")
    recorded = recorded_settings(_RECORDED, arguments, lm, retrieval)
    settings = {
        "command": "eval flare",
        "predictions_format": FORMAT,
        **recorded,
        "data": str(Path(data).resolve()),
        "flare": asdict(flare),
        # recorded only when not the paper's passage: earlier runs' settings (and resumes) stay as they were
        **({"passage_form": passage_form} if passage_form != RETRIEVED else {}),
    }
    model = lm.load()
    input_length = lm.input_length(model.context_length)  # the one cap rule, applied once
    # No retrieval needs no index (and no reranker), unless a sweep runs the retrieving methods too.
    needs_source = flare.method != NO_RETRIEVAL or plan is not None
    source = open_source(retrieval, model, reranker, input_length, passage_form) if needs_source else None
    run = FlareRun(model, source, examples, shots, batch_size, input_length, overwrite, layout)
    if plan is not None:
        return run_flare_sweep(plan, output, lambda cfg, out: run_flare(run, cfg, out, settings))
    return run_flare(run, flare, output, settings)


def _checked(flare: FlareOptions, format: str, retrieval: RetrievalOptions) -> FlareOptions:
    """`flare` with a stop pattern typed on a command line read as YAML reads it; choices that cannot run
    together are input errors, raised before any model loads."""
    if "\\" in flare.stop:
        # "\n\n" typed on a command line arrives as backslashes; YAML's "\n\n" is already a newline.
        flare = replace(flare, stop=codecs.decode(flare.stop, "unicode_escape"))
    if format not in FORMATS:
        raise RalmInputError(f"--format must be one of {', '.join(FORMATS)}, got '{format}'")
    if flare.method != NO_RETRIEVAL and retrieval.index is None:
        raise RalmInputError(f"--method {flare.method} needs --index")
    return flare


@dataclass(frozen=True)
class FlareRun:
    """What every method of one `eval flare` call shares: the LM, the passage source (None: no index), the
    questions and exemplars, and how they run (`input_length`: resolved once, ``LMOptions.input_length``)."""

    model: Any
    source: PassageSource | None
    examples: list[QAExample]
    shots: list
    batch_size: int
    input_length: int
    overwrite: bool
    layout: str = "qa"
    """``qa`` or ``continuation`` (``ralm.eval.qa.flare``)."""


def run_flare(run: FlareRun, flare: FlareOptions, output: str, settings: dict) -> dict:
    """One method on the run's examples into `output` (resumable), with its summary line; returns
    results.json. `settings` are run.json's, with `flare` recorded as these options."""
    settings = {**settings, "flare": asdict(flare)}
    writer = PredictionWriter(output, settings, overwrite=run.overwrite)
    retriever = run.source if flare.method != NO_RETRIEVAL else None
    runner = FlareRunner(
        run.model, flare, retriever, run.shots, input_length=run.input_length, layout=run.layout
    )
    runner.check(run.examples)
    start = time.perf_counter()
    with writer:
        records = _answer_all(runner, run, writer)
    summary = summarize(records, len(run.examples))
    results = write_results(output, FORMAT, settings, summary, runner.fitter.cuts, start, run.model)
    m = results["metrics"]
    scores = (
        f"ROUGE-L {m.get('rouge_l', 0):.3f}  F1 {m.get('f1', 0):.3f}  names {m.get('name_recall') or 0:.3f}"
        if run.layout == "continuation"
        else f"EM {m.get('em', 0):.3f}  F1 {m.get('f1', 0):.3f}"
    )
    print(
        f"flare[{flare.method}] {len(records)} examples: {scores}  "
        f"retrieval rate {m['retrieval_rate']:.2f} (searched at {m['search_rate']:.2f} of steps, "
        f"{m['searches_per_example'] or 0:.2f} searches/ex)  LM calls/ex {m['lm_calls_per_example']:.2f}  "
        f"s/ex {m['seconds_per_example']:.2f}  -> {Path(output) / RESULTS}"
    )
    return results


def _answer_all(runner: FlareRunner, run: FlareRun, writer: PredictionWriter) -> list[dict]:
    """Answer the examples not yet in `writer` (no-retrieval and single in batches); every finished
    record, in order."""
    examples, method = run.examples, runner.cfg.method
    todo = [ex for ex in examples if ex.id not in writer.done]
    done = len(examples) - len(todo)
    unit = "prompt" if runner.layout == "continuation" else "question"
    with progress(len(examples), initial=done, desc=f"flare[{method}]", unit=unit) as bar:
        if method in (NO_RETRIEVAL, "single"):
            for i in range(0, len(todo), run.batch_size):
                chunk = todo[i : i + run.batch_size]
                for ex, out in zip(chunk, run_batched(runner, chunk, run.batch_size), strict=True):
                    writer.write(_record(ex, out))
                bar.update(len(chunk))
        else:
            for ex in todo:
                writer.write(_record(ex, runner.answer(ex)))
                bar.update(1)
    return writer.records([ex.id for ex in examples])


def build_parser() -> ArgumentParser:
    return parser_for(eval_flare, prog="ralm eval flare", renamed=RENAMED_OPTIONS)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    call_with_args(eval_flare, build_parser(), argv)


if __name__ == "__main__":
    main()
