"""What ``ralm eval ppl`` prints when it is done: one summary per point, or the --compare table (what the
conditions share once, then one row each), and what it returns (a sweep's report, ``ralm.eval.ppl.sweep``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ralm.eval.ppl.sweep import Sweep, report_sweep

if TYPE_CHECKING:
    from ralm.eval.ppl.records import PointResults
    from ralm.eval.ppl.run import PointResult


def report_points(
    summaries: list[PointResult], plan: Sweep | None, out: Path, *, compared: bool, print_table: bool
) -> dict:
    """Each point's summary printed; returns the one point's results.json object (its conditions' with
    --compare), or the sweep's report over all points."""
    if compared and plan is None:
        return report_compare(summaries[0].results, out, print_table)
    for point in summaries:
        if compared:
            report_compare(point.results, point.folder, print_table)
        else:
            print_summary(point.results, point.folder)
    if plan is None:
        return summaries[0].results.to_json()
    return report_sweep(plan, summaries, out, compared=compared)


def report_compare(compared: dict[str, PointResults], out: Path, print_table: bool = True) -> dict:
    """What the conditions share (windows, tokens, one scoring pass) once, then one table row each; returns
    each condition's results.json object."""
    from ralm.eval.ppl.compare_stats import TableRow, format_compare_table

    first = next(iter(compared.values()))
    cfg, c, t = first.config, first.counts, first.timings
    rerank = [
        f"{name} {r.timings['rerank_s']:.1f}s"
        for name, r in compared.items()
        if r.timings.get("rerank_s", 0) >= 0.05
    ]
    print(
        f"ralm eval ppl --compare: {len(compared)} conditions on the same {c.windows} windows "
        f"(s={cfg['stride']}, ℓ={cfg['query_tokens']}, max_length={cfg['max_length']}), "
        f"{first.metrics.scored_tokens} scored tokens, {c.words} words\n"
        f"  one scoring pass for every condition {t['scoring_s']:.1f}s "
        f"({(t['tokens_per_s'] or 0):.1f} tok/s), "
        f"retrieval {t['retrieval_s']:.1f}s" + (f", reranking: {', '.join(rerank)}" if rerank else "")
    )
    if print_table:
        rows = [TableRow(n, r.metrics.token_ppl, r.comparison) for n, r in compared.items()]
        print(format_compare_table(rows, bootstrap=rows[0].comparison["bootstrap"] if rows else None))
    print(
        f"compare: {out / 'compare.json'}, {out}/<condition>/results.json (table: {out / 'candidates.jsonl'})"
    )
    return {name: r.to_json() for name, r in compared.items()}


def print_summary(results: PointResults, out_dir: Path) -> None:
    m, c, t, cfg = results.metrics, results.counts, results.timings, results.config
    lines = [
        f"ralm eval ppl: {cfg['mode']} (s={cfg['stride']}, ℓ={cfg['query_tokens']}, "
        f"max_length={cfg['max_length']})",
        f"  token perplexity {m.token_ppl:.4f} over {m.scored_tokens} scored tokens",
        f"  word perplexity  {m.word_ppl:.4f} over {c.words} words"
        f" (eval_lm.py divisors: {m.word_ppl_eval_lm or float('nan'):.4f} words, "
        f"{m.token_ppl_eval_lm:.4f} tokens)",
        f"  windows {c.windows}, {c.retrieving_windows} retrieving (the query found a passage); given a"
        f" passage {c.windows_with_passage} of {c.retrieving_windows} retrieving windows"
        f" (rate {m.retrieval_rate:.3f})",
        f"  scoring {t['scoring_s']:.1f}s ({(t['tokens_per_s'] or 0):.1f} tok/s), "
        f"retrieval {t['retrieval_s']:.1f}s",
        f"  -> {out_dir / 'results.json'}",
    ]
    print("\n".join(lines))
