"""The demo report's figure (``report.png``): per eval set the conditions' change against no retrieval, and
each seed's checkpoint-selection curve with the export decision written under it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from ralm.passage_rules import NO_RETRIEVAL
from ralm.pipeline.labels import UPPER_BOUNDS, is_seed_export, label
from ralm.pipeline.plan import FORWARD_ROWS
from ralm.plots import pyplot, save_figure


def plot(
    sets: dict[str, dict[str, dict]],
    gain_curves: dict[str, list],
    title: str,
    path: Path,
    decisions: list[str],
    metrics: dict[str, dict] | None = None,
) -> None:
    """Per eval set, each condition's change vs no retrieval on the retrieving windows with its 95% CI; and
    each seed's selection curve with the export decision's comparisons (what decided it) written under it.
    `metrics`: each condition's results (its label names what a seed's row plays)."""
    plt = pyplot()
    bounds = {*UPPER_BOUNDS, *(row.name for row in FORWARD_ROWS if row.is_bound)}
    fig, axes = plt.subplots(1, len(sets) + 1, figsize=(6 * (len(sets) + 1), 5.6))
    for ax, (name, comparisons) in zip(axes, sets.items(), strict=False):
        names = [n for n in comparisons if n != NO_RETRIEVAL]
        changes = [100 * comparisons[n]["vs_no_retrieval"]["change"] for n in names]
        lows = [100 * comparisons[n]["vs_no_retrieval"]["low"] for n in names]
        highs = [100 * comparisons[n]["vs_no_retrieval"]["high"] for n in names]
        colors = ["#999999" if n in bounds else "#55a868" if is_seed_export(n) else "#4c72b0" for n in names]
        errors = [
            [c - lo for c, lo in zip(changes, lows, strict=True)],
            [h - c for c, h in zip(changes, highs, strict=True)],
        ]
        ax.bar(range(len(names)), changes, yerr=errors, capsize=3, color=colors)
        for i, c in enumerate(
            changes
        ):  # a bar of height 0 (an abstaining reranker) is still visible as a label
            ax.annotate(f"{c:+.1f}%", (i, c), ha="center", va="bottom" if c >= 0 else "top", fontsize=7)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(
            range(len(names)),
            [label(n, (metrics or {}).get(n)) for n in names],
            rotation=30,
            ha="right",
            fontsize=7,
        )
        ax.set_ylabel("token perplexity change vs no retrieval (%)")
        ax.set_title(f"{name}: retrieving windows, vs no retrieval, 95% CI (lower is better)", fontsize=9)
    right = axes[-1]
    for name, curve in gain_curves.items():
        if curve:
            steps, gains = zip(*curve, strict=True)
            right.plot(steps, gains, marker="o", label=name)
    right.axhline(0.0, color="#4c72b0", linestyle="--", label="BM25 top-1 (0)")
    right.axhline(1.0, color="#c44e52", linestyle="--", label="best candidate (1)")
    right.set_xlabel("reranker optimizer steps")
    right.set_ylabel("gain recovered on the selection prefixes")
    right.set_title("Checkpoint selection (training books), not the held-out text", fontsize=9)
    right.legend(loc="best", fontsize=7)
    if decisions:  # the comparison with no retrieval and BM25 that decided the export, not drawn above
        right.text(
            0.0,
            -0.25,
            "\n".join(textwrap.fill(d, 90) for d in decisions),
            transform=right.transAxes,
            fontsize=6,
            va="top",
        )
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
