"""End-of-run statistics over the dataset's columns (pure: lists in, numbers out).

Gains are in nats per target token: for each row, (best candidate's summed log-prob − reference log-prob)
divided by the number of target tokens, then averaged over rows. Rows without candidates are left out of
the candidate statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summarize(
    lm_logprobs: Sequence[Sequence[float]],
    no_retrieval_logprob: Sequence[float],
    target_lengths: Sequence[int],
    k: int | None = None,
) -> dict[str, float | int]:
    """Examples, mean gain of the LM-best candidate over BM25 top-1 and over no retrieval, top-1 agreement."""
    rows = [
        (np.asarray(c, dtype=np.float64), float(nr), int(n))
        for c, nr, n in zip(lm_logprobs, no_retrieval_logprob, target_lengths, strict=True)
        if len(c) > 0 and n > 0
    ]
    out: dict[str, float | int] = {"examples": len(lm_logprobs), "examples_with_candidates": len(rows)}
    if k is not None:
        out["examples_with_fewer_than_k"] = sum(len(c) < k for c in lm_logprobs)
    if not rows:
        return out | {
            "gain_best_over_bm25_top1": float("nan"),
            "gain_best_over_no_retrieval": float("nan"),
            "gain_bm25_top1_over_no_retrieval": float("nan"),
            "bm25_top1_is_lm_best": float("nan"),
        }
    best = np.array([c.max() for c, _, _ in rows])
    top1 = np.array([c[0] for c, _, _ in rows])
    none = np.array([nr for _, nr, _ in rows])
    ntok = np.array([n for _, _, n in rows], dtype=np.float64)
    # argmax returns the first maximum, so a tie with BM25's top-1 counts as agreement.
    agree = np.array([int(np.argmax(c)) == 0 for c, _, _ in rows])
    return out | {
        "gain_best_over_bm25_top1": float(np.mean((best - top1) / ntok)),
        "gain_best_over_no_retrieval": float(np.mean((best - none) / ntok)),
        "gain_bm25_top1_over_no_retrieval": float(np.mean((top1 - none) / ntok)),
        "bm25_top1_is_lm_best": float(np.mean(agree)),
    }


STRENGTH_QUANTILES = (0.25, 0.5, 0.75, 0.9)
"""Where the prefixes' best BM25 scores are cut into bands for ``gain_by_bm25_strength``."""


def gain_by_bm25_strength(
    bm25_scores: Sequence[Sequence[float]],
    lm_logprobs: Sequence[Sequence[float]],
    no_retrieval_logprob: Sequence[float],
    target_lengths: Sequence[int],
) -> list[dict]:
    """Mean gain of BM25's top-1 over no retrieval (nats per target token) in bands of the best BM25 score.

    When retrieval helps: a strong lexical match (a parallel passage, a quotation) helps the LM, a weak one
    often distracts it. Bands are cut at the ``STRENGTH_QUANTILES`` of the prefixes' best scores.
    """
    rows = [
        (max(b), (c[0] - nr) / n)
        for b, c, nr, n in zip(bm25_scores, lm_logprobs, no_retrieval_logprob, target_lengths, strict=True)
        if len(c) > 0 and n > 0
    ]
    if not rows:
        return []
    top = np.array([r[0] for r in rows])
    gain = np.array([r[1] for r in rows])
    edges = [float(top.min()), *np.quantile(top, STRENGTH_QUANTILES).tolist(), float(top.max())]
    bands = []
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        inside = (top >= lo) & ((top < hi) if i < len(edges) - 2 else (top <= hi))
        if inside.any():
            bands.append(
                {
                    "bm25_from": lo,
                    "bm25_to": hi,
                    "prefixes": int(inside.sum()),
                    "gain_bm25_top1_over_no_retrieval": float(gain[inside].mean()),
                }
            )
    return bands


def format_strength(bands: list[dict]) -> str:
    """One line per band of ``gain_by_bm25_strength``."""
    return "\n".join(
        f"  best BM25 score {b['bm25_from']:6.1f}-{b['bm25_to']:6.1f}: {b['prefixes']:5d} prefixes, "
        "BM25 top-1 vs no "
        f"retrieval {b['gain_bm25_top1_over_no_retrieval']:+.3f} nats/token"
        for b in bands
    )


def format_summary(stats: dict, extra: dict | None = None) -> str:
    """A few aligned lines for the terminal."""
    items = {**stats, **(extra or {})}
    bands = items.pop("gain_by_bm25_strength", None)
    width = max((len(k) for k in items), default=0)
    lines = []
    for key, value in items.items():
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        lines.append(f"  {key.ljust(width)}  {shown}")
    if bands:
        lines.append(format_strength(bands))
    return "\n".join(lines)
