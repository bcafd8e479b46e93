"""`ralm eval ppl`: strided In-Context RALM perplexity with no retrieval, BM25 top-1, zero-shot, trained
or oracle reranking, sweeps over the stride or the query length, and several conditions from one pass.

ralm eval ppl --text test.txt --lm gpt2 --index idx/ --output runs/bm25            # BM25 top-1, s=4, ℓ=32
ralm eval ppl --text test.txt --lm gpt2 --no-retrieval --output runs/base
ralm eval ppl ... --reranker zero-shot --k 16 [--rerank-lm distilgpt2]              # §6.1
ralm eval ppl ... --reranker runs/reranker/export                                    # §6.2, a trained folder
ralm eval ppl ... --sweep stride=4,8,16,32                                           # Figure 5
ralm eval ppl ... --compare no-retrieval,bm25,zero-shot,oracle,trained=runs/reranker/export
                                                                                     # k+1 LM rows/window
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ralm.atomic_files import ensure_writable_dir
from ralm.cli.command_args import TextForm, call_with_args, parser_for
from ralm.config_types import AtLeastTwoInt, NonNegativeInt, PositiveInt, check_arguments
from ralm.errors import RalmInputError
from ralm.eval.ppl.chooser_loading import load_rerank_lms, load_rerankers, play_exports
from ralm.eval.ppl.conditions import (
    Condition,
    check_conditions,
    conditions_spec,
    parse_conditions,
    single_condition,
)
from ralm.eval.ppl.eval_text import read_eval_documents
from ralm.eval.ppl.options import FUTURE, BatchOptions, QueryOptions, RerankingOptions
from ralm.eval.ppl.summary import report_points
from ralm.eval.ppl.sweep import Sweep, parse_sweep
from ralm.lm.options import LMOptions, WindowOptions, window_fits
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm

if TYPE_CHECKING:
    from ralm.eval.ppl.run import PplSettings
    from ralm.lm.loading import FrozenLM
    from ralm.retrieval.types import Retriever


RENAMED = {
    "window.max_length": "lm.max_length",
    "reranking.k": "retrieval.k",
    "runtime.device": "lm.device",
    "runtime.dtype": "lm.dtype",
    "runtime.batch_size": "batching.batch_size",
    "runtime.max_batch_tokens": "batching.max_batch_tokens",
    "runtime.retrieval_threads": "retrieval.threads",
    "retrieval_threads": "retrieval.threads",
}
"""Former option names (groups before the shared LM and retrieval groups) -> their new names."""

_LM, _RETRIEVAL, _WINDOW, _QUERY, _RERANKING, _BATCHING = (
    LMOptions(),
    RetrievalOptions(),
    WindowOptions(),
    QueryOptions(),
    RerankingOptions(),
    BatchOptions(),
)


TEXT_FORMS = {
    "compare": TextForm(parse_conditions, conditions_spec),
    "sweep": TextForm(parse_sweep, lambda sweep: sweep.spec),
}
"""The typed parameters the command line and YAML give as text (``--compare no-retrieval,bm25``,
``--sweep stride=4,8``), read into Conditions and a Sweep before the call."""


def _check_options(
    reranking: RerankingOptions, no_retrieval: bool, retrieval: RetrievalOptions, compared: bool
) -> None:
    """The rules between option groups and top-level options (each group checks its own fields)."""
    if compared:
        conflicts = {
            "--no-retrieval": no_retrieval,
            "--rerank-lm": bool(reranking.rerank_lm),
            f"--reranker {reranking.reranker}": reranking.reranker != "none",
        }
        for option, given in conflicts.items():
            if given:
                raise RalmInputError(
                    f"--compare: cannot be combined with {option} (list the conditions instead)"
                )
        retrieval.require("with --compare")
    if no_retrieval and (reranking.reranker != "none" or reranking.rerank_lm):
        raise RalmInputError(f"--no-retrieval: cannot be combined with --reranker {reranking.reranker}")
    if not no_retrieval:
        retrieval.require("unless --no-retrieval")


def _check_lengths(
    input_length: int, stride: int, max_passage_tokens: int, retrieval: bool, rank_tokens: int
) -> None:
    """Every input must hold a whole passage, the targets and (same-LM zero-shot) the ranking tokens."""
    if not window_fits(input_length, 0, stride):
        raise RalmInputError(f"--stride {stride}: larger than --max-length {input_length}")
    if retrieval and not window_fits(input_length, max_passage_tokens, stride, rank_tokens):
        parts = f"a {max_passage_tokens}-token passage and {stride} target tokens"
        if rank_tokens:
            parts += f" and {rank_tokens} ranking tokens"
        raise RalmInputError(
            f"--max-length {input_length}: too small to hold {parts}; lower --max-passage-tokens"
        )


def eval_ppl(
    text: str,
    output: str,
    lm: LMOptions = _LM,
    retrieval: RetrievalOptions = _RETRIEVAL,
    no_retrieval: bool = False,
    text_field: str = "text",
    max_tokens: AtLeastTwoInt | None = None,
    retrieval_cache: str | None = None,
    sweep: Sweep | None = None,
    compare: Sequence[Condition] | None = None,
    print_table: bool = True,
    seed: NonNegativeInt = 0,
    bootstrap_resamples: PositiveInt = 2000,
    bootstrap: Literal["blocks", "windows"] = "blocks",
    window: WindowOptions = _WINDOW,
    query: QueryOptions = _QUERY,
    passage_form: PassageForm = RETRIEVED,
    reranking: RerankingOptions = _RERANKING,
    batching: BatchOptions = _BATCHING,
    progress: bool = True,
) -> dict:
    """Strided In-Context RALM perplexity (Ram et al. 2023) of a text under a frozen LM.

    Args:
        text: Evaluation text: a text file, JSONL documents, or a `datasets` folder.
        output: Folder for results.json and windows.jsonl (per point of a sweep: OUTPUT/stride=8/...).
        lm: The frozen LM (``--lm`` is short for ``--lm.model``) and its input length.
        retrieval: The index (not needed with --no-retrieval) and the candidates per window (``--k``; reranked
            by zero-shot, oracle or a trained reranker).
        no_retrieval: The baseline: the LM alone, same windows.
        text_field: Text column of a JSONL or datasets input.
        max_tokens: Evaluate only the first MAX_TOKENS tokens of the text (quick runs).
        retrieval_cache: Retrieval cache file (default: under $RALM_CACHE, keyed by the index).
        sweep: Run several points sharing one retrieval pass, e.g. stride=4,8,16,32, query-tokens=16,32,64 or
            max_length=256,512,1024 (with --compare: every condition against the window; sweep.json also gives
            each point's perplexity on the targets every point scores with a passage). From Python a
            ``Sweep`` (``Sweep("stride", (4, 8))``; ``parse_sweep`` reads the text).
        compare: Several conditions from one table of candidate scores (k + 1 LM rows per window), e.g.
            no-retrieval,bm25,zero-shot,oracle,trained=runs/reranker/export (NAME=PATH: a trained reranker);
            from Python a list of ``Condition``s (``parse_conditions`` reads the text). Writes
            OUTPUT/<condition>/results.json and windows.jsonl, OUTPUT/candidates.jsonl and compare.json.
            Built-in conditions: no-retrieval, bm25, random (seeded, among the top k),
            zero-shot, oracle (best of k), oracle-or-none (best of k or no passage); with a value:
            bm25-above=T (BM25's top-1 when its score is >= T) and zero-shot-above=M (the zero-shot pick
            when it raises the log-prob of y' over no passage by >= M nats). Each is compared with
            BM25 and with no retrieval by a paired bootstrap (95% CI, see --bootstrap).
        query: What each retrieving window's BM25 query is: the past --query-tokens tokens (the paper's),
            the LM's greedy look-ahead of its next tokens with unsure ones masked (FLARE's), both, or the
            true next tokens (`future`: a bound, it reads the targets).
        passage_form: What a retrieved passage hands the LM: itself (retrieved, the paper's), or from its
            sentence that best matches the query on into the next passage of its document (continuation),
            cut at --max-passage-tokens.
        print_table: Print the --compare table (off in `ralm demo`, whose report prints it with labels).
        seed: Seed of the random condition and of the bootstrap's resamples (--compare).
        bootstrap_resamples: Resamples of the paired bootstrap (--compare).
        bootstrap: What the paired bootstrap draws (--compare): blocks of consecutive windows, one length per
            table sized from the data (Politis & White 2004 on the BM25 - no retrieval difference), never
            across two JSONL documents, since neighbouring windows share chapters and passages; or single
            windows (the interval of independent windows, narrower when they are not).
        progress: Show a progress bar.
    """
    check_arguments(eval_ppl, locals())  # the CLI checked them already; a Python caller has not
    if isinstance(compare, str) or isinstance(sweep, str):  # text is read at the edge (TEXT_FORMS)
        raise TypeError("eval_ppl: compare takes Conditions, sweep a Sweep (parse_conditions, parse_sweep)")
    from ralm.eval.ppl.run import evaluate

    started = time.perf_counter()
    lm.require()  # before the output folder is made
    compared = compare is not None
    _check_options(reranking, no_retrieval, retrieval, compared)
    conditions = check_conditions(compare) if compared else [_single(no_retrieval, reranking)]
    conditions = play_exports(conditions, reranking.rank_tokens)
    if query.query_form == FUTURE and not no_retrieval:
        print(
            "eval ppl: --query-form future queries with the true next tokens: every number is a bound",
            flush=True,
        )
    out = Path(output)
    ensure_writable_dir(out)
    raw, document_chars = read_eval_documents(text, text_field)
    retriever, cache_path = (None, None) if no_retrieval else _open_index(retrieval, retrieval_cache)
    model, models, settings = _load_models(
        lm, conditions, sweep, window, query, retrieval, reranking, batching, compared, max_tokens, text_field
    )
    settings = replace(settings, passage_form=passage_form)
    summaries = evaluate(
        model,
        raw,
        str(text),
        settings,
        out,
        retriever=retriever,
        index_dir=retrieval.index,
        models=models,
        cache_path=cache_path,
        sweep=sweep,
        progress=progress,
        started=started,
        seed=seed,
        resamples=bootstrap_resamples,
        bootstrap=bootstrap,
        document_chars=document_chars,
    )
    return report_points(summaries, sweep, out, compared=compared, print_table=print_table)


def _single(no_retrieval: bool, reranking: RerankingOptions) -> Condition:
    """The one condition of a run without --compare: the one the options name."""
    return single_condition(no_retrieval, reranking.reranker, reranking.rerank_lm)


def _load_models(
    lm: LMOptions,
    conditions: list[Condition],
    plan: Sweep | None,
    window: WindowOptions,
    query: QueryOptions,
    retrieval: RetrievalOptions,
    reranking: RerankingOptions,
    batching: BatchOptions,
    compare: bool,
    max_tokens: int | None,
    text_field: str,
) -> tuple[FrozenLM, dict, PplSettings]:
    """The evaluated LM, the models that choose passages (by condition name) and the run's settings.

    The order is the checks': a trained reranker folder that is not one fails before the LM loads, and
    lengths that do not fit the LM's context fail before a zero-shot reranking LM loads."""
    models = load_rerankers(conditions, lm.device)
    model = lm.load()
    settings = _resolve(
        lm.input_length(model.context_length),
        model.context_length,
        plan,
        window,
        query,
        retrieval,
        reranking,
        batching,
        conditions,
        compare,
        lead=len(model.lead),
        max_tokens=max_tokens,
        text_field=text_field,
    )
    models.update(load_rerank_lms(conditions, lm, window, reranking))
    return model, models, settings


def _open_index(retrieval: RetrievalOptions, retrieval_cache: str | None) -> tuple[Retriever, Path]:
    """The index (checked against its passages file) and its retrieval cache file."""
    from ralm.eval.ppl.retrieval_cache import default_cache_path

    retriever = retrieval.open()
    return retriever, Path(retrieval_cache) if retrieval_cache else default_cache_path(retriever.meta)


def _resolve(
    input_length: int,
    context_length: int,
    plan: Sweep | None,
    window: WindowOptions,
    query: QueryOptions,
    retrieval: RetrievalOptions,
    reranking: RerankingOptions,
    batching: BatchOptions,
    conditions: list[Condition],
    compare: bool,
    lead: int = 0,
    **recorded: str | int | None,
) -> PplSettings:
    """The run's resolved settings, once the LM's context is known (every input must fit in it):
    `input_length` is the input length (``LMOptions.input_length``), `context_length` the LM's context.

    `lead`: the tokens the LM's input without a passage starts with (a look-ahead prompt holds them);
    `recorded`: the options passed on as they are (``max_tokens``, ``text_field``)."""
    from ralm.eval.ppl.run import PplSettings
    from ralm.lm.scoring import ScoringSettings

    swept = {plan.field: plan.values} if plan else {}
    strides = swept.get("stride", (window.stride,))
    query_lengths = swept.get("query_tokens", (window.query_tokens,))
    input_lengths = swept.get("max_length", ())  # `--sweep max_length=...`: the swept input lengths
    if input_lengths and max(input_lengths) > context_length:
        raise RalmInputError(
            f"--sweep max_length={max(input_lengths)}: longer than the LM's {context_length} tokens"
        )
    rank_tokens = reranking.rank_tokens if any(c.ranks for c in conditions) else 0
    retrieves = conditions[0].searches or compare
    for stride in strides:
        for length in input_lengths or (input_length,):
            _check_lengths(length, stride, window.max_passage_tokens, retrieves, rank_tokens)
            head = window.max_passage_tokens if query.after_passage else lead
            if retrieves and query.generates and length - (query.lookahead_tokens or stride) - head < 1:
                raise RalmInputError(
                    f"--lookahead-tokens {query.lookahead_tokens or stride}: leaves no context in a "
                    f"{length}-token input"
                )
    return PplSettings(
        strides=tuple(strides),
        query_lengths=tuple(query_lengths),
        scoring=ScoringSettings(
            input_length=(input_lengths or (input_length,))[0],
            max_passage_tokens=window.max_passage_tokens,
            rank_tokens=reranking.rank_tokens,
            batch_size=batching.batch_size,
            max_batch_tokens=batching.max_batch_tokens,
        ),
        input_lengths=tuple(input_lengths),
        k=retrieval.k,
        query=query,
        retrieval_threads=retrieval.threads,
        conditions=tuple(conditions),
        compare=compare,
        **recorded,
    )


def build_parser():
    return parser_for(eval_ppl, prog="ralm eval ppl", renamed=RENAMED, text_forms=TEXT_FORMS)


def main(argv: list[str] | None = None) -> None:
    call_with_args(eval_ppl, build_parser(), argv)
