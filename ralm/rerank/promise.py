"""The export decision: which rule ``ralm train`` exports, tested against the promise the README makes.

The promise: the exported rule is **not worse than no retrieval by more than a margin δ** in token
perplexity (``--margin``, default 1%). Each candidate rule is tested for it alone (non-inferiority: the
one-sided 95% lower bound of its mean log-prob difference with no retrieval, a paired block bootstrap
with the prefixes of one document drawn together, must be above ``-s log(1 + δ)`` nats per target of s
tokens);
among the rules that pass, the best on the decision prefixes (the highest mean log-prob per prefix) is
exported; an exact tie goes to the more learned rule. Every pair's paired 95% interval is recorded beside
it (a difference inside it is a tie in the report's words, but not a reason to export the worse mean). The
rules, simplest first
(``CHOICES``):

- ``no-retrieval``: never prepend a passage (the reference: it keeps the promise by definition);
- ``bm25``: BM25's top-1 always;
- ``bm25-above``: BM25's top-1 when its score is at least T, T fitted on the training prefixes only
  (``ralm.rerank.selection.bm25_threshold``), else nothing (not a rule of its own when no T gains on the
  training prefixes: it is then no retrieval);
- ``zero-shot``: the candidate under which the frozen LM finds the prefix's own last tokens y' most likely
  (the paper's zero-shot reranking, §6.1, with the labelling LM: no parameter fitted, no abstention);
  available when the data records y' (``ralm-rerank-data/2``);
- ``trained``: the checkpoint selection chose.

Why the best mean and not "the most learned rule no other beats": every candidate has already passed the
promise on its own, so the choice among them is an estimate of which is best, and the mean is the
unbiased one (the decision prefixes fitted none of them). The former rule handed an interval-tie to the
more learned rule; on the Gemma quick demo's 25 decision prefixes it exported a reranker 3.9 nats per
target *below* BM25 (interval [-9.5, +0.05]), the opposite of "export the best". An exact tie (a threshold
rule that retrieves on no decision prefix equals no retrieval there) still goes to the more learned rule,
whose value lies on text whose BM25 scores reach T. A learned rule that fails the promise falls back to
the best simpler rule that keeps it, not to no retrieval by default.

Without ``--abstain`` the rows hold no no-retrieval log-prob: the reference is then BM25's top-1 (the
promise reads "not worse than BM25 by more than δ") and the rules are ``bm25`` and ``trained``.

Pure functions: no model, no files; ``ralm.rerank.decision`` gathers the values.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ralm.passage_rules import EXPORTABLE, NO_RETRIEVAL
from ralm.statistics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    MIN_BLOCKS,
    dependent_blocks,
    paired_mean_difference,
)

CHOICES = EXPORTABLE
"""Simplest first; an exact tie between two rules that keep the promise goes to the later one."""
DEFAULT_MARGIN = 0.01
"""δ: the most the exported rule may raise token perplexity over the reference (1%)."""
PROMISE_LEVEL = 0.95
"""The one-sided level of the non-inferiority bound."""
RANK_LEVEL = 0.95
"""The two-sided level of the comparisons that rank the rules that keep the promise."""
POWER = 0.8
"""The power at which detectable differences and the prefixes needed are stated."""
RULE_SENTENCE = (
    "export the rule that keeps the promise (its one-sided 95% block-bootstrap bound is no worse than no "
    "retrieval by more than the margin, 1% token perplexity by default) and is best on the decision "
    "prefixes (the highest mean log-prob; an exact tie goes to the more learned rule: trained, then "
    "zero-shot LM reranking, then BM25 above T, then BM25, then no retrieval)"
)
"""The rule in one sentence: ``ralm train --help``, summary.json and the README say it."""


def margin_nats(margin: float, target_tokens: int | None) -> float:
    """δ in token perplexity as nats per target of `target_tokens` tokens: a rule whose mean log-prob
    per target is lower than the reference's by m raises token perplexity by exp(m / tokens) - 1, so the
    bound is tokens x log(1 + δ) (per prefix when the target length is unknown)."""
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin {margin} must be in [0, 1) (a share of token perplexity)")
    return math.log1p(margin) * (target_tokens or 1)


def decision_blocks(differences: np.ndarray, documents: Sequence[Hashable] | None) -> tuple[list | None, str]:
    """Block labels for the decision's bootstrap, and what they follow: whole ``documents`` (a cluster
    bootstrap) when there are at least ``MIN_BLOCKS``; with fewer, runs of neighbouring prefixes within a
    document, their length sized from the differences (``dependent_blocks``); ``items`` without documents.

    Whole documents, not data-sized runs, because prefixes sampled from one document share its topic and
    how much retrieval helps there, more than they depend on their neighbours: in a simulation of a
    skill-less reranker with a per-document effect (20 documents of 5 prefixes, the document effect a
    fifth of the variance) the one-sided false-export rate was 3.7% with documents as blocks, 7.5% with
    data-sized runs (their length estimated at 1 from 100 prefixes) and 8.0% per prefix (nominal 2.5%)."""
    if documents is None:
        return None, "items"
    if len(set(documents)) >= MIN_BLOCKS:
        return list(documents), "documents"
    return dependent_blocks(differences, documents), "neighbours"


def detectable_difference(low: float, high: float, level: float = 0.95, power: float = POWER) -> float:
    """The smallest true mean difference a two-sided comparison detects with probability `power`:
    (z_{1-α/2} + z_power) x SE, 2.80 x SE for 80% power at a two-sided 5% level, with SE = (high - low) /
    (2 z_{1-α/2}) read off the bootstrap interval [low, high] (its width in standard errors under a
    normal sampling distribution)."""
    z_level = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)
    if not (math.isfinite(low) and math.isfinite(high)):
        return math.nan
    return (z_level + NormalDist().inv_cdf(power)) * (high - low) / (2.0 * z_level)


@dataclass(frozen=True)
class PairedSample:
    """A rule's log-prob per prefix beside the reference's on the same prefixes, with their documents."""

    rule: Sequence[float]
    reference: Sequence[float]
    documents: Sequence[Hashable] | None = None
    source: str = "decision prefixes"
    """Which prefixes: a rule fitted on none of data-gen's prefixes may be tested on all of them."""


@dataclass(frozen=True)
class Outcome:
    """The exported rule and everything that decided it (summary.json's ``decision_evidence``)."""

    choice: str
    reference: str
    margin: float
    margin_nats: float
    promise: dict[str, dict] = field(default_factory=dict)
    """Per rule other than the reference: its non-inferiority test."""
    comparisons: dict[str, dict] = field(default_factory=dict)
    """``"A - B"`` (A the more learned) for each pair of available rules, two-sided; those between rules
    that keep the promise rank them."""


def promise_test(sample: PairedSample, allowed: float, *, resamples: int, seed: int) -> dict:
    """Non-inferiority of a rule to the reference: passes when the one-sided ``PROMISE_LEVEL`` lower bound
    of mean(rule - reference) is above ``-allowed``. Also stated: the smallest true difference at which
    the test passes with ``POWER`` (``detectable``: -margin + (z_0.95 + z_0.8) SE) and the prefixes it would
    need to pass a rule exactly as good as the reference with that power (``prefixes_for_power``)."""
    a, b = np.asarray(sample.rule, np.float64), np.asarray(sample.reference, np.float64)
    blocks, blocked_by = decision_blocks(a - b, sample.documents)
    two_sided = 1.0 - 2.0 * (1.0 - PROMISE_LEVEL)  # its lower end is the one-sided bound
    diff = paired_mean_difference(a, b, blocks=blocks, resamples=resamples, seed=seed, level=two_sided)
    z = NormalDist().inv_cdf(PROMISE_LEVEL)
    se = (diff.high - diff.low) / (2.0 * z) if math.isfinite(diff.low) else math.nan
    z_power = z + NormalDist().inv_cdf(POWER)
    needed = math.ceil(diff.items * (z_power * se / allowed) ** 2) if allowed > 0 and se > 0 else None
    return {
        "difference": diff.difference,
        "bound": diff.low,
        "margin": -allowed,
        "passes": bool(diff.low > -allowed),
        "level": PROMISE_LEVEL,
        "items": diff.items,
        "blocks": diff.blocks,
        "blocked_by": blocked_by,
        "prefixes": sample.source,
        "detectable": -allowed + z_power * se,
        "prefixes_for_power": needed,
        "resamples": resamples,
        "seed": seed,
    }


def export_decision(
    values: dict[str, Sequence[float] | None],
    *,
    documents: Sequence[Hashable] | None = None,
    margin: float = DEFAULT_MARGIN,
    target_tokens: int | None = None,
    promise_samples: dict[str, PairedSample] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Outcome:
    """The rule to export (the module docstring's rule) and its evidence.

    `values` maps names of ``CHOICES`` to per-prefix log-probs on the same decision prefixes (None: not
    available), ordered by (document, position); `documents` gives each prefix's document (the bootstrap
    draws one document's prefixes together). `promise_samples` replaces a rule's promise test sample
    (BM25 or zero-shot against no retrieval may use every data-gen prefix: none is fitted on any). The
    reference is ``no-retrieval`` when available, else ``bm25``. `margin` is δ as a share of token perplexity,
    `target_tokens` the tokens of one prefix's target (``margin_nats``).
    """
    bound = margin_nats(margin, target_tokens)
    available = [name for name in CHOICES if values.get(name) is not None]
    if not available:
        raise ValueError("no rule to decide between")
    reference = NO_RETRIEVAL if NO_RETRIEVAL in available else available[0]
    promise: dict[str, dict] = {}
    keeping = [reference]
    for name in available[available.index(reference) + 1 :]:
        sample = (promise_samples or {}).get(name) or PairedSample(values[name], values[reference], documents)
        promise[name] = promise_test(sample, bound, resamples=resamples, seed=seed)
        if promise[name]["passes"]:
            keeping.append(name)
    comparisons: dict[str, dict] = {}
    for i, simpler in enumerate(available):
        for learned in available[i + 1 :]:
            a, b = np.asarray(values[learned], np.float64), np.asarray(values[simpler], np.float64)
            blocks, blocked_by = decision_blocks(a - b, documents)
            diff = paired_mean_difference(
                a, b, blocks=blocks, resamples=resamples, seed=seed, level=RANK_LEVEL
            )
            comparisons[f"{learned} - {simpler}"] = {
                **diff.as_dict(),
                "worse": bool(diff.high < 0.0),
                "blocked_by": blocked_by,
                "detectable_difference": detectable_difference(diff.low, diff.high, diff.level),
            }
    choice = _best(keeping, values)
    return Outcome(choice, reference, margin, bound, promise, comparisons)


def _best(keeping: list[str], values: dict[str, Sequence[float] | None]) -> str:
    """The rule of `keeping` (simplest first) with the highest mean; an exact tie goes to the more learned.
    A rule whose mean is NaN is not ranked; the reference stays when no mean is a number."""
    means = [float(np.mean(np.asarray(values[rule], np.float64))) for rule in keeping]
    ranked = [(m, i) for i, m in enumerate(means) if not math.isnan(m)]
    return keeping[max(ranked)[1]] if ranked else keeping[0]
