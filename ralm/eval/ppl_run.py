"""One ``ralm eval ppl`` evaluation: queries, candidates, choosing, scoring, outputs (shared by sweeps).

Order of work: the text is tokenized once; every window's query is decoded (the last ℓ tokens before its
targets, as prepare_retrieval_data.py does); the caller retrieves all distinct queries in one batched call;
candidate passages are tokenized once each; then windows are scored chunk by chunk, each chunk appended
to the resumable window log. ``--compare`` scores one shared candidate table instead (ralm.eval.compare).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import ralm
from ralm.atomic_files import write_json_atomic
from ralm.errors import RalmInputError
from ralm.eval import choosers
from ralm.eval.compare import Condition, run_compare
from ralm.eval.eval_text import word_counts
from ralm.eval.perplexity import Candidate, ScoringSettings, score_windows
from ralm.eval.ppl_outputs import RESULTS_FILE, WindowLog, config_key, point_results
from ralm.eval.retrieval_cache import index_key, retrieve_cached
from ralm.eval.sweep import Sweep
from ralm.eval.windows import Window, strided_windows
from ralm.lm.loading import FrozenLM
from ralm.progress import progress as progress_bar
from ralm.retrieval.overlap import copies_span
from ralm.retrieval.types import Hit, Retriever

MODES = ("no-retrieval", "bm25", "zero-shot", "oracle", "trained")


@dataclass(frozen=True)
class EvalText:
    """The evaluation text, its tokens under the evaluated LM, and both word divisors."""

    path: str
    sha256: str
    tokens: tuple[int, ...]
    words: int
    words_eval_lm: int
    text_tokens: int = 0
    """Tokens of the whole text before ``--max-tokens`` cut it (what was scored is reported against it)."""


def window_queries(
    lm: FrozenLM, tokens: Sequence[int], windows: Sequence[Window], query_tokens: int
) -> list[str | None]:
    """The decoded query of every retrieving window (None for window 0)."""
    spans = [w.query_span(query_tokens) for w in windows if w.retrieves]
    decoded = iter(lm.tokenizer.batch_decode([list(tokens[a:b]) for a, b in spans]))
    return [next(decoded) if w.retrieves else None for w in windows]


def build_candidates(
    lm: FrozenLM,
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


def _preselect(mode, windows, candidates, *, lm, tokens, settings, reranker, rerank_lm, rerank_max_length):
    """(strategy for score_windows, chosen candidate per window or None)."""
    if mode == "no-retrieval":
        return "fixed", [None] * (max(w.index for w in windows) + 1 if windows else 0)
    if mode == "oracle":
        return "oracle", None
    if mode == "zero-shot" and rerank_lm is None:
        return "zero-shot", None
    full = [None] * (max(w.index for w in windows) + 1 if windows else 0)
    if mode == "bm25":
        picks = choosers.top1(windows, candidates)
    elif mode == "trained":
        picks = choosers.trained_reranker(reranker, lm, tokens, windows, candidates)
    else:
        picks = choosers.zero_shot_other_lm(
            rerank_lm, lm, tokens, windows, candidates,
            rank_tokens=settings.rank_tokens, max_length=rerank_max_length,
            max_passage_tokens=settings.max_passage_tokens, batch_size=settings.batch_size,
            max_batch_tokens=settings.max_batch_tokens,
        )  # fmt: skip
    for w, p in zip(windows, picks, strict=True):
        full[w.index] = p
    return "fixed", full


def run_point(
    *,
    lm: FrozenLM,
    text: EvalText,
    windows: Sequence[Window],
    queries: Sequence[str | None],
    candidates: Sequence[Sequence[Candidate]],
    mode: str,
    settings: ScoringSettings,
    out_dir: Path,
    config: dict,
    reranker=None,
    rerank_lm: FrozenLM | None = None,
    rerank_max_length: int = 1024,
    timings: dict | None = None,
    progress: bool = True,
) -> dict:
    """Score every window (resuming a killed run), write ``windows.jsonl`` and ``results.json``; return results."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    timings = dict(timings or {})
    log = WindowLog(out_dir, config_key(config))
    todo = [w for w in windows if w.index not in log.done]

    started = time.perf_counter()
    strategy, preselected = _preselect(
        mode, todo, candidates, lm=lm, tokens=text.tokens, settings=settings,
        reranker=reranker, rerank_lm=rerank_lm, rerank_max_length=rerank_max_length,
    )  # fmt: skip
    timings["rerank_s"] = time.perf_counter() - started

    per_window = 1 if strategy == "fixed" else max(1, max((len(c) for c in candidates), default=1))
    bar = progress_bar(
        sum(w.num_targets for w in windows), initial=sum(log.done[i]["num_targets"] for i in log.done),
        unit="tok", desc=f"eval ppl ({mode})", disable=not progress, dynamic_ncols=True,
    )  # fmt: skip
    started = time.perf_counter()
    with bar:
        chunks = score_windows(
            lm, text.tokens, todo, candidates, strategy=strategy, settings=settings, preselected=preselected,
            chunk_windows=max(1, 64 // per_window),
        )  # fmt: skip
        by_index = {w.index: w for w in windows}
        for scores in chunks:
            rows = []
            for s in scores:
                w = by_index[s.index]
                rows.append({
                    "window": s.index, "begin": w.begin, "end": w.end, "target_start": w.target_start,
                    "num_targets": s.num_targets, "nll": s.nll, "query": queries[s.index],
                    "chosen_rank": s.chosen, "passage_id": s.passage_id,
                    "copies_target": s.chosen is not None and copies_span(
                        candidates[s.index][s.chosen].tokens, text.tokens, w.target_start, w.end
                    ),
                })  # fmt: skip
            log.append(rows)
            bar.update(sum(r["num_targets"] for r in rows))
    timings["scoring_s"] = time.perf_counter() - started
    scored_now = sum(w.num_targets for w in todo)
    timings["tokens_per_s"] = scored_now / timings["scoring_s"] if timings["scoring_s"] > 0 else None

    rows = log.finish()
    results = point_results(rows, text, config, timings, resumed=len(rows) - len(todo))
    write_json_atomic(out_dir / RESULTS_FILE, results, default=str)
    return results


@dataclass(frozen=True)
class PplOptions:
    """Resolved options of one ``ralm eval ppl`` invocation (a sweep has several strides or query lengths)."""

    strides: tuple[int, ...]
    query_lengths: tuple[int, ...]
    max_length: int
    max_passage_tokens: int = 256
    k: int = 16
    rank_tokens: int = 16
    batch_size: int | None = None
    max_batch_tokens: int | None = None
    retrieval_threads: int = 1
    mode: str = "bm25"
    """One of MODES, or "compare" (several conditions read off one table)."""
    reranker: str = "none"
    rerank_lm: str | None = None
    max_tokens: int | None = None
    text_field: str = "text"


def evaluate(
    model: FrozenLM,
    raw_text: str,
    text_path: str,
    options: PplOptions,
    out: Path,
    *,
    retriever: Retriever | None = None,
    index_dir: str | None = None,
    reranker=None,
    rerank_lm: FrozenLM | None = None,
    rerank_max_length: int = 1024,
    cache_path: Path | None = None,
    sweep: Sweep | None = None,
    progress: bool = True,
    started: float | None = None,
    conditions: Sequence[Condition] = (),
    rerankers: dict | None = None,
    seed: int = 0,
    resamples: int = 2000,
) -> list[tuple[tuple[int, int], Path, dict]]:
    """Tokenize once, retrieve all queries of all points in one call, then score each point.

    Returns ``((stride, query_tokens), output folder, results)`` per point. With `conditions` (mode
    "compare", one point) the results are ``{condition name: results}``; `rerankers` maps the names of
    trained-reranker conditions to their loaded models; `seed` and `resamples` feed the random condition
    and the paired bootstrap.
    """
    started = time.perf_counter() if started is None else started
    tokens = tuple(model.encode(raw_text))  # no special tokens, as eval_lm.py encodes the text
    text_tokens = len(tokens)
    if options.max_tokens is not None:
        tokens = tokens[: options.max_tokens]
    if len(tokens) < 2:
        raise RalmInputError(f"{text_path}: {len(tokens)} token(s); perplexity needs at least 2")
    if options.mode != "no-retrieval" and len(tokens) < max(options.query_lengths):
        raise RalmInputError(
            f"{text_path}: {len(tokens)} tokens, fewer than --query-tokens {max(options.query_lengths)}"
        )
    counted = raw_text if options.max_tokens is None else model.decode(tokens)
    text = EvalText(
        path=text_path,
        sha256=hashlib.sha256(raw_text.encode()).hexdigest(),
        tokens=tokens,
        **word_counts(counted),
        text_tokens=text_tokens,
    )

    # Every point's windows and queries, then ONE batched search over all distinct queries.
    points = [(s, q) for s in options.strides for q in options.query_lengths]
    windows = {p: strided_windows(len(tokens), options.max_length, p[0]) for p in points}
    if options.mode == "no-retrieval":
        queries = {p: [None] * len(windows[p]) for p in points}
    else:
        queries = {p: window_queries(model, tokens, windows[p], p[1]) for p in points}
    hits_by_query: dict[str, list[Hit]] = {}
    searched, retrieval_s = 0, 0.0
    if retriever is not None and options.mode != "no-retrieval":
        all_queries = [q for p in points for q in queries[p] if q is not None]
        t0 = time.perf_counter()
        hits_by_query, searched = retrieve_cached(
            retriever, all_queries, options.k, cache_path, options.retrieval_threads
        )
        retrieval_s = time.perf_counter() - t0

    settings = ScoringSettings(
        max_length=options.max_length, max_passage_tokens=options.max_passage_tokens,
        rank_tokens=options.rank_tokens, batch_size=options.batch_size, max_batch_tokens=options.max_batch_tokens,
    )  # fmt: skip
    summaries = []
    for stride, query_tokens in points:
        point = (stride, query_tokens)
        if options.mode == "no-retrieval":
            candidates = [[] for _ in windows[point]]
        else:
            candidates = build_candidates(
                model, windows[point], queries[point], hits_by_query, options.k, options.max_passage_tokens
            )
        config = {
            "lm": model.name, "tokenizer": str(getattr(model.tokenizer, "name_or_path", "")),
            "dtype": str(model.dtype).removeprefix("torch."), "text": text.path, "text_sha256": text.sha256,
            "text_field": options.text_field, "max_tokens": options.max_tokens, "mode": options.mode,
            "reranker": options.reranker, "rerank_lm": options.rerank_lm, "k": options.k,
            "rank_tokens": options.rank_tokens, "stride": stride, "query_tokens": query_tokens,
            "max_length": options.max_length, "max_passage_tokens": options.max_passage_tokens,
            "index": None if retriever is None else {"dir": str(index_dir), "key": index_key(retriever.meta)},
            "retrieval_cache": None if cache_path is None else str(cache_path), "ralm_version": ralm.__version__,
        }  # fmt: skip
        if model.bos_id is not None:  # a BOS-adding tokenizer's passages start with it (recorded, keyed)
            config["passage_bos"] = model.bos_id
        point_dir = out / sweep.folder(stride if sweep.field == "stride" else query_tokens) if sweep else out
        timings = {
            "retrieval_s": retrieval_s,
            "queries_searched": searched,
            "setup_s": time.perf_counter() - started,
        }
        if conditions:
            results = run_compare(
                lm=model, text=text, windows=windows[point], queries=queries[point], candidates=candidates,
                conditions=conditions, rerankers=rerankers or {}, settings=settings, out=point_dir,
                config=config, timings=timings, progress=progress, seed=seed, resamples=resamples,
            )  # fmt: skip
        else:
            results = run_point(
                lm=model, text=text, windows=windows[point], queries=queries[point], candidates=candidates,
                mode=options.mode, settings=settings, out_dir=point_dir, config=config, reranker=reranker,
                rerank_lm=rerank_lm, rerank_max_length=rerank_max_length, timings=timings, progress=progress,
            )  # fmt: skip
        summaries.append((point, point_dir, results))
    return summaries
