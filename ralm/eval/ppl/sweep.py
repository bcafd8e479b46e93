"""``--sweep stride=4,8,16,32`` (or ``query-tokens=16,32,64``): several points, one retrieval pass, one plot.

The paper's Figures 5 and 6 plot perplexity against the retrieval stride and the query length. Points
share the tokenized text, the loaded LM and a single batched search over the union of their queries
(stride 8's queries are a subset of stride 4's, so the sweep costs little more retrieval than one run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ralm.errors import RalmInputError
from ralm.plots import pyplot, save_figure

SWEEPABLE = ("stride", "query_tokens")


@dataclass(frozen=True)
class Sweep:
    field: str
    values: tuple[int, ...]

    def folder(self, value: int) -> str:
        return f"{self.field}={value}"


def parse_sweep(spec: str) -> Sweep:
    """``"stride=4,8,16"`` -> Sweep("stride", (4, 8, 16)); names may use - or _."""
    name, eq, values = spec.partition("=")
    field = name.strip().replace("-", "_")
    if not eq or field not in SWEEPABLE:
        raise RalmInputError(
            f"--sweep {spec!r}: expected one of {', '.join(SWEEPABLE)} = comma-separated integers"
        )
    try:
        parsed = tuple(int(v) for v in values.split(","))
    except ValueError:
        raise RalmInputError(f"--sweep {spec!r}: values must be integers") from None
    if not parsed or min(parsed) < 1 or len(set(parsed)) != len(parsed):
        raise RalmInputError(f"--sweep {spec!r}: values must be distinct positive integers")
    return Sweep(field, parsed)


def plot_sweep(sweep: Sweep, points: list[dict], path: Path, baseline: float | None = None) -> None:
    """Perplexity against the swept value (log-2 x axis for strides, as the paper draws them)."""
    plt = pyplot()
    xs = [p["value"] for p in points]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key, label in (("token_ppl", "token perplexity"), ("word_ppl", "word perplexity")):
        ys = [p[key] for p in points]
        if all(y is not None and math.isfinite(y) for y in ys):
            ax.plot(xs, ys, marker="o", label=label)
    if baseline is not None:
        ax.axhline(baseline, color="gray", linestyle="--", label="no retrieval (token)")
    if sweep.field == "stride":
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("retrieval stride s" if sweep.field == "stride" else "query length ℓ (tokens)")
    ax.set_ylabel("perplexity")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path)
