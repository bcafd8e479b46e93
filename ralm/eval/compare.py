"""``ralm eval ppl --compare``: several conditions read off ONE table of candidate scores.

For each retrieving window every candidate is scored once with the zero-shot request ``[d_i; context up to
y'] -> y' + targets``: the same LM input as the oracle or fixed request for that passage, only with the
``n_rank`` ranking tokens y' scored too (none when zero-shot is not compared). Every window also gets one
no-passage request. Each condition's window NLL is then a lookup, with no further LM pass:

- ``no-retrieval``: the no-passage NLL;
- ``bm25``: candidate 0's target NLL;
- ``random``: a seeded uniform draw among the window's candidates (``--seed``; the same draw for a window
  whatever else is compared or resumed);
- ``oracle``: the smallest target NLL (ties to the earlier candidate, as ``perplexity._decide``): best of k;
- ``oracle-or-none``: the smallest of the candidates' and the no-passage NLL: best of k *or no passage*,
  the upper bound of a reranker that may abstain (no passage wins ties);
- ``bm25-above=T``: BM25's top-1 when the window's best BM25 score is at least T, else no passage (the
  trivial abstention rule a reranker must beat; `ralm run` fits T on the training prefixes);
- ``zero-shot``: the candidate with the largest y' log-probability (same LM), its target NLL;
- ``NAME=PATH``: the candidate a trained reranker picks (``choosers.trained_reranker``; abstaining means
  the no-passage NLL).

So k + 1 LM rows per retrieving window give all of them, where separate runs need 1 + 1 + k + k + 1.
Each candidate also records whether it copies the window's target (``ralm.retrieval.overlap``), and every
condition is compared with BM25 top-1 and with no retrieval by a paired bootstrap over windows
(``ralm.eval.compare_stats``). The table is appended chunk by chunk to ``candidates.jsonl.partial`` (a
killed run resumes); each condition's ``results.json`` and ``windows.jsonl`` (the single-run formats) are
written at the end.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ralm.atomic_files import write_json_atomic, write_jsonl_atomic
from ralm.errors import RalmInputError
from ralm.eval import choosers
from ralm.eval.compare_stats import condition_statistics
from ralm.eval.perplexity import Candidate, ScoringSettings, window_request
from ralm.eval.ppl_outputs import (
    RESULTS_FILE,
    WINDOWS_FILE,
    WindowLog,
    config_key,
    point_results,
)
from ralm.eval.windows import Window, ranking_span
from ralm.lm.loading import FrozenLM
from ralm.lm.scoring import score_continuations
from ralm.progress import progress as progress_bar
from ralm.retrieval.overlap import copies_span, ngrams
from ralm.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED

BUILT_IN = {
    "no-retrieval": "none", "bm25": "none", "random": "random", "zero-shot": "zero-shot", "oracle": "oracle",
    "oracle-or-none": "oracle-or-none",
}  # fmt: skip
"""Built-in condition -> the single run's ``--reranker`` value recorded in its results.json."""
THRESHOLD_RULE = "bm25-above"
TABLE_FORMAT = 2
"""Version of the table's rows (2: ``copies_target`` per candidate); a partial table of another is redone."""
TABLE_FILE = "candidates.jsonl"
COMPARE_FILE = "compare.json"
COMPARE_FORMAT = "ralm-eval-ppl-compare/1"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass(frozen=True)
class Condition:
    name: str
    """Output folder name: a built-in condition, or NAME of NAME=PATH."""
    mode: str
    """results.json ``config.mode``: no-retrieval, bm25, zero-shot, oracle or trained."""
    reranker: str
    """results.json ``config.reranker``, as the single run's ``--reranker`` would say."""
    spec: str


def parse_conditions(spec: str) -> list[Condition]:
    """``"no-retrieval,bm25,trained=runs/r"`` -> Conditions; bad names, duplicates and missing folders fail."""
    conditions: list[Condition] = []
    for item in (part.strip() for part in spec.split(",")):
        name, eq, path = (part.strip() for part in item.partition("="))
        if name == THRESHOLD_RULE:
            conditions.append(_threshold_condition(item, path, conditions))
            continue
        if not eq:
            if name not in BUILT_IN:
                raise RalmInputError(
                    f"--compare: unknown condition {item!r}; expected {', '.join(BUILT_IN)} or NAME=PATH"
                )
            mode = name
        elif not _NAME.match(name) or name in BUILT_IN or not path:
            raise RalmInputError(
                f"--compare: {item!r} is not NAME=PATH with NAME a simple identifier (not a built-in condition)"
            )
        elif not Path(path).is_dir():
            raise RalmInputError(f"--compare {item}: no such reranker folder {path!r}")
        else:
            mode = "trained"
        if any(c.name == name for c in conditions):
            raise RalmInputError(f"--compare: condition {name!r} given twice")
        conditions.append(
            Condition(name, mode, path if eq else BUILT_IN[name], f"{name}={path}" if eq else name)
        )
    return conditions


def _threshold_condition(item: str, value: str, conditions: list[Condition]) -> Condition:
    try:
        threshold = float(value)
    except ValueError:
        raise RalmInputError(
            f"--compare: {item!r} is not {THRESHOLD_RULE}=T with T a number (inf: never retrieve)"
        ) from None
    if any(c.name == THRESHOLD_RULE for c in conditions):
        raise RalmInputError(f"--compare: condition {THRESHOLD_RULE!r} given twice")
    return Condition(THRESHOLD_RULE, THRESHOLD_RULE, repr(threshold), f"{THRESHOLD_RULE}={threshold!r}")


def score_table(
    lm: FrozenLM,
    tokens: Sequence[int],
    windows: Sequence[Window],
    candidates: Sequence[Sequence[Candidate]],
    settings: ScoringSettings,
    *,
    rank: bool,
    chunk_windows: int = 16,
    on_batch: Callable[[int, int], None] | None = None,
) -> Iterator[list[dict]]:
    """Yield the table rows of `windows` chunk by chunk: one no-passage request per window, one per candidate.

    With `rank` the candidate requests also score the zero-shot ranking tokens y' (``rank_logprob``).
    """
    grams: dict[str, set] = {}  # each passage's token runs, built once however many windows retrieve it
    for lo in range(0, len(windows), chunk_windows):
        plans, requests = [], []
        for w in windows[lo : lo + chunk_windows]:
            cands = candidates[w.index] if w.retrieves else []
            target_from = w.target_start
            if rank and cands:
                target_from = ranking_span(w, settings.rank_tokens, settings.max_passage_tokens)[0]
            plans.append((w, cands, len(requests), w.target_start - target_from))
            requests.append(window_request(tokens, w, ()))
            requests.extend(window_request(tokens, w, c.tokens, target_from=target_from) for c in cands)
        scores = score_continuations(
            lm, requests, max_length=settings.max_length, max_passage_tokens=settings.max_passage_tokens,
            batch_size=settings.batch_size, max_batch_tokens=settings.max_batch_tokens, on_batch=on_batch,
        )  # fmt: skip
        rows = []
        for w, cands, start, n_rank in plans:
            row = {
                "window": w.index, "target_start": w.target_start, "num_targets": w.num_targets,
                "no_passage_nll": -float(scores[start].double().sum()), "candidates": [],
            }  # fmt: skip
            for c, s in zip(cands, scores[start + 1 : start + 1 + len(cands)], strict=True):
                # As perplexity._decide: y' ranks; with no y' left (n_rank 0) the targets themselves do.
                rank_logprob = float((s[:n_rank] if n_rank else s).double().sum()) if rank else None
                if c.id not in grams:
                    grams[c.id] = ngrams(c.tokens)
                row["candidates"].append({
                    "id": c.id, "bm25": c.bm25_score, "nll": -float(s[n_rank:].double().sum()),
                    "rank_logprob": rank_logprob,
                    "copies_target": copies_span(grams[c.id], tokens, w.target_start, w.end),
                })  # fmt: skip
            rows.append(row)
        yield rows


def random_pick(seed: int, window: int, k: int) -> int:
    """A uniform draw among `k` candidates that depends only on the seed and the window's index."""
    return int(np.random.default_rng([seed, window]).integers(k))


def pick(
    mode: str, row: dict, trained: int | None = None, seed: int = 0, threshold: float | None = None
) -> int | None:
    """The candidate a condition prepends in one table row (None: nothing).

    Every tie rule of ``--compare`` lives here: the earlier (higher BM25) candidate wins among passages,
    no passage wins against passages.
    """
    cands = row["candidates"]
    if mode == "no-retrieval" or not cands:
        return None
    if mode == "bm25":
        return 0
    if mode == "random":
        return random_pick(seed, row["window"], len(cands))
    if mode == THRESHOLD_RULE:
        return 0 if max(c["bm25"] for c in cands) >= threshold else None
    if mode in ("oracle", "oracle-or-none"):
        best = min(range(len(cands)), key=lambda i: (cands[i]["nll"], i))
        if mode == "oracle-or-none" and row["no_passage_nll"] <= cands[best]["nll"]:
            return None
        return best
    if mode == "zero-shot":
        return max(range(len(cands)), key=lambda i: (cands[i]["rank_logprob"], -i))
    return trained


def condition_rows(
    mode: str,
    table: Sequence[dict],
    windows: Sequence[Window],
    queries: Sequence[str | None],
    trained: Sequence[int | None] | None = None,
    seed: int = 0,
    threshold: float | None = None,
) -> list[dict]:
    """The condition's ``windows.jsonl`` rows (run_point's keys, and whether the passage copies the target)."""
    rows = []
    for row in table:
        w = windows[row["window"]]
        chosen = pick(mode, row, trained[w.index] if trained is not None else None, seed, threshold)
        cand = row["candidates"][chosen] if chosen is not None else None
        rows.append({
            "window": w.index, "begin": w.begin, "end": w.end, "target_start": w.target_start,
            "num_targets": w.num_targets, "nll": cand["nll"] if cand else row["no_passage_nll"],
            "query": None if mode == "no-retrieval" else queries[w.index], "chosen_rank": chosen,
            "passage_id": cand["id"] if cand else None,
            "copies_target": bool(cand and cand.get("copies_target")),
        })  # fmt: skip
    return rows


def condition_config(config: dict, condition: Condition, specs: list[str]) -> dict:
    """A single run's config for this condition, plus the compared conditions."""
    cfg = {**config, "mode": condition.mode, "reranker": condition.reranker, "compare": specs}
    if condition.mode == "no-retrieval":
        cfg.update(index=None, retrieval_cache=None)
    return cfg


def run_compare(
    *,
    lm: FrozenLM,
    text,
    windows: Sequence[Window],
    queries: Sequence[str | None],
    candidates: Sequence[Sequence[Candidate]],
    conditions: Sequence[Condition],
    rerankers: dict,
    settings: ScoringSettings,
    out: Path,
    config: dict,
    timings: dict,
    progress: bool = True,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> dict[str, dict]:
    """Score the table (resuming a killed run), write every condition's files and compare.json.

    `seed` draws the ``random`` condition and the bootstrap's resamples (`resamples` of them).
    """
    assert all(w.index == i for i, w in enumerate(windows)), "windows must be complete and in order"
    rank = any(c.mode == "zero-shot" for c in conditions)
    specs = [c.spec for c in conditions]
    # The table depends on the point and on whether y' is scored, not on which conditions read it.
    table_key = {
        **config,
        "mode": "compare",
        "reranker": None,
        "rank_tokens": settings.rank_tokens if rank else 0,
        "table_format": TABLE_FORMAT,
    }
    log = WindowLog(out, config_key(table_key), name=TABLE_FILE)
    todo = [w for w in windows if w.index not in log.done]
    requests = [0]

    def counted(rows: int, _targets: int) -> None:
        requests[0] += rows

    per_window = 1 + max((len(c) for c in candidates), default=0)
    bar = progress_bar(
        sum(w.num_targets for w in windows), initial=sum(r["num_targets"] for r in log.done.values()),
        unit="tok", desc="eval ppl (compare)", disable=not progress, dynamic_ncols=True,
    )  # fmt: skip
    started = time.perf_counter()
    with bar:
        for rows in score_table(
            lm, text.tokens, todo, candidates, settings, rank=rank,
            chunk_windows=max(1, 64 // per_window), on_batch=counted,
        ):  # fmt: skip
            log.append(rows)
            bar.update(sum(r["num_targets"] for r in rows))
    scoring_s = time.perf_counter() - started
    scored_now = sum(w.num_targets for w in todo)
    tokens_per_s = scored_now / scoring_s if scoring_s > 0 else None
    table = log.rows()

    results, rerank_s, statistics = {}, {}, {}
    for cond in conditions:
        started = time.perf_counter()
        trained = None
        if cond.mode == "trained":
            trained = choosers.trained_reranker(rerankers[cond.name], lm, text.tokens, windows, candidates)
        rerank_s[cond.name] = time.perf_counter() - started
        threshold = float(cond.reranker) if cond.mode == THRESHOLD_RULE else None
        rows = condition_rows(cond.mode, table, windows, queries, trained, seed, threshold)
        cond_timings = {
            **timings, "rerank_s": rerank_s[cond.name], "scoring_s": scoring_s, "tokens_per_s": tokens_per_s
        }  # fmt: skip
        cfg = condition_config(config, cond, specs)
        record = point_results(rows, text, cfg, cond_timings, resumed=len(rows) - len(todo))
        record["comparison"] = statistics[cond.name] = {
            "seed": seed,  # of the random condition's draws and of the bootstrap
            **condition_statistics(table, rows, resamples=resamples, seed=seed),
        }
        write_jsonl_atomic(out / cond.name / WINDOWS_FILE, rows)
        write_json_atomic(out / cond.name / RESULTS_FILE, record, default=str)
        results[cond.name] = record

    summary = {
        "format": COMPARE_FORMAT,
        "conditions": specs,
        "results": {
            name: {"dir": str(out / name), **{k: r["metrics"][k] for k in ("token_ppl", "word_ppl", "total_nll")}}
            for name, r in results.items()
        },
        "table": {
            "file": TABLE_FILE, "windows": len(table), "retrieving_windows": sum(1 for r in table if r["window"] > 0),
            "candidates": sum(len(r["candidates"]) for r in table), "rank_logprob": rank,
            "lm_requests": requests[0], "resumed_windows": len(table) - len(todo),
        },
        "statistics": statistics,
        "timings": {**timings, "scoring_s": scoring_s, "tokens_per_s": tokens_per_s, "rerank_s": rerank_s},
    }  # fmt: skip
    write_json_atomic(out / COMPARE_FILE, summary, default=str)
    log.finish()  # last: until every condition's files exist, a rerun resumes from the partial table
    return results
