"""``--sweep stride=4,8,16,32`` (``query-tokens=16,32,64``, ``max_length=256,512,1024``): several points,
one retrieval pass, one plot.

The paper's Figures 5 and 6 plot perplexity against the retrieval stride and the query length; the input
length decides how much context a passage displaces (the paper: 256 of 1,024 tokens). Points share the
tokenized text, the loaded LM and a single batched search over the union of their queries (stride 8's
queries are a subset of stride 4's, so the sweep costs little more retrieval than one run). With
``--compare`` each point is a comparison table and the plot draws every condition against the swept value.

The first window of a point scores its first ``max_length`` tokens with no passage, so points of different
input lengths score different shares of their targets with a passage. Every point's perplexity is also given
on the *common targets*: the tokens from the largest point's ``max_length`` on, which every point scores in
windows that retrieve (the same tokens, so the points are comparable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ralm.atomic_files import write_json_atomic
from ralm.errors import RalmInputError
from ralm.eval.ppl.outputs import read_windows, targets_perplexity
from ralm.plots import pyplot, save_figure

SWEPT_ATTRIBUTE = {"stride": "stride", "query_tokens": "query_tokens", "max_length": "input_length"}
"""Each setting ``--sweep`` may vary, by its option name, and the ``run.PointKey`` attribute that holds it
(``max_length``, the ``--max-length`` option, is the point's LM input length)."""
SWEEPABLE = tuple(SWEPT_ATTRIBUTE)
_AXIS = {
    "stride": "retrieval stride s",
    "query_tokens": "query length ℓ (tokens)",
    "max_length": "LM input length (tokens)",
}


@dataclass(frozen=True)
class Sweep:
    """The points of a run: the window setting `field` (one of SWEEPABLE) at each of `values` (distinct
    positive integers, in the order given). The command line and YAML give it as text, ``stride=4,8,16``
    (`parse_sweep`; `spec` writes it back)."""

    field: str
    values: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        problem = _problem(self.field, self.values)
        if problem:
            raise RalmInputError(f"--sweep {self.spec!r}: {problem}")

    @property
    def spec(self) -> str:
        """The sweep as ``--sweep`` text (``parse_sweep`` reads it back as the same sweep)."""
        return f"{self.field}={','.join(str(v) for v in self.values)}"

    def folder(self, value: int) -> str:
        return f"{self.field}={value}"


def _problem(field: str, values: tuple) -> str | None:
    """What is wrong with a sweep of `field` over `values` (None: nothing)."""
    if field not in SWEEPABLE:
        return f"expected one of {', '.join(SWEEPABLE)} = comma-separated integers"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "values must be integers"
    if not values or min(values) < 1 or len(set(values)) != len(values):
        return "values must be distinct positive integers"
    return None


def parse_sweep(spec: str) -> Sweep:
    """``"stride=4,8,16"`` -> Sweep("stride", (4, 8, 16)); names may use - or _."""
    name, eq, values = spec.partition("=")
    field = name.strip().replace("-", "_") if eq else ""
    try:
        parsed = tuple(int(v) for v in values.split(",")) if field in SWEEPABLE else ()
    except ValueError:
        parsed = (values,)  # not integers: said as such
    problem = _problem(field, parsed)
    if problem:
        raise RalmInputError(f"--sweep {spec!r}: {problem}")
    return Sweep(field, parsed)


def report_sweep(plan: Sweep, points: Sequence, out: Path, *, compared: bool = False) -> dict:
    """``sweep.json`` and ``sweep.png`` from ``evaluate``'s points (``run.PointResult``); returns the record.

    Each point has its whole-text metrics and, under ``common_targets``, its perplexity on the tokens from
    the largest point's ``max_length`` on (the same targets at every point). With `compared` (``--compare``)
    each point holds every condition.
    """
    first = max(p.key.input_length for p in points)
    records = []
    for p in points:
        named = p.results if compared else {"": p.results}
        conditions = {}
        for name, results in named.items():
            folder = p.folder / name if compared else p.folder
            rows = read_windows(folder)
            conditions[name] = {**asdict(results.metrics), "common_targets": targets_perplexity(rows, first)}
        record = {"value": p.key.value(plan.field), "dir": str(p.folder)}
        records.append({**record, "conditions": conditions} if compared else {**record, **conditions[""]})
    result = {
        "field": plan.field,
        "values": list(plan.values),
        "common_targets_from": first,
        "points": records,
    }
    write_json_atomic(out / "sweep.json", result, default=str)
    plot_sweep(plan, records, out / "sweep.png", compared=compared)
    print(f"sweep: {out / 'sweep.json'} and {out / 'sweep.png'} (common targets: tokens {first} on)")
    for r in records:
        named = r["conditions"] if compared else {"token ppl": r}
        cells = "  ".join(f"{n} {c['common_targets']['token_ppl']:.3f}" for n, c in named.items())
        print(f"  {plan.field}={r['value']}: {cells}")
    return result


def plot_sweep(sweep: Sweep, points: list[dict], path: Path, *, compared: bool = False) -> None:
    """Perplexity against the swept value (log-2 x axis for strides, as the paper draws them): token and
    word perplexity of one condition, or (`compared`) every condition on the common targets."""
    plt = pyplot()
    xs = [p["value"] for p in points]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    if compared:
        series = {
            name: [p["conditions"][name]["common_targets"]["token_ppl"] for p in points]
            for name in points[0]["conditions"]
        }
        ylabel = "token perplexity, common targets"
    else:
        series = {
            label: [p[key] for p in points]
            for key, label in (("token_ppl", "token perplexity"), ("word_ppl", "word perplexity"))
        }
        ylabel = "perplexity"
    for label, ys in series.items():
        if all(y is not None and math.isfinite(y) for y in ys):
            ax.plot(xs, ys, marker="o", label=label)
    if sweep.field == "stride":
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel(_AXIS[sweep.field])
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path)
