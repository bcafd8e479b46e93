"""``ralm eval ppl --compare``: several conditions read off ONE table of LM rows.

The engine (``ralm.eval.ppl.point``) scores, for each retrieving window, one no-passage row and one row
per candidate (the ranking tokens y' too when same-LM zero-shot is compared): the rows every condition
and both baselines need, so each condition's window NLL is a lookup (``conditions.pick``) with no further
LM pass. k + 1 LM rows per retrieving window give all of them, where separate runs need 1 + 1 + k + k + 1.
Each candidate also records whether it copies the window's target (``ralm.retrieval.overlap``), and every
condition is compared with BM25 top-1 and with no retrieval by a paired bootstrap over blocks of
consecutive windows, one block length per table (or over single windows: ``--bootstrap windows``;
``ralm.eval.ppl.compare_stats``). The table is appended chunk by chunk to ``candidates.jsonl.partial`` (a
killed run resumes); each condition's ``results.json`` and ``windows.jsonl`` (the single-run formats) are
written at the end, then ``compare.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ralm.atomic_files import write_json_atomic, write_jsonl_atomic
from ralm.eval.ppl.compare_stats import TableBlocks, condition_statistics, table_blocks
from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.outputs import RESULTS_FILE, WINDOWS_FILE, WindowLog, config_key, point_results
from ralm.eval.ppl.point import Chosen, Point, Scored, condition_config, condition_rows, searched
from ralm.eval.ppl.records import PointResults, WindowScores
from ralm.eval.ppl.windows import Window, retrieving_windows
from ralm.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED

TABLE_FORMAT = 4
"""Version of the table's rows (2: ``copies_target`` per candidate; 3: ``matched_nll``, the context-matched
no-passage row; 4: ``no_passage_rank_logprob``, y' with no passage); a partial table of another is redone."""
TABLE_FILE = "candidates.jsonl"
COMPARE_FILE = "compare.json"
COMPARE_FORMAT = "ralm-eval-ppl-compare/1"


class CompareOutput:
    """The table (``candidates.jsonl``), every condition's folder and ``compare.json`` under `out`.

    `seed` draws the ``random`` condition and the bootstrap's resamples (`resamples` of them);
    `bootstrap`: ``blocks`` (of consecutive windows, sized from the table) or ``windows``.
    """

    label = "compare"
    baselines = True

    def __init__(
        self,
        point: Point,
        conditions: Sequence[Condition],
        out: Path,
        *,
        seed: int = DEFAULT_SEED,
        resamples: int = DEFAULT_RESAMPLES,
        bootstrap: str = "blocks",
    ):
        assert all(w.index == i for i, w in enumerate(point.windows)), "windows must be complete and in order"
        self.point, self.conditions, self.out = point, conditions, out
        self.seed, self.resamples, self.bootstrap = seed, resamples, bootstrap
        self.rank = any(c.ranks for c in conditions)
        # The table depends on the point and on whether y' is scored, not on which conditions read it.
        table_key = {
            **point.config,
            "mode": "compare",
            "reranker": None,
            "rank_tokens": point.settings.rank_tokens if self.rank else 0,
            "table_format": TABLE_FORMAT,
        }
        self.log = WindowLog(out, config_key(table_key), name=TABLE_FILE, record=WindowScores)

    def choosing(self, todo: Sequence[Window]) -> Sequence[Window]:
        return self.point.windows  # every condition's rows are read off the whole table at the end

    def append(self, rows: list[WindowScores], chosen: Chosen) -> None:
        self.log.append(rows)

    def finish(self, scored: Scored, chosen: Chosen) -> dict[str, PointResults]:
        """Write every condition's files and compare.json; return each condition's results."""
        table = self.log.rows()
        blocks = table_blocks(table, self.point.text.document_starts, self.bootstrap)  # one for every row
        results = {c.name: self._condition(c, table, scored, chosen, blocks) for c in self.conditions}
        summary = self._summary(table, results, scored, blocks)
        write_json_atomic(self.out / COMPARE_FILE, summary, default=str)
        self.log.finish()  # last: until every condition's files exist, a rerun resumes from the partial table
        return results

    def _condition(
        self,
        condition: Condition,
        table: list[WindowScores],
        scored: Scored,
        chosen: Chosen,
        blocks: TableBlocks,
    ) -> PointResults:
        rows = condition_rows(condition, table, self.point, chosen, self.seed)
        timings = {
            **self.point.timings,
            "rerank_s": scored.rerank_s[condition.name],
            "scoring_s": scored.scoring_s,
            "tokens_per_s": scored.tokens_per_s,
        }
        config = condition_config(self.point.config, condition, [c.spec for c in self.conditions])
        record = point_results(
            rows,
            self.point.text,
            config,
            timings,
            resumed=scored.resumed,
            candidates=searched(condition, self.point),
        )
        statistics = condition_statistics(
            table, rows, blocks=blocks.labels, resamples=self.resamples, seed=self.seed
        )
        record.comparison = {
            "seed": self.seed,  # of the random condition's draws and of the bootstrap
            "bootstrap": blocks.as_dict(),
            **statistics,
        }
        write_jsonl_atomic(self.out / condition.name / WINDOWS_FILE, (r.to_json() for r in rows))
        write_json_atomic(self.out / condition.name / RESULTS_FILE, record.to_json(), default=str)
        return record

    def _summary(
        self, table: list[WindowScores], results: dict[str, PointResults], scored: Scored, blocks: TableBlocks
    ) -> dict:
        metrics = ("token_ppl", "word_ppl", "total_nll")
        return {
            "format": COMPARE_FORMAT,
            "conditions": [c.spec for c in self.conditions],
            "results": {
                name: {"dir": str(self.out / name), **{k: getattr(r.metrics, k) for k in metrics}}
                for name, r in results.items()
            },
            "table": {
                "file": TABLE_FILE,
                "windows": len(table),
                "retrieving_windows": len(retrieving_windows(r.candidates for r in table)),
                "candidates": sum(len(r.candidates) for r in table),
                "rank_logprob": self.rank,
                "lm_requests": scored.lm_rows,
                "resumed_windows": scored.resumed,
            },
            "bootstrap": {**blocks.as_dict(), "resamples": self.resamples, "seed": self.seed},
            "statistics": {name: r.comparison for name, r in results.items()},
            "timings": {
                **self.point.timings,
                "scoring_s": scored.scoring_s,
                "tokens_per_s": scored.tokens_per_s,
                "rerank_s": scored.rerank_s,
            },
        }
