"""The conditions of the demo's ``ralm eval ppl --compare`` table and the words the report gives them, both
read off the condition registry (``ralm.eval.ppl.registry``): a kind declared there with ``in_demo`` is in
the table, under its declared label, with no change here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.registry import KINDS, kind_named
from ralm.passage_rules import TRAINED

TRAINED_PREFIX = "trained-seed"
"""The demo's trained rerankers are compared as ``trained-seed<seed>``."""
NO_LM_PREFIX = "no-lm-seed"
"""Each seed's export among the rules that read no frozen LM at rerank time (``ralm train --no-lm-export``),
compared as ``no-lm-seed<seed>``."""
STACKED_EXPORT = "stacked"
"""What the report calls a seed's export that is its trained stacked reranker (``ralm train
--zero-shot-prior``: the LM's zero-shot rule plus an encoder's correction), where a plain trained reranker's
is ``trained``: the row then says it reads the LM too."""
STACKED_LABEL = "stacked reranker (zero-shot LM rule + encoder)"
BASELINES = tuple(k.name for k in KINDS.values() if k.in_demo and k.value == "none")
"""The built-in conditions of the demo's one `ralm eval ppl --compare` table (trained ones go between)."""
UPPER_BOUNDS = tuple(k.name for k in KINDS.values() if k.reads_targets)
"""Conditions that read the true targets: bounds, not methods."""


def demo_conditions(thresholds: Mapping[str, float] | None, trained: Mapping[str, Path]) -> list[Condition]:
    """The demo table's conditions in the registry's order: every kind declared ``in_demo``; a threshold rule
    when `thresholds` holds its fitted value (kind -> value); a trained reranker per entry of `trained`
    (name -> exported folder)."""
    conditions = []
    for kind in KINDS.values():
        if not kind.in_demo:
            continue
        if kind.value == "folder":
            conditions += [Condition(kind.name, name, model=str(path)) for name, path in trained.items()]
        elif kind.value == "threshold":
            value = (thresholds or {}).get(kind.name)
            conditions += [] if value is None else [Condition(kind.name, kind.name, threshold=value)]
        else:
            conditions.append(Condition(kind.name, kind.name))
    return conditions


def trained_seed(name: str) -> str | None:
    """The seed of a demo condition that is a seed's export (judged by the verdicts), else None; the
    no-LM export (``no_lm_seed``) is not one."""
    if kind_named(name).verdict != "judged" or not name.startswith(TRAINED_PREFIX):
        return None
    return name.removeprefix(TRAINED_PREFIX)


def no_lm_seed(name: str) -> str | None:
    """The seed of a demo condition that is a seed's no-LM export, else None."""
    if kind_named(name).verdict != "judged" or not name.startswith(NO_LM_PREFIX):
        return None
    return name.removeprefix(NO_LM_PREFIX)


def exported_as(summary: dict) -> str:
    """A seed's export as its row names it, from its ``ralm train`` summary.json: the decision, or
    ``STACKED_EXPORT`` for a trained stacked reranker (``--zero-shot-prior``), whose row reads the LM too."""
    decision = summary.get("decision", TRAINED)
    stacked = decision == TRAINED and (summary.get("config") or {}).get("zero_shot_prior")
    return STACKED_EXPORT if stacked else decision


def is_seed_export(name: str) -> bool:
    """A seed's export or its no-LM export (a row the verdicts judge)."""
    return trained_seed(name) is not None or no_lm_seed(name) is not None


def seed_label(seed: str, exported: str | None, no_lm: bool = False) -> str:
    """A demo seed's row as what it plays: ``seed 0, exported zero-shot`` when the export decided a rule
    (the trained model then picks nothing), ``trained reranker, seed 0`` when it exports the model (the
    stacked one: ``STACKED_LABEL``); with
    `no_lm`, its export among the rules that read no frozen LM: ``seed 0, no LM: exported bm25-above``."""
    if no_lm:
        return f"seed {seed}, no LM: {'trained reranker' if exported == TRAINED else f'exported {exported}'}"
    if exported == STACKED_EXPORT:
        return f"{STACKED_LABEL}, seed {seed}"
    if exported and exported != TRAINED:
        return f"seed {seed}, exported {exported}"
    return f"{KINDS[TRAINED].label}, seed {seed}"


def label(name: str, metrics: dict | None = None) -> str:
    """The report's words for the condition compared as `name` (`metrics`: its results, for a rule's
    value and a seed's export decision)."""
    seed = trained_seed(name)
    if seed is not None:
        return seed_label(seed, (metrics or {}).get("exported"))
    seed = no_lm_seed(name)
    if seed is not None:
        return seed_label(seed, (metrics or {}).get("exported", "?"), no_lm=True)
    if name not in KINDS:
        return name
    declared, value = KINDS[name], (metrics or {}).get("rule")
    if declared.value_label and value:
        return declared.value_label.format(value=float(value))
    return declared.label
