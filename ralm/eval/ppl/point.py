"""The condition engine of ``ralm eval ppl``: one point's windows scored for one or several conditions.

``run_conditions`` is the one path of every run: the conditions that choose first (a trained reranker, a
reranking LM) choose; ``conditions.plan_rows`` says which LM rows each window needs; ``perplexity.score_rows``
scores only those, chunk by chunk; ``conditions.pick`` reads each condition's window NLL off the rows. A run
of one condition (``--reranker X``, ``--no-retrieval``) scores what that condition needs (BM25 top-1: one row
per window) and writes ``windows.jsonl`` and ``results.json`` (``SingleOutput``); ``--compare`` scores the
union plus the baselines and writes the table and every condition's folder (``compare.CompareOutput``).
Both append each chunk to a resumable log, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ralm.atomic_files import write_json_atomic
from ralm.eval.ppl.choosers import choose_first, stacked_corrections
from ralm.eval.ppl.conditions import Condition, pick, plan_rows
from ralm.eval.ppl.eval_text import EvalText
from ralm.eval.ppl.outputs import RESULTS_FILE, WindowLog, config_key, point_results
from ralm.eval.ppl.perplexity import Candidate, blank_row, score_rows
from ralm.eval.ppl.records import PointResults, WindowRecord, WindowScores
from ralm.eval.ppl.windows import Window
from ralm.lm.interface import LanguageModel
from ralm.lm.scoring import ScoringSettings
from ralm.progress import progress as progress_bar

Chosen = dict[str, dict[int, Any]]
"""Condition name -> window index -> the pick of a condition that chooses first (int or None), or a stacked
export's encoder scores of the window's pairs (``choosers.stacked_corrections``)."""


@dataclass(frozen=True)
class Point:
    """One point of a run (a sweep has several): what each of its conditions is scored on."""

    lm: LanguageModel
    text: EvalText
    windows: Sequence[Window]
    queries: Sequence[str | None]
    candidates: Sequence[Sequence[Candidate]]
    settings: ScoringSettings
    config: dict
    """results.json ``config`` before a condition fills in its ``mode`` and ``reranker``."""
    timings: dict
    """Setup and retrieval timings, shared by every condition of the point."""


@dataclass(frozen=True)
class Scored:
    """What the engine measured while scoring one point."""

    rerank_s: dict[str, float]
    """Seconds each condition spent choosing before the LM scored (0 for those picking off the rows)."""
    scoring_s: float
    tokens_per_s: float | None
    resumed: int
    """Windows a killed run had finished, read back from the log instead of scored."""
    lm_rows: int


class Output(Protocol):
    """Where the engine's rows go: one condition's files, or the comparison table and every condition's."""

    label: str
    baselines: bool
    """Score the no-passage row and every candidate whatever the conditions (the comparison's baselines)."""
    log: WindowLog

    def choosing(self, todo: Sequence[Window]) -> Sequence[Window]: ...
    def append(self, rows: list[WindowScores], chosen: Chosen) -> None: ...
    def finish(self, scored: Scored, chosen: Chosen) -> PointResults | dict[str, PointResults]: ...


def condition_config(config: dict, condition: Condition, compared: list[str] | None = None) -> dict:
    """The results.json config of `condition`; `compared`: the ``--compare`` list it was read off."""
    cfg = {**config, "mode": condition.kind, "reranker": condition.recorded_reranker}
    if compared is not None:
        cfg["compare"] = compared
    if not condition.searches:
        cfg.update(index=None, retrieval_cache=None)
    return cfg


def searched(condition: Condition, point: Point) -> Sequence[Sequence[Candidate]]:
    """Each window's candidates as `condition` saw them: none for no retrieval, which makes no query (so
    it has no retrieving windows, in a comparison as in its own run)."""
    return point.candidates if condition.searches else [()] * len(point.windows)


def condition_rows(
    condition: Condition, table: Sequence[WindowScores], point: Point, chosen: Chosen, seed: int = 0
) -> list[WindowRecord]:
    """The condition's ``windows.jsonl`` rows from table rows (docs/formats.md §6)."""
    picks = chosen.get(condition.name, {})
    rows = []
    for row in table:
        w = point.windows[row.window]
        index = pick(condition, row, picks.get(w.index), seed)
        cand = row.candidates[index] if index is not None else None
        bare = row.no_passage_nll
        if condition.declared.matched_row and row.candidates:
            bare = row.matched_nll
        rows.append(
            WindowRecord(
                window=w.index,
                begin=w.begin,
                end=w.end,
                target_start=w.target_start,
                num_targets=w.num_targets,
                nll=cand.nll if cand else bare,
                query=point.queries[w.index] if condition.searches else None,
                chosen_rank=index,
                passage_id=cand.id if cand else None,
                copies_target=bool(cand and cand.copies_target),
            )
        )
    return rows


class SingleOutput:
    """One condition: ``windows.jsonl`` (resumable as ``windows.jsonl.partial``) and ``results.json``."""

    baselines = False

    def __init__(self, point: Point, condition: Condition, out_dir: Path, seed: int = 0):
        self.point, self.condition, self.out_dir, self.seed = point, condition, out_dir, seed
        self.label = condition.kind
        self.config = condition_config(point.config, condition)
        self.log = WindowLog(out_dir, config_key(self.config))

    def choosing(self, todo: Sequence[Window]) -> Sequence[Window]:
        return todo  # the finished windows' rows are in the log

    def append(self, rows: list[WindowScores], chosen: Chosen) -> None:
        self.log.append(condition_rows(self.condition, rows, self.point, chosen, self.seed))

    def finish(self, scored: Scored, chosen: Chosen) -> PointResults:
        rows = self.log.finish()
        timings = {
            **self.point.timings,
            "rerank_s": scored.rerank_s[self.condition.name],
            "scoring_s": scored.scoring_s,
            "tokens_per_s": scored.tokens_per_s,
        }
        results = point_results(
            rows,
            self.point.text,
            self.config,
            timings,
            resumed=scored.resumed,
            candidates=searched(self.condition, self.point),
        )
        write_json_atomic(self.out_dir / RESULTS_FILE, results.to_json(), default=str)
        return results


def _choose(
    point: Point, conditions: Sequence[Condition], models: Mapping[str, Any], windows: Sequence[Window]
) -> tuple[Chosen, dict[str, float]]:
    """The picks of the conditions that choose first, over `windows`, and each condition's seconds."""
    chosen: Chosen = {}
    seconds: dict[str, float] = {}
    for condition in conditions:
        started = time.perf_counter()
        if condition.stacked is not None:
            f = stacked_corrections(
                models[condition.name], point.lm, point.text.tokens, windows, point.candidates
            )
            chosen[condition.name] = {w.index: scores for w, scores in zip(windows, f, strict=True)}
        elif condition.chooses_first:
            picks = choose_first(
                condition,
                models[condition.name],
                point.lm,
                point.text.tokens,
                windows,
                point.candidates,
                point.settings,
            )
            chosen[condition.name] = {w.index: p for w, p in zip(windows, picks, strict=True)}
        seconds[condition.name] = time.perf_counter() - started
    return chosen, seconds


def run_conditions(
    point: Point,
    conditions: Sequence[Condition],
    output: Output,
    *,
    models: Mapping[str, Any] | None = None,
    seed: int = 0,
    progress: bool = True,
) -> PointResults | dict[str, PointResults]:
    """Score the windows `output`'s log lacks (resuming a killed run) and let `output` write its files.

    `models` maps the names of conditions that choose first to their loaded model
    (``choosers.choose_first``); `seed` draws the ``random`` condition.
    """
    todo = [w for w in point.windows if w.index not in output.log.done]
    chosen, rerank_s = _choose(point, conditions, models or {}, output.choosing(todo))
    plans = {
        w.index: plan_rows(
            conditions,
            blank_row(w, point.candidates[w.index]),
            {name: picks[w.index] for name, picks in chosen.items()},
            seed=seed,
            baselines=output.baselines,
        )
        for w in todo
    }
    lm_rows = [0]

    def counted(rows: int, _targets: int) -> None:
        lm_rows[0] += rows

    per_window = max((p.rows for p in plans.values()), default=1)
    bar = progress_bar(
        sum(w.num_targets for w in point.windows),
        initial=sum(r.num_targets for r in output.log.done.values()),
        unit="tok",
        desc=f"eval ppl ({output.label})",
        disable=not progress,
        dynamic_ncols=True,
    )
    started = time.perf_counter()
    with bar:
        for rows in score_rows(
            point.lm,
            point.text.tokens,
            todo,
            point.candidates,
            plans,
            point.settings,
            chunk_windows=max(1, 64 // per_window),
            on_batch=counted,
        ):
            output.append(rows, chosen)
            bar.update(sum(r.num_targets for r in rows))
    scoring_s = time.perf_counter() - started
    scored_now = sum(w.num_targets for w in todo)
    tokens_per_s = scored_now / scoring_s if scoring_s > 0 else None
    resumed = len(point.windows) - len(todo)
    return output.finish(Scored(rerank_s, scoring_s, tokens_per_s, resumed, lm_rows[0]), chosen)
