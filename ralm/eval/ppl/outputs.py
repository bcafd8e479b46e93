"""Files of ``ralm eval ppl`` (docs/formats.md §6): ``results.json`` and per-window ``windows.jsonl``.

Per-window lines are appended to ``windows.jsonl.partial`` as chunks finish; its first line holds a key of
the run's configuration, so a killed run with the same configuration resumes where it stopped and a run
with another configuration starts over. When all windows are done the file is renamed to ``windows.jsonl``
and ``results.json`` is written under a temporary name and renamed: nothing half-written is left behind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence, Sized
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from ralm.atomic_files import write_jsonl_atomic
from ralm.eval.ppl.records import Counts, Metrics, PointResults, WindowRecord
from ralm.eval.ppl.windows import retrieving_windows
from ralm.fingerprints import fingerprint
from ralm.jsonl import JsonlLog, read_jsonl

RESULTS_FORMAT = "ralm-eval-ppl/1"
WINDOWS_FILE = "windows.jsonl"
RESULTS_FILE = "results.json"


def config_key(config: dict) -> str:
    """The run's configuration as the first line of ``windows.jsonl.partial`` (a changed one starts over)."""
    return fingerprint(config)


class Record(Protocol):
    """A per-window line (``ralm.eval.ppl.records``): its JSON object and back."""

    window: int

    def to_json(self) -> dict: ...


R = TypeVar("R", bound=Record)


class WindowLog(Generic[R]):
    """Append-only per-window records with resume by configuration key (``name``: the final file's name;
    `record`: the lines' type, ``WindowRecord`` or the table's ``WindowScores``)."""

    def __init__(self, out_dir: Path, key: str, name: str = WINDOWS_FILE, record: type[R] = WindowRecord):
        self.partial = out_dir / f"{name}.partial"
        self.final = out_dir / name
        self.key = key
        self._record = record
        self._log = JsonlLog(
            self.partial, lambda row: row["window"], header={"config_key": key}, ensure_ascii=True
        )

    @property
    def done(self) -> dict[int, R]:
        """The finished windows' records by window index."""
        return {i: self._record.from_json(row) for i, row in self._log.records.items()}

    def append(self, rows: Iterable[R]) -> None:
        self._log.append(row.to_json() for row in rows)

    def rows(self) -> list[R]:
        """The finished rows in window order."""
        done = self.done
        return [done[i] for i in sorted(done)]

    def finish(self) -> list[R]:
        """All rows in window order, written to the final file (atomic rename of a complete file)."""
        rows = self.rows()
        write_jsonl_atomic(self.final, (row.to_json() for row in rows))
        self.partial.unlink(missing_ok=True)
        return rows


def point_results(
    rows: list[WindowRecord], text, config: dict, timings: dict, resumed: int, candidates: Sequence[Sized]
) -> PointResults:
    """The ``results.json`` record of one point from its window rows (`text`: an ``EvalText``;
    `candidates`: each window's candidates, which say which windows retrieved)."""
    retrieving = len(retrieving_windows(candidates))
    metrics = perplexity_metrics(
        rows, len(text.tokens), text.words, text.words_eval_lm, retrieving=retrieving
    )
    counts = Counts(
        tokens=len(text.tokens),
        text_tokens=getattr(text, "text_tokens", 0) or len(text.tokens),
        scored_tokens=metrics.scored_tokens,
        words=text.words,
        words_eval_lm=text.words_eval_lm,
        windows=len(rows),
        retrieving_windows=retrieving,
        windows_with_passage=sum(1 for r in rows if r.passage_id is not None),
        resumed_windows=resumed,
        copy_windows=sum(1 for r in rows if r.passage_id is not None and r.copies_target),
    )
    return PointResults(RESULTS_FORMAT, config, counts, metrics, timings)


def perplexity_metrics(
    rows: list[WindowRecord], num_tokens: int, words: int, words_eval_lm: int, *, retrieving: int
) -> Metrics:
    """Token and word perplexity, the divisors eval_lm.py used for its published numbers, and the share
    of the `retrieving` windows (``windows.retrieving_windows``) given a passage.

    eval_lm.py divides the total NLL by ``text.count(" ")`` (word level) or by all N tokens (token level,
    although the first token is never scored); both are given beside the honest divisors.
    """
    total = math.fsum(r.nll for r in rows)
    scored = sum(r.num_targets for r in rows)
    with_passage = sum(1 for r in rows if r.passage_id is not None)  # a passage needs a candidate

    def ppl(divisor: int) -> float | None:
        return math.exp(total / divisor) if divisor > 0 else None

    return Metrics(
        total_nll=total,
        scored_tokens=scored,
        token_ppl=ppl(scored),
        word_ppl=ppl(words),
        token_ppl_eval_lm=ppl(num_tokens),
        word_ppl_eval_lm=ppl(words_eval_lm),
        windows=len(rows),
        retrieval_rate=with_passage / retrieving if retrieving else 0.0,
    )


def read_windows(folder: Path) -> list[WindowRecord]:
    """A finished run's (or compared condition's) ``windows.jsonl`` rows, in window order."""
    return [WindowRecord.from_json(row) for _, row in read_jsonl(folder / WINDOWS_FILE)]


def read_config(folder: Path) -> dict:
    """A finished run's (or compared condition's) ``results.json`` config: what the run used, e.g. the LM
    input length once capped at the LM's context (``max_length``) and the dtype the LM ran in."""
    return json.loads((Path(folder) / RESULTS_FILE).read_text())["config"]


def targets_perplexity(rows: list[WindowRecord], first_target: int) -> dict:
    """Token perplexity over the windows whose targets start at or after `first_target` (``windows.jsonl``
    rows): e.g. the tokens every point of a ``max_length`` sweep scores in a retrieving window."""
    kept = [r for r in rows if r.target_start >= first_target]
    scored = sum(r.num_targets for r in kept)
    total = math.fsum(r.nll for r in kept)
    return {
        "first_target": first_target,
        "windows": len(kept),
        "scored_tokens": scored,
        "total_nll": total,
        "token_ppl": math.exp(total / scored) if scored else None,
    }
