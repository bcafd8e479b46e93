"""What every ``--compare`` table reports beside perplexity: paired bootstrap CIs, counts, copy rates.

Both baselines are read off the table itself (no passage, and candidate 0 = BM25's top-1), so every
condition is compared with them whether or not they were requested as conditions. Per condition:

- ``vs_bm25`` / ``vs_no_retrieval``: relative perplexity change with its paired 95% bootstrap interval
  over windows (``ralm.statistics``); an interval across zero is a tie;
- ``share_of_oracle_gap``: (NLL_bm25 − NLL_condition) / (NLL_bm25 − NLL_oracle) summed over windows, the
  share of the BM25 → best-of-k gap in log perplexity the condition recovers (1: the oracle, 0: BM25);
- ``retrieving_windows``: windows with candidates (window 0 never retrieves); ``windows_with_passage``:
  those where the condition prepended one; ``copy_windows``: those whose passage holds an 8-token run of
  the window's target (``ralm.retrieval.overlap``), a leak of the evaluated text into the corpus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ralm.retrieval.overlap import COPY_TOKENS
from ralm.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED, format_change, paired_bootstrap


def baseline_nlls(table: Sequence[dict]) -> dict[str, list[float]]:
    """Per-window NLL of no retrieval, BM25 top-1 and the oracle (best of k), from the table rows."""
    none = [r["no_passage_nll"] for r in table]
    bm25 = [r["candidates"][0]["nll"] if r["candidates"] else r["no_passage_nll"] for r in table]
    oracle = [
        min(c["nll"] for c in r["candidates"]) if r["candidates"] else r["no_passage_nll"] for r in table
    ]
    return {"none": none, "bm25": bm25, "oracle": oracle}


def condition_statistics(
    table: Sequence[dict],
    rows: Sequence[dict],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict:
    """The statistics of one condition's window rows (in table order) against both baselines."""
    base = baseline_nlls(table)
    n = [r["num_targets"] for r in table]
    nll = [r["nll"] for r in rows]
    retrieving = [r["window"] for r in table if r["candidates"]]
    with_passage = [r for r in rows if r["passage_id"] is not None]
    copies = sum(1 for r in with_passage if r.get("copies_target"))
    gap = math.fsum(base["bm25"]) - math.fsum(base["oracle"])
    gained = math.fsum(base["bm25"]) - math.fsum(nll)
    return {
        "vs_bm25": paired_bootstrap(nll, base["bm25"], n, resamples=resamples, seed=seed).as_dict(),
        "vs_no_retrieval": paired_bootstrap(nll, base["none"], n, resamples=resamples, seed=seed).as_dict(),
        "share_of_oracle_gap": gained / gap if gap > 0 else None,
        "windows": len(rows),
        "retrieving_windows": len(retrieving),
        "windows_with_passage": len(with_passage),
        "copy_windows": copies,
        "copy_rate": copies / len(retrieving) if retrieving else 0.0,
        "copy_tokens": COPY_TOKENS,
    }


def format_compare_table(rows: list[tuple[str, float, dict]]) -> str:
    """One line per (label, token perplexity, comparison statistics): the changes against BM25 and no
    retrieval with their 95% intervals, the share of windows given a passage, the copy rate; and a footer."""
    width = max([len(row[0]) for row in rows] + [9])
    lines = [
        f"{'condition':<{width}}  {'token ppl':>9}  {'vs BM25 [95% CI]':>25}  {'vs no retrieval [95% CI]':>25}"
        f"  {'passage':>7}  {'copies':>6}"
    ]
    for name, token_ppl, stats in rows:
        rate = stats["windows_with_passage"] / max(stats["retrieving_windows"], 1)
        lines.append(
            f"{name:<{width}}  {token_ppl:>9.3f}  {format_change(stats['vs_bm25']):>25}  "
            f"{format_change(stats['vs_no_retrieval']):>25}  {rate:>7.0%}  {stats['copy_rate']:>6.1%}"
        )
    if rows:
        stats = rows[0][2]
        lines.append(
            f"{stats['windows']} windows, {stats['retrieving_windows']} retrieving (window 0 is scored with no passage "
            f"in every condition); CIs: paired bootstrap over windows, {stats['vs_bm25']['resamples']} resamples, "
            f"seed {stats['vs_bm25']['seed']}; 'tie': the interval holds 0. passage: share of retrieving windows "
            f"given a passage; copies: share whose passage holds {stats['copy_tokens']} consecutive target tokens "
            "(a leak)."
        )
    return "\n".join(lines)
