"""``ralm eval flare --sweep theta=0.2,0.4,0.6,0.8,1.0``: FLARE's answer quality against how often it
retrieves.

FLARE's paper (Figure 8 and §6) reports it best when 40-80% of sentences trigger retrieval. Each value is
one FLARE run (``OUTPUT/theta=V``, resumable, the single run's files); single-time retrieval
(``OUTPUT/single``) and no retrieval (``OUTPUT/no-retrieval``) are run once as reference lines. Then
``OUTPUT/sweep.json`` holds one row per point (EM, F1, retrieval and search rates, LM calls and searches
per question) and
``OUTPUT/sweep.png`` draws EM and F1 against the retrieval rate. The rate is always printed, so a FLARE
that never retrieves cannot pass for one that helps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ralm.atomic_files import write_json_atomic
from ralm.errors import RalmInputError
from ralm.eval.qa.flare_options import FlareOptions
from ralm.passage_rules import NO_RETRIEVAL
from ralm.plots import pyplot, save_figure

SWEEPABLE = ("theta", "beta")
REFERENCES = ("single", NO_RETRIEVAL)
SWEEP_FILE, PLOT_FILE = "sweep.json", "sweep.png"


def theta_for_rate(min_probs: Sequence[float], rate: float) -> float:
    """The smallest theta at which at least a share `rate` of look-ahead sentences is unsure, each sentence
    given by its lowest token probability (unsure: min <= theta): the ceil(rate * n)-th smallest."""
    if not min_probs:
        raise RalmInputError("no look-ahead sentence to choose theta from")
    if not 0.0 < rate <= 1.0:
        raise RalmInputError(f"retrieval rate {rate}: must be above 0 and at most 1")
    ordered = sorted(min_probs)
    return float(ordered[math.ceil(rate * len(ordered)) - 1])


@dataclass(frozen=True)
class FlareSweep:
    """One FLARE setting and its values; `base` holds every other setting."""

    field: str
    values: tuple[float, ...]
    base: FlareOptions

    def folder(self, value: float) -> str:
        return f"{self.field}={value:g}"


def parse_flare_sweep(spec: str, base: FlareOptions) -> FlareSweep:
    """``"theta=0.4,0.8"`` -> FlareSweep("theta", (0.4, 0.8), base); checked before any model loads."""
    name, eq, values = spec.partition("=")
    field = name.strip()
    if not eq or field not in SWEEPABLE:
        raise RalmInputError(f"--sweep {spec!r}: expected {' or '.join(SWEEPABLE)}=comma-separated numbers")
    if base.method != "flare":
        raise RalmInputError(f"--sweep sweeps FLARE itself: use --method flare, not {base.method}")
    parsed = []
    for value in values.split(","):
        try:
            number = float(value)
        except ValueError:
            raise RalmInputError(f"--sweep {spec!r}: {value.strip()!r} is not a number") from None
        try:
            replace(base, **{field: number})  # FlareOptions's own rule for the field
        except RalmInputError as err:
            raise RalmInputError(f"--sweep {spec!r}: {err}") from None
        parsed.append(number)
    sweep = FlareSweep(field, tuple(parsed), base)
    if len({sweep.folder(v) for v in parsed}) != len(parsed):  # distinct folders, not only distinct floats
        raise RalmInputError(f"--sweep {spec!r}: values must be distinct")
    return sweep


def sweep_row(label: str, results: dict, value: float | None = None) -> dict:
    """One point (or reference) of the sweep from a run's results.json."""
    m = results["metrics"]
    return {
        "run": label,
        "value": value,
        "em": m.get("em"),
        "f1": m.get("f1"),
        "retrieval_rate": m["retrieval_rate"],
        "search_rate": m["search_rate"],
        "lm_calls_per_example": m["lm_calls_per_example"],
        "searches_per_example": m["searches_per_example"],
        "examples": results["done"],
    }


def run_flare_sweep(sweep: FlareSweep, output: str, run: Callable[[FlareOptions, str], dict]) -> dict:
    """Every point and both references through `run(config, folder)`; writes sweep.json and sweep.png."""
    out = Path(output)
    points = []
    for value in sweep.values:
        config = replace(sweep.base, **{sweep.field: value})
        points.append(sweep_row(sweep.folder(value), run(config, str(out / sweep.folder(value))), value))
    references = [
        sweep_row(method, run(replace(sweep.base, method=method), str(out / method))) for method in REFERENCES
    ]
    summary = {
        "format": "ralm-flare-sweep/2",
        "field": sweep.field,
        "points": points,
        "references": references,
    }
    write_json_atomic(out / SWEEP_FILE, summary)
    plot_flare_sweep(summary, out / PLOT_FILE)
    for row in points + references:
        print(
            f"{row['run']:>16}: EM {row['em'] or 0:.3f}  F1 {row['f1'] or 0:.3f}  retrieval rate "
            f"{row['retrieval_rate']:.2f} (searched at {row['search_rate']:.2f})  "
            f"LM calls/q {row['lm_calls_per_example']:.2f}"
        )
    print(f"-> {out / SWEEP_FILE}, {out / PLOT_FILE}")
    return summary


def plot_flare_sweep(summary: dict, path: Path) -> None:
    """EM and F1 against the share of sentences that retrieved; the references as horizontal lines."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    points = sorted(summary["points"], key=lambda p: p["retrieval_rate"])
    xs = [p["retrieval_rate"] for p in points]
    for key, marker in (("em", "o"), ("f1", "s")):
        if all(p[key] is not None for p in points):
            ax.plot(xs, [p[key] for p in points], marker=marker, label=f"FLARE {key.upper()}")
            for p in points:
                ax.annotate(f"{summary['field']}={p['value']:g}", (p["retrieval_rate"], p[key]), fontsize=7)
    for ref, style in zip(summary["references"], ("--", ":"), strict=True):
        if ref["em"] is not None:
            ax.axhline(ref["em"], color="gray", linestyle=style, label=f"{ref['run']} EM")
    ax.set_xlabel("share of sentences that retrieved")
    ax.set_ylabel("score")
    ax.set_xlim(-0.02, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
