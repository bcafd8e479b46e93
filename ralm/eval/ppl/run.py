"""One ``ralm eval ppl`` evaluation: text, queries, candidates, then the condition engine (shared by sweeps).

Order of work: the text is tokenized once; every window's query is decoded (the last ℓ tokens before its
targets, as prepare_retrieval_data.py does); all distinct queries of all points are retrieved in one
batched call; candidate passages are tokenized once each; then each point goes through the condition
engine (``ralm.eval.ppl.point.run_conditions``): one condition's files, or the ``--compare`` table
(``ralm.eval.ppl.compare``).
"""

from __future__ import annotations

import bisect
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ralm
from ralm.errors import RalmInputError
from ralm.eval.ppl.compare import CompareOutput
from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.eval_text import EvalText, word_counts
from ralm.eval.ppl.options import QueryOptions
from ralm.eval.ppl.perplexity import Candidate
from ralm.eval.ppl.point import Output, Point, SingleOutput, run_conditions
from ralm.eval.ppl.queries import window_queries
from ralm.eval.ppl.records import PointResults
from ralm.eval.ppl.retrieval_cache import index_key, retrieve_cached
from ralm.eval.ppl.sweep import SWEPT_ATTRIBUTE, Sweep
from ralm.eval.ppl.windows import Window, strided_windows
from ralm.lm.interface import LanguageModel
from ralm.lm.loading import compiled_record
from ralm.lm.scoring import ScoringSettings
from ralm.lm.special_tokens import special_tokens_record
from ralm.passage_rules import BM25, ZERO_SHOT
from ralm.retrieval.passage_forms import (
    CONTINUATION,
    RETRIEVED,
    PassageForm,
    continuation_hits,
    passage_store,
)
from ralm.retrieval.types import Hit, Retriever

__all__ = [
    "EvalText",
    "PointKey",
    "PointResult",
    "PplSettings",
    "build_candidates",
    "evaluate",
    "window_queries",
]


def build_candidates(
    lm: LanguageModel,
    windows: Sequence[Window],
    queries: Sequence[str | None],
    hits_by_query: dict[str, list[Hit]],
    k: int,
    max_passage_tokens: int,
) -> list[list[Candidate]]:
    """Each window's top-k passages with their LM tokens (each distinct passage tokenized once)."""
    hits = [hits_by_query[q][:k] if q is not None else [] for q in queries]
    unique = {h.id: h.contents for hs in hits for h in hs}
    encoded = lm.encode_passages(list(unique.values()))
    by_id = {
        pid: Candidate(pid, text, tuple(ids[:max_passage_tokens]))
        for (pid, text), ids in zip(unique.items(), encoded, strict=True)
    }
    # The tokens are shared; only the per-query BM25 score differs between windows.
    return [[replace(by_id[h.id], bm25_score=float(h.score)) for h in hs] for hs in hits]


@dataclass(frozen=True)
class PointKey:
    """One point of a run: the settings a sweep varies (a run without ``--sweep`` has one point)."""

    stride: int
    query_tokens: int
    input_length: int

    def value(self, field: str) -> int:
        """The swept setting's value (``Sweep.field``, a ``--sweep`` name)."""
        return getattr(self, SWEPT_ATTRIBUTE[field])


@dataclass(frozen=True)
class PointResult:
    """What ``evaluate`` returns per point: its key, its folder, and its results (``{condition: results}``
    with ``--compare``, else the one condition's results)."""

    key: PointKey
    folder: Path
    results: PointResults | dict[str, PointResults]


@dataclass(frozen=True)
class PplSettings:
    """Resolved options of one ``ralm eval ppl`` invocation (a sweep has several strides, query lengths or
    input lengths)."""

    strides: tuple[int, ...]
    query_lengths: tuple[int, ...]
    scoring: ScoringSettings
    """How the LM scores every point; its input length is the first of ``input_lengths`` when those are
    swept (each point scores with its own)."""
    k: int = 16
    query: QueryOptions = field(default_factory=QueryOptions)
    """What each retrieving window's query is made of (the paper's: the past ℓ tokens)."""
    passage_form: PassageForm = RETRIEVED
    """What a retrieved passage hands the LM (``ralm.retrieval.passage_forms``)."""
    retrieval_threads: int = 1
    conditions: tuple[Condition, ...] = field(default_factory=lambda: (Condition(BM25, BM25),))
    """What is evaluated: one condition, or several read off one table (`compare`)."""
    compare: bool = False
    """Write the comparison (OUTPUT/<condition>/, candidates.jsonl, compare.json), even of one condition."""
    max_tokens: int | None = None
    text_field: str = "text"
    input_lengths: tuple[int, ...] = ()
    """The swept input lengths (``--sweep max_length=...``); empty: ``scoring.input_length`` alone."""

    @property
    def points(self) -> list[PointKey]:
        lengths = self.input_lengths or (self.scoring.input_length,)
        return [PointKey(s, q, m) for s in self.strides for q in self.query_lengths for m in lengths]

    @property
    def retrieves(self) -> bool:
        return self.compare or self.conditions[0].searches

    @property
    def rerank_lm(self) -> str | None:
        return next((c.model for c in self.conditions if c.kind == ZERO_SHOT and c.model), None)


def eval_text(
    model: LanguageModel,
    raw_text: str,
    text_path: str,
    options: PplSettings,
    document_chars: Sequence[int] = (0,),
) -> EvalText:
    """The text tokenized as eval_lm.py encodes it (no special tokens), cut to ``--max-tokens``;
    `document_chars`: where each document starts in `raw_text` (``read_eval_documents``)."""
    tokens = tuple(model.encode(raw_text))
    text_tokens = len(tokens)
    if options.max_tokens is not None:
        tokens = tokens[: options.max_tokens]
    if len(tokens) < 2:
        raise RalmInputError(f"{text_path}: {len(tokens)} token(s); perplexity needs at least 2")
    if options.retrieves and len(tokens) < max(options.query_lengths):
        raise RalmInputError(
            f"{text_path}: {len(tokens)} tokens, fewer than --query-tokens {max(options.query_lengths)}"
        )
    counted = raw_text if options.max_tokens is None else model.decode(tokens)
    return EvalText(
        path=text_path,
        sha256=hashlib.sha256(raw_text.encode()).hexdigest(),
        tokens=tokens,
        **word_counts(counted),
        text_tokens=text_tokens,
        document_starts=document_token_starts(model, raw_text, document_chars, tokens),
    )


def document_token_starts(
    model: LanguageModel, raw_text: str, document_chars: Sequence[int], tokens: Sequence[int]
) -> tuple[int, ...]:
    """The token at which each document starts: the first token whose characters begin at or after the
    document's first character (``encode_with_offsets``: the fast tokenizer's offsets of the same encoding).
    ``(0,)`` for one document, or when the tokenizer gives no offsets (the text is then treated as one
    document)."""
    if len(document_chars) < 2:
        return (0,)
    encoded = model.encode_with_offsets(raw_text)
    if encoded is None or encoded[0][: len(tokens)] != list(tokens):
        return (0,)
    token_chars = encoded[1][: len(tokens)]
    starts = {bisect.bisect_left(token_chars, c) for c in document_chars}
    return tuple(sorted(s for s in starts | {0} if s < len(tokens)))


def _point_config(
    model: LanguageModel,
    text: EvalText,
    options: PplSettings,
    point: PointKey,
    index: dict | None,
    cache: str | None,
) -> dict:
    """results.json ``config`` of one point; each condition fills in ``mode`` and ``reranker``."""
    config = {
        "lm": model.name,
        "tokenizer": model.tokenizer_name,
        "dtype": str(model.dtype).removeprefix("torch."),
        "text": text.path,
        "text_sha256": text.sha256,
        "text_field": options.text_field,
        "max_tokens": options.max_tokens,
        "mode": None,
        "reranker": None,
        "rerank_lm": options.rerank_lm,
        "k": options.k,
        "rank_tokens": options.scoring.rank_tokens,
        "stride": point.stride,
        "query_tokens": point.query_tokens,
        "max_length": point.input_length,
        "max_passage_tokens": options.scoring.max_passage_tokens,
        **(_retrieval_forms(options, point) if options.retrieves else {}),
        "index": index,
        "retrieval_cache": cache,
        "ralm_version": ralm.__version__,
    }
    if model.special_prefix:  # how inputs start is part of every row (recorded, keyed: a resume cannot mix)
        config.update(special_tokens_record(model.special_prefix, model.special_tokens))
    config.update(compiled_record(model))  # compiled kernels move bf16 labels: a resume cannot mix them
    return config


def _retrieval_forms(options: PplSettings, point: PointKey) -> dict:
    """results.json ``config`` keys of a query or passage other than the paper's (none for the paper's, so
    earlier runs' files and resume keys stay as they were)."""
    forms = options.query.record(point.stride)
    if options.passage_form != RETRIEVED:
        forms["passage_form"] = options.passage_form
    return forms


def _retrieve(
    model: LanguageModel,
    text: EvalText,
    options: PplSettings,
    windows: dict[PointKey, list[Window]],
    retriever: Retriever | None,
    cache_path: Path | None,
) -> tuple[dict, dict[str, list[Hit]], dict]:
    """Every point's queries, then ONE batched search over all distinct queries: (queries, hits, timings)."""
    queries = {p: [None] * len(w) for p, w in windows.items()}
    timings = {"retrieval_s": 0.0, "queries_searched": 0}
    if retriever is None or not options.retrieves:
        return queries, {}, timings
    made = {
        p: window_queries(
            model,
            text.tokens,
            w,
            p.query_tokens,
            options.query,
            stride=p.stride,
            input_length=p.input_length,
            heads=_lookahead_heads(model, text, options, p, w, retriever, cache_path),
        )
        for p, w in windows.items()
    }
    queries = {p: m.queries for p, m in made.items()}
    for m in made.values():  # the look-aheads' cost, summed over the points
        for key, value in m.record().items():
            timings[key] = timings.get(key, 0) + value
    started = time.perf_counter()
    hits_by_query, timings["queries_searched"] = retrieve_cached(
        retriever,
        [q for qs in queries.values() for q in qs if q is not None],
        options.k,
        cache_path,
        options.retrieval_threads,
    )
    timings["retrieval_s"] = time.perf_counter() - started
    return queries, hits_by_query, timings


def _lookahead_heads(
    model: LanguageModel,
    text: EvalText,
    options: PplSettings,
    point: PointKey,
    windows: list[Window],
    retriever: Retriever,
    cache_path: Path | None,
) -> list[list[int]] | None:
    """With ``--lookahead-context passage``: each retrieving window's BM25 top-1 passage for the past query
    (its LM tokens, cut as it would be prepended; the LM's lead where the query found nothing), which the
    look-ahead is generated after. None otherwise (the look-ahead starts with the LM's lead)."""
    if not options.query.after_passage:
        return None
    queries = window_queries(model, text.tokens, windows, point.query_tokens).queries
    past = [q for q in queries if q is not None]
    hits, _ = retrieve_cached(retriever, past, options.k, cache_path, options.retrieval_threads)
    top = build_candidates(model, windows, queries, hits, 1, options.scoring.max_passage_tokens)
    return [
        list(c[0].tokens) if c else list(model.lead) for w, c in zip(windows, top, strict=True) if w.retrieves
    ]


def evaluate(
    model: LanguageModel,
    raw_text: str,
    text_path: str,
    options: PplSettings,
    out: Path,
    *,
    retriever: Retriever | None = None,
    index_dir: str | None = None,
    models: Mapping[str, Any] | None = None,
    cache_path: Path | None = None,
    sweep: Sweep | None = None,
    progress: bool = True,
    started: float | None = None,
    seed: int = 0,
    resamples: int = 2000,
    bootstrap: str = "blocks",
    document_chars: Sequence[int] = (0,),
) -> list[PointResult]:
    """Tokenize once, retrieve all queries of all points in one call, then run each point's conditions.

    Returns each point's key, folder and results; with ``options.compare`` the results are
    ``{condition name: results}``. `models` maps the names of conditions that choose first to
    their loaded models (``ralm.eval.ppl.choosers.choose_first``); `seed`, `resamples` and `bootstrap`
    (``blocks`` or ``windows``) feed the random condition and the paired bootstrap; `document_chars`: where
    each document starts in `raw_text` (blocks never span two).
    """
    started = time.perf_counter() if started is None else started
    text = eval_text(model, raw_text, text_path, options, document_chars)
    points = options.points
    windows = {p: strided_windows(len(text.tokens), p.input_length, p.stride) for p in points}
    queries, hits_by_query, timings = _retrieve(model, text, options, windows, retriever, cache_path)
    if options.passage_form == CONTINUATION and options.retrieves and retriever is not None:
        hits_by_query = continuation_hits(hits_by_query, passage_store(retriever), options.k)
    index = None if retriever is None else {"dir": str(index_dir), "key": index_key(retriever.meta)}
    cache = None if cache_path is None else str(cache_path)
    summaries = []
    for p in points:
        candidates = _point_candidates(model, options, windows[p], queries[p], hits_by_query, retriever)
        point = Point(
            lm=model,
            text=text,
            windows=windows[p],
            queries=queries[p],
            candidates=candidates,
            settings=replace(options.scoring, input_length=p.input_length),
            config=_point_config(model, text, options, p, index, cache),
            timings={**timings, "setup_s": time.perf_counter() - started},
        )
        point_dir = out / sweep.folder(p.value(sweep.field)) if sweep else out
        output = _point_output(point, options, point_dir, seed=seed, resamples=resamples, bootstrap=bootstrap)
        results = run_conditions(
            point, options.conditions, output, models=models, seed=seed, progress=progress
        )
        summaries.append(PointResult(p, point_dir, results))
    return summaries


def _point_candidates(
    model: LanguageModel,
    options: PplSettings,
    windows: list[Window],
    queries: list[str | None],
    hits_by_query: dict[str, list[Hit]],
    retriever: Retriever | None,
) -> list[list[Candidate]]:
    """Each window's candidate passages; none for every window when nothing is retrieved."""
    if options.retrieves and retriever is not None:
        cut = options.scoring.max_passage_tokens
        return build_candidates(model, windows, queries, hits_by_query, options.k, cut)
    return [[] for _ in windows]


def _point_output(
    point: Point, options: PplSettings, point_dir: Path, *, seed: int, resamples: int, bootstrap: str
) -> Output:
    """Where the point's results go: the --compare table's files, or the one condition's."""
    if options.compare:
        return CompareOutput(
            point, options.conditions, point_dir, seed=seed, resamples=resamples, bootstrap=bootstrap
        )
    return SingleOutput(point, options.conditions[0], point_dir, seed=seed)
