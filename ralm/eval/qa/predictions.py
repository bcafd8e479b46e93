"""Resumable per-example predictions and the atomic ``results.json`` of `ralm eval qa` and `ralm eval flare`.

Each finished example is appended to ``predictions.jsonl`` and flushed to disk at once, so a killed run
loses at most the example it was on. ``run.json`` records the settings that change predictions; rerunning
into the same folder skips the ids already written when the settings match, and refuses to mix runs when
they differ. A torn last line (a kill mid-write) is dropped on resume. ``results.json`` is written to a
temporary name and renamed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralm.atomic_files import write_json_atomic
from ralm.errors import RalmInputError
from ralm.jsonl import JsonlLog

if TYPE_CHECKING:
    from ralm.lm.options import LMOptions
    from ralm.retrieval.options import RetrievalOptions

PROMPT_START = "special-prefix"
"""run.json's record of how prompts start: with the tokenizer's special prefix (its BOS, if any)."""
PREDICTIONS = "predictions.jsonl"
RUN = "run.json"
RESULTS = "results.json"


class PredictionWriter:
    """Appends one JSON line per finished example; knows which example ids are already done."""

    def __init__(self, out_dir: str | Path, settings: dict, overwrite: bool = False):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / PREDICTIONS
        self.out_dir.mkdir(parents=True, exist_ok=True)
        run_path = self.out_dir / RUN
        if overwrite:
            self.path.unlink(missing_ok=True)
            (self.out_dir / RESULTS).unlink(missing_ok=True)
        elif run_path.exists() and self.path.exists():
            previous = json.loads(run_path.read_text(encoding="utf-8"))
            if previous != json.loads(json.dumps(settings)):
                changed = sorted(
                    k for k in set(previous) | set(settings) if previous.get(k) != settings.get(k)
                )
                raise RalmInputError(
                    f"{self.out_dir}: holds predictions made with other settings ({', '.join(changed)}); "
                    "use another --output or --overwrite true"
                )
        write_json_atomic(run_path, settings, ensure_ascii=False)
        self._log = JsonlLog(self.path, lambda record: str(record["id"]))
        self.done: dict[str, dict] = self._log.records

    def write(self, record: dict) -> None:
        """Append one finished example, on disk before this returns."""
        self._log.append([record])

    def close(self) -> None:
        """Nothing to release (each write opens and syncs the file); kept for the `with` form."""

    def records(self, ids: Iterable[str]) -> list[dict]:
        """The finished records for `ids`, in that order (examples not done are left out)."""
        return [self.done[i] for i in ids if i in self.done]

    def __enter__(self) -> PredictionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recorded_settings(
    names: Iterable[str], arguments: Mapping[str, Any], lm: LMOptions, retrieval: RetrievalOptions
) -> dict:
    """The settings `names` as ``run.json`` records them: a command's own parameters from `arguments`, and
    the group fields under the flat names they had before the groups (``lm``: the model; ``index``, ``k``;
    ``max_length``: the requested length, 1024 when not given, before the cap at the LM's context), so a
    folder written before the groups resumes; and ``prompt_start``, how every prompt starts (the
    tokenizer's special prefix, ``ralm.eval.qa.prompts.prompt_ids``), so a folder whose prompts started
    otherwise refuses to resume instead of mixing the two."""
    from ralm.lm.options import PAPER_INPUT_LENGTH

    groups = {
        "lm": lm.model,
        "index": retrieval.index,
        "k": retrieval.k,
        "max_length": lm.max_length if lm.max_length is not None else PAPER_INPUT_LENGTH,
    }
    recorded = {name: groups[name] if name in groups else arguments[name] for name in names}
    return {**recorded, "prompt_start": PROMPT_START}


def mean_of(records: list[dict], key: str) -> float | None:
    """Mean of a per-example number over the records that have it (None when none has)."""
    values = [r[key] for r in records if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def write_results(
    out_dir: str | Path, fmt: str, settings: dict, summary: dict, passages_cut: int, started: float, model
) -> dict:
    """``results.json`` of a QA-style run: format, settings, the run's `summary` (counts, metrics), how many
    passages were cut to fit, and wall time since `started` (a ``time.perf_counter()``) on `model`'s
    device."""
    results = {
        "format": fmt,
        "config": settings,
        **summary,
        "passages_cut": passages_cut,
        "timings": {
            "seconds": time.perf_counter() - started,
            "device": str(model.device),
            "dtype": str(model.dtype),
        },
    }
    write_json_atomic(Path(out_dir) / RESULTS, results, ensure_ascii=False)
    return results
