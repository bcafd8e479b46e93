"""What each eval set of a run says, in numbers and in words: the retrieving windows' comparisons and the
verdicts.

An eval set's first window scores its first ``max_length`` tokens with no passage in every condition; the
conditions differ only in the windows after it (the *retrieving windows*). Their comparisons are computed
here on those windows alone, from each condition's ``windows.jsonl``: the relative change of token
perplexity with a paired block-bootstrap 95% interval (blocks of consecutive windows sized from the data,
``ralm.statistics.dependent_blocks``, one block length per set so every row is comparable).

The verdicts are the questions the two test sets ask, each answered with its interval:
- *related* (the corpus retells the text): does BM25 help, and does the trained reranker beat BM25 and no
  retrieval?
- *unrelated* (it does not): does the trained reranker stay within +1% of no retrieval (the interval's upper
  end below +1%)?
Each trained reranker is also compared with the threshold rule "BM25's top-1 when its score is at least T"
(``bm25-above``), which a learned reranker must not lose to, and each seed's export with no LM at rerank
time with the LM's zero-shot rerank, whose frozen-LM inputs it saves. Which conditions the others are
compared with, and which are judged, is declared in the condition registry (``ralm.eval.ppl.registry``:
``verdict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ralm.eval.ppl.records import WindowRecord
from ralm.eval.ppl.registry import KINDS, references
from ralm.passage_rules import BM25, CONTEXT_MATCHED, NO_RETRIEVAL, ZERO_SHOT
from ralm.pipeline.labels import is_seed_export, no_lm_seed, seed_label, trained_seed
from ralm.statistics import dependent_blocks, format_change, paired_bootstrap

UNRELATED_LIMIT = 0.01
"""On unrelated text the trained reranker's change against no retrieval must have its upper end below this."""
PROMISE_SETS = ("unrelated", "foreign")
"""The demo's sets the corpus does not inform, where a seed's verdict is the promise (``UNRELATED_LIMIT``)
rather than beating BM25."""


def retrieving_comparisons(
    rows: Mapping[str, Sequence[WindowRecord]], first_target: int, *, resamples: int = 2000, seed: int = 0
) -> dict[str, dict]:
    """Per condition, on the windows whose targets start at `first_target` or later: token perplexity and
    its change against no retrieval, BM25's top-1 and (when compared) the context-matched row."""
    kept = {name: [r for r in rs if r.target_start >= first_target] for name, rs in rows.items()}
    none = kept[NO_RETRIEVAL]
    # Rows from other runs (the pipeline's forward-looking rows) pair window by window: the same windows.
    windows = [(r.target_start, r.num_targets) for r in none]
    for name, rs in kept.items():
        if [(r.target_start, r.num_targets) for r in rs] != windows:
            raise ValueError(f"{name}: its windows are not the no-retrieval row's, so they cannot be paired")
    n = [r.num_targets for r in none]
    nll = {name: [r.nll for r in rs] for name, rs in kept.items()}
    if not n:
        return {}
    # One block length for the set, from the dependence of BM25's per-window effect.
    blocks = dependent_blocks(np.subtract(nll[BM25], nll[NO_RETRIEVAL]))
    baselines = {kind.reference.key: kind.name for kind in references()}
    out = {}
    for name, values in nll.items():
        entry = {
            "windows": len(values),
            "scored_tokens": sum(n),
            "token_ppl": float(np.exp(sum(values) / sum(n))),
        }
        # A no-LM export is also compared with the LM's own rerank, the rule it does without.
        extra = {"vs_zero_shot": ZERO_SHOT} if no_lm_seed(name) is not None else {}
        for key, base in {**baselines, **extra}.items():
            if base in nll:
                change = paired_bootstrap(values, nll[base], n, blocks=blocks, resamples=resamples, seed=seed)
                entry[key] = change.as_dict()
        out[name] = entry
    return out


def is_below(change: dict | None, limit: float = 0.0) -> bool:
    """The whole 95% interval is below `limit` (a significant decrease when `limit` is 0)."""
    return bool(change) and change["high"] < limit


def _words(change: dict) -> str:
    """The change with its interval and what it means: ``-12.5% [-20.8, -4.8], lower``."""
    side = "lower" if change["high"] < 0 else "higher" if change["low"] > 0 else "a tie"
    return f"{format_change(change).removesuffix(' tie')}, {side}"


def verdicts(
    set_name: str, comparisons: Mapping[str, dict], exports: Mapping[str, str] | None = None
) -> list[str]:
    """The set's verdict lines: each claim with its change in token perplexity and 95% interval. A seed is
    named by what its row plays (`exports`: condition name -> export decision; ``seed_label``)."""
    if not comparisons:
        return [f"{set_name}: no retrieving windows (the text is shorter than one window and a stride)"]
    lines = [f"BM25 top-1 vs no retrieval: {_words(comparisons[BM25]['vs_no_retrieval'])}"]
    if "vs_matched" in comparisons[BM25]:
        lines.append(
            f"BM25's passage vs the same window cut by its length (what its content adds): "
            f"{_words(comparisons[BM25]['vs_matched'])}; the cut alone vs the full window: "
            f"{_words(comparisons[CONTEXT_MATCHED]['vs_no_retrieval'])}"
        )
    # Rows beside the table (``ralm.pipeline.plan.FORWARD_ROWS``): BM25 with another passage or query.
    for name, c in comparisons.items():
        if name not in KINDS and not is_seed_export(name):
            lines.append(f"{name} vs BM25's top-1: {_words(c['vs_bm25'])}")
    for name, c in comparisons.items():
        if not is_seed_export(name):
            continue
        no_lm = no_lm_seed(name)
        seed = no_lm if no_lm is not None else trained_seed(name)
        who = seed_label(str(seed), (exports or {}).get(name), no_lm=no_lm is not None)
        if set_name in PROMISE_SETS:
            ok = is_below(c["vs_no_retrieval"], UNRELATED_LIMIT)
            lines.append(
                f"{who} vs no retrieval: {_words(c['vs_no_retrieval'])}; "
                f"{'within' if ok else 'NOT within'} +1% (the goal: the upper end below +1%)"
            )
        else:
            both = is_below(c["vs_bm25"]) and is_below(c["vs_no_retrieval"])
            lines.append(
                f"{who} vs BM25: {_words(c['vs_bm25'])}; vs no retrieval: "
                f"{_words(c['vs_no_retrieval'])}; {'beats both' if both else 'does NOT beat both'}"
            )
        if "vs_threshold" in c:
            lines.append(f"{who} vs the threshold rule: {_words(c['vs_threshold'])}")
        if "vs_zero_shot" in c:
            lines.append(
                f"{who} vs the zero-shot LM rerank, which it does without: {_words(c['vs_zero_shot'])}"
            )
    return lines
