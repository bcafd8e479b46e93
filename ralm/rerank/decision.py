"""The export decision's inputs: scored once, at the end of training, for the selected checkpoint.

Checkpoint selection saw the selection prefixes at every validation (and, with ``--bm25-prior``, the
step-0 model, which is the threshold rule with ``--abstain``: ``ralm.rerank.scalar_init``) and chose the
best on them; the decision prefixes come from other documents (``ralm.rerank.dataset``) and are scored
here, once, for that one model. No LM runs: each data-gen row holds the LM log-prob of its target given
every candidate and given no passage, so the decision costs the reranker's encoder passes over each
prefix's k (+1) pairs. The rule itself is ``ralm.rerank.promise.export_decision``; this module gathers its
inputs (the threshold rule's T fitted on the training prefixes; BM25 and the zero-shot rule against no
retrieval on every data-gen prefix, since none is fitted on any) and records what decided it
(``evidence``).
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from ralm.passage_rules import BM25, BM25_ABOVE, NO_RETRIEVAL, TRAINED, ZERO_SHOT, Scored, ScoredRow, picks
from ralm.rerank.batch import GroupCollator
from ralm.rerank.checkpoints import read_checkpoint
from ralm.rerank.dataset import GroupDataset, RerankData
from ralm.rerank.lit_module import RerankerModule
from ralm.rerank.metrics import gain_recovered, per_prefix_logprobs
from ralm.rerank.model import load_tokenizer
from ralm.rerank.promise import (
    DEFAULT_MARGIN,
    POWER,
    RULE_SENTENCE,
    Outcome,
    PairedSample,
    export_decision,
)
from ralm.rerank.scalar_init import read_rule_columns


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
    (``ralm.rerank.promise.CHOICES``)."""
    exported: str | None
    """The checkpoint whose weights the export holds; None: no weights (a no-retrieval decision without
    a step-0 model: the trained weights lost and must not look like a reranker)."""
    gain_recovered: float | None
    """Of what is exported, on the selection prefixes: the selected step's for ``trained``, 0 for ``bm25``
    (BM25 itself), None for the other rules (not validated as a reranker)."""
    evidence: dict
    threshold: float | None = None
    """The threshold rule's T (fitted on the training prefixes; None: never retrieve, or unavailable)."""


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

    def rules(self, abstain: bool) -> dict[str, np.ndarray | None]:
        """``export_decision``'s values: each of ``CHOICES`` and its log-probs, None where unavailable."""
        return {
            TRAINED: self.trained,
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
    groups = GroupDataset(data.path, rows, abstain=data.abstain, bm25_prior=data.bm25_prior)
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
) -> Decision:
    """Score the decision prefixes for the selected checkpoint, decide, and say what the export holds.
    `threshold`: T fitted on the training prefixes (``ralm.rerank.fit``), needed with ``--abstain``."""
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
    values = score_decision_prefixes(data, module, batch_size=batch_size, device=device)
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
    candidates = values.rules(data.abstain)
    # Selection kept the untrained model: "trained" is then the start, the threshold rule (BM25 without
    # --abstain) as a model, and that rule competes for it under its own name (no encoder at inference).
    start_won = step == 0 and step0 is not None and selected.checkpoint == step0
    if start_won:
        candidates[TRAINED] = None
    outcome = export_decision(
        candidates,
        documents=data.decision_documents,
        margin=margin,
        target_tokens=data.meta.get("s"),
        promise_samples=promise_samples,
        seed=seed,
    )
    finite = threshold if threshold is not None and math.isfinite(threshold) else None
    evidence = _evidence(data, selected, step, values, candidates, outcome, finite)
    evidence["decision"].update(trained_is_start=start_won, seconds=round(time.perf_counter() - started, 2))
    choice = outcome.choice
    exported = {TRAINED: selected.checkpoint, BM25: step0 or selected.checkpoint}
    recovered = {TRAINED: selected.gain_recovered, BM25: 0.0}
    kept_threshold = finite if choice == BM25_ABOVE else None
    # the other rules: the step-0 weights (or none); not validated as rerankers
    return Decision(choice, exported.get(choice, step0), recovered.get(choice), evidence, kept_threshold)


def _evidence(
    data: RerankData,
    selected: Selected,
    step: int | None,
    values: DecisionLogprobs,
    candidates: dict[str, np.ndarray | None],
    outcome: Outcome,
    threshold: float | None,
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
            "tests": outcome.promise,
        },
        "overlap": data.overlap,
        "comparisons": outcome.comparisons,
    }


def zero_shot_picks(rank_logprobs: list[list[float]]) -> list[int]:
    """The zero-shot rule's candidate per row (``ralm.passage_rules``: the highest log p(y' | [d_i; x]), the
    earlier, higher-BM25, candidate on a tie, as ``ralm eval ppl``'s zero-shot condition)."""
    rows = [
        ScoredRow(i, tuple(Scored(rank_logprob=v) for v in values)) for i, values in enumerate(rank_logprobs)
    ]
    return picks(ZERO_SHOT, rows)


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
