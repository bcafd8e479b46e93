"""What every ``--compare`` table reports beside perplexity: paired bootstrap CIs, counts, copy rates.

Both baselines are read off the table itself (no passage, and candidate 0 = BM25's top-1), so every
condition is compared with them whether or not they were requested as conditions. Per condition:

- ``vs_bm25`` / ``vs_no_retrieval``: relative perplexity change with its paired 95% bootstrap interval
  (``ralm.statistics``); an interval across zero is a tie. Neighbouring windows share chapters and
  passages, so by default (``--bootstrap blocks``) the bootstrap draws blocks of consecutive windows:
  ONE block length per table, sized from the data (``ralm.statistics.block_length`` of the per-window
  NLL difference BM25 − no retrieval, so every row is resampled alike), and no block spans two documents
  of a JSONL text. ``--bootstrap windows`` draws single windows (the independent-windows interval);
- ``share_of_oracle_gap``: (NLL_bm25 − NLL_condition) / (NLL_bm25 − NLL_oracle) summed over windows, the
  share of the BM25 → best-of-k gap in log perplexity the condition recovers (1: the oracle, 0: BM25);
- ``retrieving_windows``: windows whose query found a candidate (``windows.retrieving_windows``; window 0
  makes no query); ``windows_with_passage``: those where the condition prepended one; ``copy_windows``:
  those whose passage holds an 8-token run of the window's target (``ralm.retrieval.overlap``), a leak of
  the evaluated text into the corpus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ralm.eval.ppl.records import WindowRecord, WindowScores
from ralm.eval.ppl.windows import retrieving_windows, window_documents
from ralm.passage_rules import BM25, NO_RETRIEVAL, ORACLE
from ralm.retrieval.overlap import COPY_TOKENS
from ralm.statistics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    block_labels,
    block_length,
    format_change,
    paired_bootstrap,
)

BOOTSTRAPS = ("blocks", "windows")
LENGTH_FROM = "per-window NLL difference BM25 top-1 - no retrieval"


@dataclass(frozen=True)
class TableBlocks:
    """How one table's windows are resampled: the block of each window (None: each window alone)."""

    method: str
    labels: list[int] | None
    block_length: int
    blocks: int
    documents: int

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "block_length": self.block_length,
            "blocks": self.blocks,
            "documents": self.documents,
            "length_from": LENGTH_FROM if self.method == "blocks" else None,
        }


def table_blocks(
    table: Sequence[WindowScores], document_starts: Sequence[int] = (0,), method: str = "blocks"
) -> TableBlocks:
    """ONE resampling plan per table: blocks of `block_length` consecutive windows (from the BM25 − no
    retrieval difference), cut at every document start (`document_starts`: tokens), or single windows."""
    if method not in BOOTSTRAPS:
        raise ValueError(f"bootstrap {method!r}: expected one of {', '.join(BOOTSTRAPS)}")
    documents = window_documents([r.target_start for r in table], document_starts)
    count = len(set(documents))
    if method == "windows":
        return TableBlocks(method, None, 1, len(table), count)
    base = baseline_nlls(table)
    length = block_length(np.subtract(base[BM25], base[NO_RETRIEVAL]))
    labels = block_labels(documents, length)
    return TableBlocks(method, labels, length, len(set(labels)), count)


def baseline_nlls(table: Sequence[WindowScores]) -> dict[str, list[float]]:
    """Per-window NLL of no retrieval, BM25 top-1 and the oracle (best of k), from the table rows."""
    none = [r.no_passage_nll for r in table]
    bm25 = [r.candidates[0].nll if r.candidates else r.no_passage_nll for r in table]
    oracle = [min(c.nll for c in r.candidates) if r.candidates else r.no_passage_nll for r in table]
    return {NO_RETRIEVAL: none, BM25: bm25, ORACLE: oracle}


def condition_statistics(
    table: Sequence[WindowScores],
    rows: Sequence[WindowRecord],
    *,
    blocks: Sequence[int] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict:
    """The statistics of one condition's window rows (in table order) against both baselines; `blocks`:
    the table's block of each window (``table_blocks``), None for the per-window bootstrap."""
    base = baseline_nlls(table)
    n = [r.num_targets for r in table]
    nll = [r.nll for r in rows]
    retrieving = retrieving_windows(r.candidates for r in table)
    with_passage = [r for r in rows if r.passage_id is not None]
    copies = sum(1 for r in with_passage if r.copies_target)
    gap = math.fsum(base[BM25]) - math.fsum(base[ORACLE])
    gained = math.fsum(base[BM25]) - math.fsum(nll)
    options = {"blocks": blocks, "resamples": resamples, "seed": seed}
    return {
        "vs_bm25": paired_bootstrap(nll, base[BM25], n, **options).as_dict(),
        "vs_no_retrieval": paired_bootstrap(nll, base[NO_RETRIEVAL], n, **options).as_dict(),
        "share_of_oracle_gap": gained / gap if gap > 0 else None,
        "windows": len(rows),
        "retrieving_windows": len(retrieving),
        "windows_with_passage": len(with_passage),
        "copy_windows": copies,
        "copy_rate": copies / len(retrieving) if retrieving else 0.0,
        "copy_tokens": COPY_TOKENS,
    }


@dataclass(frozen=True)
class TableRow:
    """One condition's line of a comparison table."""

    label: str
    token_ppl: float
    comparison: dict
    """The condition's ``condition_statistics`` (``results.json``'s ``comparison``)."""


def format_compare_table(rows: list[TableRow], bootstrap: dict | None = None) -> str:
    """One line per condition: token perplexity, the changes against BM25 and no retrieval with their 95%
    intervals, the share of retrieving windows given a passage, the copy rate; and a footer that says how
    the intervals were resampled (`bootstrap`: ``TableBlocks.as_dict()``)."""
    width = max([len(row.label) for row in rows] + [9])
    lines = [
        f"{'condition':<{width}}  {'token ppl':>9}  {'vs BM25 [95% CI]':>25}  "
        f"{'vs no retrieval [95% CI]':>25}  {'passage':>7}  {'copies':>6}"
    ]
    for row in rows:
        stats = row.comparison
        rate = stats["windows_with_passage"] / max(stats["retrieving_windows"], 1)
        lines.append(
            f"{row.label:<{width}}  {row.token_ppl:>9.3f}  {format_change(stats['vs_bm25']):>25}  "
            f"{format_change(stats['vs_no_retrieval']):>25}  {rate:>7.0%}  {stats['copy_rate']:>6.1%}"
        )
    if rows:
        stats = rows[0].comparison
        lines.append(
            f"{stats['windows']} windows, {stats['retrieving_windows']} retrieving "
            "(their query found a passage; the others are scored with no passage in every condition); "
            f"CIs: {_resampling(stats, bootstrap)}, {stats['vs_bm25']['resamples']} resamples, "
            f"seed {stats['vs_bm25']['seed']}; 'tie': the interval holds 0. "
            "passage: share of retrieving windows given a passage; copies: share whose passage holds "
            f"{stats['copy_tokens']} consecutive target tokens (a leak)."
        )
    return "\n".join(lines)


def _resampling(stats: dict, bootstrap: dict | None) -> str:
    change = stats["vs_bm25"]
    if change.get("method", "windows") == "windows":
        return f"paired bootstrap over single windows ({change['windows']}, taken as independent)"
    length = f"block length {bootstrap['block_length']} windows, " if bootstrap else ""
    documents = ""
    if bootstrap and bootstrap["documents"] > 1:
        documents = f", none across two of the {bootstrap['documents']} documents"
    return (
        f"paired block bootstrap ({length}{change['blocks']} blocks of consecutive windows{documents}; "
        "length from the BM25 - no retrieval difference)"
    )
