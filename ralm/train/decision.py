"""The export decision: which rule ``ralm train`` exports, tested against the promise the README makes, and
its inputs.

The promise: the exported rule is **not worse than no retrieval by more than a margin δ** in token
perplexity (``--margin``, default 1%). Each candidate rule is tested for it alone (non-inferiority: the
one-sided 95% lower bound of its mean log-prob difference with no retrieval, a paired block bootstrap
with the prefixes of one document drawn together, must be above ``-s log(1 + δ)`` nats per target of s
tokens); among the rules that pass, the best on the decision prefixes (the highest mean log-prob per prefix)
is exported; an exact tie goes to the more learned rule. Every pair's paired 95% interval is recorded
beside it (a difference inside it is a tie in the report's words, but not a reason to export the worse
mean). The rules, simplest first (``CHOICES``, ``ralm.passage_rules.EXPORTABLE``):

- ``no-retrieval``: never prepend a passage (the reference: it keeps the promise by definition);
- ``bm25``: BM25's top-1 always;
- ``bm25-above``: BM25's top-1 when its score is at least T, T fitted on the training prefixes only
  (``ralm.train.selection.bm25_threshold``, a bagged fit), else nothing (not a rule of its own when no T
  gains on the training prefixes: it is then no retrieval);
- ``zero-shot``: the candidate under which the frozen LM finds the prefix's own last tokens y' most likely
  (the paper's zero-shot reranking, §6.1, with the labelling LM: no parameter fitted, no abstention);
  available when the data records y' (``ralm-rerank-data/2``);
- ``zero-shot-above``: that candidate when it raises the log-prob of y' over no passage by at least M nats, M
  fitted on the training and selection prefixes (``bagged_threshold``), else nothing: the LM's own evidence
  that the passage informs the text decides whether to retrieve (with ``--abstain``, which scores y' with no
  passage). M may read the selection prefixes because no model carries it: T is the trained reranker's
  start, which selection judges against its later steps, so T is fitted on training prefixes alone;
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

**Its inputs**, scored once, at the end of training, for the selected checkpoint. Checkpoint selection saw the
selection prefixes at every validation (and, with ``--bm25-prior``, the step-0 model, which is the threshold
rule with ``--abstain``: ``ralm.train.scalar_init``) and chose the best on them; the decision prefixes come
from other documents (``ralm.train.dataset``) and are scored here, once, for that one model. No LM runs: each
data-gen row holds the LM log-prob of its target given every candidate and given no passage, so the decision
costs the reranker's encoder passes over each prefix's k (+1) pairs. ``decide_export`` gathers the rule's
inputs (the threshold rule's T fitted on the training prefixes, the zero-shot rule's M on the training and
selection ones; BM25 and the zero-shot rule against no retrieval on every data-gen prefix, since none is
fitted on any) and records what decided it (``evidence``).

The rule's functions (``margin_nats`` to ``export_decision``) are pure: no model, no files.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import numpy as np
import torch

from ralm.passage_rules import (
    BM25,
    BM25_ABOVE,
    EXPORTABLE,
    NO_RETRIEVAL,
    RULES,
    TRAINED,
    ZERO_SHOT,
    ZERO_SHOT_ABOVE,
    Cost,
)
from ralm.rerank.checkpoints import read_checkpoint
from ralm.rerank.model import load_tokenizer
from ralm.statistics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    MIN_BLOCKS,
    dependent_blocks,
    paired_mean_difference,
)
from ralm.train.batch import GroupCollator
from ralm.train.dataset import RerankData
from ralm.train.lit_module import RerankerModule
from ralm.train.metrics import gain_recovered, per_prefix_logprobs
from ralm.train.scalar_init import rank_gain_columns, read_rule_columns, zero_shot_picks

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
    "zero-shot LM reranking above M, then zero-shot LM reranking, then BM25 above T, then BM25, then no "
    "retrieval)"
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


@dataclass(frozen=True)
class Selected:
    """What checkpoint selection chose on the selection prefixes (``checkpoint`` None: nothing validated)."""

    checkpoint: str | None
    step: int | None
    """Its step, as the validation history finds it (the checkpoint's own step is used when it has one)."""
    gain_recovered: float | None
    validations: int
    """Validation steps the best was chosen among."""


@dataclass(frozen=True)
class Decision:
    choice: str
    """``trained``, ``zero-shot``, ``bm25-above``, ``bm25`` or ``no-retrieval``
    (``ralm.train.decision.CHOICES``)."""
    exported: str | None
    """The checkpoint whose weights the export holds; None: no weights (a no-retrieval decision without
    a step-0 model: the trained weights lost and must not look like a reranker)."""
    gain_recovered: float | None
    """Of what is exported, on the selection prefixes: the selected step's for ``trained``, 0 for ``bm25``
    (BM25 itself), None for the other rules (not validated as a reranker)."""
    evidence: dict
    threshold: float | None = None
    """The exported rule's threshold: T of ``bm25-above`` (fitted on the training prefixes) or M of
    ``zero-shot-above`` (on the training and selection prefixes); None for the other rules."""
    no_lm: Decision | None = None
    """The same decision among the rules that read no frozen-LM input at rerank time (``--no-lm-export``);
    None when not asked for."""


def load_selected(
    checkpoint: str, hparams: dict, device: torch.device | str = "cpu"
) -> tuple[RerankerModule, int | None]:
    """The module of a training checkpoint (file or DeepSpeed folder), in eval mode on `device`, and the
    optimizer step it was saved at (the step selection chose: equal scores make the history ambiguous)."""
    saved = read_checkpoint(checkpoint)
    hp = {**hparams, **saved.get("hyper_parameters", {})}
    accepted = inspect.signature(RerankerModule.__init__).parameters
    module = RerankerModule(**{k: v for k, v in hp.items() if k in accepted})
    module.on_load_checkpoint(saved)  # reshapes scalars saved 0-dim by older versions
    module.load_state_dict(saved["state_dict"])
    step = saved.get("global_step")
    return module.to(device).eval(), int(step) if step is not None else None


@dataclass(frozen=True)
class DecisionLogprobs:
    """Per decision prefix (``RerankData.decision_rows`` order), the LM log-prob of the target given each
    rule's choice."""

    trained: np.ndarray | None
    """The module's pick; None without a module (nothing validated)."""
    bm25: np.ndarray
    """BM25's top-1 (candidate 0)."""
    no_retrieval: np.ndarray
    """No passage; NaN without ``--abstain`` (the rows then hold no such log-prob)."""
    oracle: np.ndarray
    """The best candidate (of k, or none with ``--abstain``)."""
    above: np.ndarray | None = None
    """The threshold rule (BM25's top-1 when its score is at least T, else no passage); None without
    ``--abstain``."""
    zero_shot: np.ndarray | None = None
    """The zero-shot rule (the candidate whose y' log-prob is highest); None when the data lacks y'."""
    zero_shot_above: np.ndarray | None = None
    """The zero-shot rule when its y' gain over no passage is at least M, else no passage; None without
    ``--abstain`` or y'."""

    def rules(self, abstain: bool) -> dict[str, np.ndarray | None]:
        """``export_decision``'s values: each of ``CHOICES`` and its log-probs, None where unavailable."""
        return {
            TRAINED: self.trained,
            ZERO_SHOT_ABOVE: self.zero_shot_above if abstain else None,
            BM25_ABOVE: self.above if abstain else None,
            ZERO_SHOT: self.zero_shot,
            BM25: self.bm25,
            NO_RETRIEVAL: self.no_retrieval if abstain else None,
        }


@torch.inference_mode()
def score_decision_prefixes(
    data: RerankData,
    module: RerankerModule | None,
    *,
    batch_size: int,
    device: torch.device | str = "cpu",
    rows: list[int] | None = None,
) -> DecisionLogprobs:
    """What each rule's choice gives on `rows` (the decision prefixes by default; ``trained`` None without a
    module; ``above`` is left to the caller, who knows T)."""
    rows = data.decision_rows if rows is None else rows
    groups = data.groups(rows)
    collate = None
    if module is not None:
        hp = module.hparams
        collate = GroupCollator(
            load_tokenizer(hp.encoder_name), max_length=hp.max_length, max_prefix_tokens=hp.max_prefix_tokens
        )
    trained, bm25, none, oracle = [], [], [], []
    for start in range(0, len(groups), batch_size):
        items = [groups[i] for i in range(start, min(start + batch_size, len(groups)))]
        for g in items:
            bm25.append(g.lm_logprobs[0])  # candidate 0 is BM25's top-1 (the empty passage comes last)
            none.append(g.lm_logprobs[-1] if data.abstain else float("nan"))
            oracle.append(max(g.lm_logprobs))
        if collate is not None:
            batch = collate(items).to(device)
            rows = per_prefix_logprobs(module(batch), batch.lm_logprobs, batch.mask, batch.is_empty)
            trained += rows[:, 0].cpu().tolist()
    return DecisionLogprobs(
        trained=_float64(trained) if module is not None else None,
        bm25=_float64(bm25),
        no_retrieval=_float64(none),
        oracle=_float64(oracle),
    )


def _float64(values: list[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def step0_selection(
    data: RerankData, step0: str, hparams: dict, *, batch_size: int, device: torch.device | str = "cpu"
) -> float | None:
    """Gain recovered of the step-0 model on the selection prefixes, as validation computes it (the mean
    log-probs of its picks, BM25's top-1 and the oracle): step 0 competes in checkpoint selection."""
    if not data.val_rows:
        return None
    module, _ = load_selected(step0, hparams, device)
    values = score_decision_prefixes(data, module, batch_size=batch_size, device=device, rows=data.val_rows)
    gain = gain_recovered(*(float(v.mean()) for v in (values.trained, values.bm25, values.oracle)))
    return gain if math.isfinite(gain) else 0.0  # as validation logs it (RerankerModule): BM25 is the oracle


def decide_export(
    data: RerankData,
    selected: Selected,
    hparams: dict,
    *,
    step0: str | None,
    seed: int,
    batch_size: int,
    device: torch.device | str = "cpu",
    margin: float = DEFAULT_MARGIN,
    threshold: float | None = None,
    max_lm_inputs: int | None = None,
    no_lm_export: bool = False,
) -> Decision:
    """Score the decision prefixes for the selected checkpoint, decide, and say what the export holds.
    `threshold`: T fitted on the training prefixes (``ralm.train.fit``), needed with ``--abstain``;
    `max_lm_inputs`: the most frozen-LM inputs a rule may read per retrieval to be exported (None: any);
    `no_lm_export`: also decide among the rules that read no frozen LM at rerank time (``Decision.no_lm``),
    from the same scores: a second export for users who cannot afford the LM per retrieval."""
    started = time.perf_counter()
    print(
        f"export decision: scoring {len(data.decision_rows)} decision prefixes "
        f"({data.documents.get('decision')} documents) with "
        f"{os.path.basename(selected.checkpoint or 'no checkpoint')}",
        file=sys.stderr,
        flush=True,
    )
    module, step = None, selected.step
    if selected.checkpoint is not None:
        module, saved_step = load_selected(selected.checkpoint, hparams, device)
        step = saved_step if saved_step is not None else step
    scoring = time.perf_counter()
    values = score_decision_prefixes(data, module, batch_size=batch_size, device=device)
    scoring = time.perf_counter() - scoring
    values, promise_samples = _untrained_rules(data, values, threshold)
    values, rank_threshold = _rank_abstention(data, values)
    candidates = values.rules(data.abstain)
    # Selection kept the untrained model: "trained" is then the start, the threshold rule (BM25 without
    # --abstain) as a model, and that rule competes for it under its own name (no encoder at inference).
    start_won = step == 0 and step0 is not None and selected.checkpoint == step0
    if start_won:
        candidates[TRAINED] = None
    k = int(data.meta.get("k") or 0)
    pairs = len(data.decision_rows) * (k + int(data.abstain))
    encoder_ms = 1000.0 * scoring / pairs if module is not None and pairs else None
    scored = _Scored(
        data=data,
        selected=selected,
        step=step,
        step0=step0,
        start_won=start_won,
        values=values,
        candidates=candidates,
        promise_samples=promise_samples,
        threshold=threshold,
        rank_threshold=rank_threshold,
        encoder_ms=encoder_ms,
    )
    decision = _decide_within(scored, max_lm_inputs, seed=seed, margin=margin, started=started)
    if no_lm_export:
        no_lm = _decide_within(scored, 0, seed=seed, margin=margin, started=started)
        decision = replace(decision, no_lm=no_lm)
    return decision


@dataclass(frozen=True)
class _Scored:
    """What one scoring of the decision prefixes gives every budget's decision."""

    data: RerankData
    selected: Selected
    step: int | None
    step0: str | None
    start_won: bool
    values: DecisionLogprobs
    candidates: dict[str, np.ndarray | None]
    promise_samples: dict[str, PairedSample]
    threshold: float | None
    rank_threshold: float | None
    encoder_ms: float | None


def _decide_within(
    scored: _Scored, max_lm_inputs: int | None, *, seed: int, margin: float, started: float
) -> Decision:
    """The decision among `scored`'s rules that read at most `max_lm_inputs` frozen-LM inputs per retrieval
    (the others are left out, as unavailable ones are), with its evidence."""
    data, selected, k = scored.data, scored.selected, int(scored.data.meta.get("k") or 0)
    candidates = dict(scored.candidates)
    stacked = data.zero_shot_prior
    over_budget = [
        n
        for n, v in candidates.items()
        if v is not None and not within_budget(n, k, max_lm_inputs, stacked=stacked, abstain=data.abstain)
    ]
    candidates.update(dict.fromkeys(over_budget))
    outcome = export_decision(
        candidates,
        documents=data.decision_documents,
        margin=margin,
        target_tokens=data.meta.get("s"),
        promise_samples=scored.promise_samples,
        seed=seed,
    )
    threshold = scored.threshold
    finite = threshold if threshold is not None and math.isfinite(threshold) else None
    evidence = _evidence(
        data, selected, scored.step, scored.values, candidates, outcome, finite, scored.rank_threshold
    )
    evidence["decision"].update(
        trained_is_start=scored.start_won,
        seconds=round(time.perf_counter() - started, 2),
    )
    evidence["costs"] = {
        "per_retrieval": rule_costs(
            k, abstain=data.abstain, lm_ms=_lm_ms(data.meta), encoder_ms=scored.encoder_ms, stacked=stacked
        ),
        "max_lm_inputs": max_lm_inputs,
        "over_budget": over_budget,
        "measured": COSTS_MEASURED,
    }
    choice = outcome.choice
    exported = {TRAINED: selected.checkpoint, BM25: scored.step0 or selected.checkpoint}
    recovered = {TRAINED: selected.gain_recovered, BM25: 0.0}
    kept_threshold = {BM25_ABOVE: finite, ZERO_SHOT_ABOVE: scored.rank_threshold}.get(choice)
    # the other rules: the step-0 weights (or none); not validated as rerankers
    return Decision(
        choice, exported.get(choice, scored.step0), recovered.get(choice), evidence, kept_threshold
    )


def _untrained_rules(
    data: RerankData, values: DecisionLogprobs, threshold: float | None
) -> tuple[DecisionLogprobs, dict[str, PairedSample]]:
    """`values` with the threshold rule's and the zero-shot rule's log-probs on the decision prefixes, and
    the samples their promise tests use instead (BM25 and zero-shot against no retrieval on every data-gen
    prefix: neither is fitted on any)."""
    promise_samples = {}
    if data.abstain:
        if threshold is None:
            raise ValueError("an --abstain decision needs T fitted on the training prefixes (threshold=)")
        if math.isfinite(threshold):  # T infinite: no training prefix gains, the rule is no retrieval itself
            decision_columns = read_rule_columns(data.path, data.decision_rows)
            values = replace(values, above=decision_columns.above(threshold))
        promise_samples[BM25] = on_every_prefix(data, BM25)
    zero_shot = zero_shot_logprobs(data.path, data.decision_rows)
    if zero_shot is not None:
        values = replace(values, zero_shot=zero_shot)
        if data.abstain:
            promise_samples[ZERO_SHOT] = on_every_prefix(data, ZERO_SHOT)
    return values, promise_samples


def _rank_abstention(data: RerankData, values: DecisionLogprobs) -> tuple[DecisionLogprobs, float | None]:
    """`values` with ``zero-shot-above``'s log-probs on the decision prefixes, and its M fitted on the
    training and selection prefixes (None without ``--abstain`` or y', or when y' gains on none of them: the
    rule is then no retrieval itself and is left out)."""
    train = rank_gain_columns(data.path, data.train_rows + data.val_rows) if data.abstain else None
    threshold = train.fit() if train is not None else math.inf
    if not math.isfinite(threshold):
        return values, None
    decision = rank_gain_columns(data.path, data.decision_rows)
    return replace(values, zero_shot_above=decision.above(threshold)), threshold


def _evidence(
    data: RerankData,
    selected: Selected,
    step: int | None,
    values: DecisionLogprobs,
    candidates: dict[str, np.ndarray | None],
    outcome: Outcome,
    threshold: float | None,
    rank_threshold: float | None,
) -> dict:
    """What chose the checkpoint and what decided the export (``decision_evidence``, docs/formats.md §5)."""
    n = len(data.decision_rows)
    trained_gain = (
        gain_recovered(*(float(v.mean()) for v in (values.trained, values.bm25, values.oracle)))
        if values.trained is not None and n
        else float("nan")
    )
    return {
        "rule": RULE_SENTENCE,
        "selection": {
            "prefixes": len(data.val_rows),
            "documents": data.documents.get("selection"),
            "validations": selected.validations,
            "step": step,
            "checkpoint": os.path.basename(selected.checkpoint) if selected.checkpoint else None,
            "gain_recovered": selected.gain_recovered,
        },
        "decision": {
            "prefixes": n,
            "documents": data.documents.get("decision"),
            "mean_logprob": {
                k: _finite(float(v.mean())) if n else None for k, v in candidates.items() if v is not None
            },
            "trained_gain_recovered": _finite(trained_gain),
            "target_tokens": data.meta.get("s"),
            "level": 0.95,
            "power": POWER,
        },
        "promise": {
            "reference": outcome.reference,
            "margin": outcome.margin,
            "margin_nats": outcome.margin_nats,
            "threshold": threshold,
            "rank_threshold": rank_threshold,
            "tests": outcome.promise,
        },
        "overlap": data.overlap,
        "comparisons": outcome.comparisons,
    }


COSTS_MEASURED = (
    "ms per retrieval: frozen-LM inputs at data-gen's measured pairs per second, encoder pairs at the "
    "decision's measured scoring time, on the machines that ran them (an upper bound: both include reading "
    "the data)"
)
"""How ``rule_costs``' milliseconds were measured (summary.json's ``decision_evidence.costs``)."""


def rule_cost(rule: str, *, stacked: bool = False, abstain: bool = True) -> Cost:
    """`rule`'s cost per retrieval (``ralm.passage_rules``); a reranker trained with the zero-shot prior
    (`stacked`) reads the frozen LM as the zero-shot rule does (and, with `abstain`, the prefix alone) beside
    its encoder pairs."""
    cost = RULES[rule].cost
    if rule != TRAINED or not stacked:
        return cost
    lm = RULES[ZERO_SHOT_ABOVE if abstain else ZERO_SHOT].cost
    return replace(
        cost,
        lm_inputs_per_candidate=lm.lm_inputs_per_candidate,
        lm_inputs_per_retrieval=lm.lm_inputs_per_retrieval,
    )


def rule_costs(
    k: int, *, abstain: bool, lm_ms: float | None, encoder_ms: float | None, stacked: bool = False
) -> dict[str, dict]:
    """Per rule the decision may export, what one retrieval of `k` BM25 candidates costs beyond the search:
    frozen-LM inputs read to choose (``rule_cost``), encoder pairs scored (a trained reranker with `abstain`
    also scores the empty passage) and the milliseconds they take at `lm_ms` per LM input and `encoder_ms`
    per pair (None where a rate it needs is unknown)."""
    costs = {}
    for name in EXPORTABLE:
        cost = rule_cost(name, stacked=stacked, abstain=abstain)
        lm_inputs, pairs = cost.lm_inputs(k), cost.encoder_pairs(k + int(abstain))
        known = (lm_inputs == 0 or lm_ms is not None) and (pairs == 0 or encoder_ms is not None)
        ms = lm_inputs * (lm_ms or 0.0) + pairs * (encoder_ms or 0.0) if known else None
        costs[name] = {
            "lm_inputs": lm_inputs,
            "encoder_pairs": pairs,
            "ms": None if ms is None else round(ms, 3),
        }
    return costs


def within_budget(
    rule: str, k: int, max_lm_inputs: int | None, *, stacked: bool = False, abstain: bool = True
) -> bool:
    """Whether `rule` reads at most `max_lm_inputs` frozen-LM inputs per retrieval of `k` candidates
    (None: no budget; `stacked`: the trained reranker has the zero-shot prior). A user who cannot run the LM
    at rerank time sets 0."""
    if max_lm_inputs is None:
        return True
    cost = rule_cost(rule, stacked=stacked, abstain=abstain)
    # k unknown (a dataset without it): a rule that reads the LM per candidate reads at least one input
    return cost.lm_inputs(max(k, 1)) <= max_lm_inputs


def _lm_ms(meta: dict) -> float | None:
    """Milliseconds per frozen-LM input, from data-gen's measured pairs per second (one input a pair)."""
    rate = (meta.get("summary") or {}).get("pairs_per_second")
    return 1000.0 / rate if isinstance(rate, int | float) and math.isfinite(rate) and rate > 0 else None


def zero_shot_logprobs(path: str, rows: list[int]) -> np.ndarray | None:
    """The target's log-prob under the zero-shot rule's pick for `rows` (in their order); None for data
    without the y' column (``ralm-rerank-data/1``)."""
    import datasets

    ds = datasets.load_from_disk(path)
    if "lm_rank_logprobs" not in ds.column_names:
        return None
    table = ds.select_columns(["lm_logprobs", "lm_rank_logprobs"]).select(rows)
    picks = zero_shot_picks(table["lm_rank_logprobs"])
    return _float64([lp[i] for lp, i in zip(table["lm_logprobs"], picks, strict=True)])


def on_every_prefix(data: RerankData, rule: str) -> PairedSample:
    """`rule` (``bm25``: BM25's top-1; ``zero-shot``) against no passage on every usable data-gen prefix
    (training, selection and decision: neither is fitted on any), ordered by (document, position), blocks
    by document."""
    import datasets

    rows = sorted(data.train_rows + data.val_rows + data.decision_rows)
    ds = datasets.load_from_disk(data.path)
    columns = ["doc_id", "lm_logprobs", "no_retrieval_logprob"]
    columns += [c for c in ("position", "lm_rank_logprobs") if c in ds.column_names]
    table = ds.select_columns(columns).select(rows)
    docs = table["doc_id"]
    positions = table["position"] if "position" in columns else list(range(len(rows)))
    order = sorted(range(len(rows)), key=lambda i: (docs[i], positions[i], i))
    logprobs = table["lm_logprobs"]
    picks = zero_shot_picks(table["lm_rank_logprobs"]) if rule == ZERO_SHOT else [0] * len(rows)
    chosen = [float(lp[i]) for lp, i in zip(logprobs, picks, strict=True)]
    none = table["no_retrieval_logprob"]
    return PairedSample(
        rule=[chosen[i] for i in order],
        reference=[float(none[i]) for i in order],
        documents=[docs[i] for i in order],
        source="every data-gen prefix",
    )


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None
