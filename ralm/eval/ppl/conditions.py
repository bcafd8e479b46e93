"""The conditions of ``ralm eval ppl``: which passage, if any, each window is scored with.

A run evaluates one condition (``--reranker X`` or ``--no-retrieval``) or several (``--compare A,B,...``:
a list of Conditions, ``parse_conditions`` reading the text, ``conditions_spec`` writing it); both go
through one engine (``ralm.eval.ppl.point``). The kinds (no retrieval, BM25 top-1, ...) are declared
once, in ``ralm.eval.ppl.registry``; this module reads them.

``pick`` is the one place where a condition picks from a window's row, with the one tie rule: among
passages the earlier (higher BM25) candidate wins, as ``torch.argmin`` does in eval_lm.py; between passages
and no passage, no passage wins. ``plan_rows`` says which LM rows a window needs for a set of conditions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ralm.errors import RalmInputError
from ralm.eval.ppl.registry import KINDS, ConditionKind, listed, reranker_values
from ralm.passage_rules import NO_RETRIEVAL, TRAINED, stacked_pick

__all__ = [
    "Condition",
    "RowPlan",
    "check_conditions",
    "conditions_spec",
    "parse_conditions",
    "pick",
    "plan_rows",
    "single_condition",
]

if TYPE_CHECKING:
    from ralm.eval.ppl.records import WindowScores

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass(frozen=True)
class Condition:
    kind: str
    """A kind of ``ralm.eval.ppl.registry.KINDS``; results.json records it as ``config.mode``."""
    name: str
    """Output folder under ``--compare``: the kind, or NAME of NAME=PATH."""
    model: str | None = None
    """trained: the reranker folder; zero-shot: the reranking LM (``--rerank-lm``), None for the evaluated
    LM."""
    threshold: float | None = None
    """bm25-above: the BM25 score from which BM25's top-1 is prepended; zero-shot-above: the y' gain (nats)
    from which the zero-shot pick is."""
    played_as: str | None = field(default=None, compare=False)
    """trained: the kind that plays the export on the evaluated LM's rows instead of its model (``zero-shot``
    or ``zero-shot-above`` when the export decided so: ``ralm.eval.ppl.chooser_loading.play_exports``); not
    part of the spec."""
    played_threshold: float | None = field(default=None, compare=False)
    """trained, played as a rule with a threshold: the export's (its ``ralm_reranker.json``)."""
    stacked: tuple[float, float | None] | None = field(default=None, compare=False)
    """trained, a stacked export (``ralm train --zero-shot-prior``): its (a, b). It is played as the zero-shot
    rule it stacks on (``played_as``: the evaluated LM scores y' of every candidate, and with b of no passage)
    plus its encoder's correction, computed before the LM scores (``ralm.passage_rules.stacked_pick``)."""

    @property
    def declared(self) -> ConditionKind:
        """Its kind's declaration (``ralm.eval.ppl.registry``)."""
        return KINDS[self.kind]

    @property
    def spec(self) -> str:
        """The condition as a ``--compare`` item (recorded in each compared results.json)."""
        value = self.declared.value
        if value == "folder":
            return f"{self.name}={self.model}"
        return f"{self.kind}={self.threshold!r}" if value == "threshold" else self.name

    @property
    def recorded_reranker(self) -> str:
        """results.json ``config.reranker``: what the single run's ``--reranker`` would say."""
        declared = self.declared
        if declared.value == "folder":
            return str(self.model)
        if declared.value == "threshold":
            return repr(self.threshold)
        return declared.recorded_reranker or self.kind

    @property
    def playing(self) -> ConditionKind:
        """The kind whose rule picks its passages: its own, or the one its export plays (``played_as``)."""
        return KINDS[self.played_as] if self.played_as else self.declared

    @property
    def chooses_first(self) -> bool:
        """Its model chooses before the evaluated LM scores the window (a reranker, or another LM)."""
        return self.played_as is None and self.declared.model_chooses and self.model is not None

    @property
    def encoder_first(self) -> bool:
        """Its reranker's encoder scores the window's pairs before the LM does: it chooses first, or it is
        a stacked export whose encoder corrects the LM's zero-shot scores."""
        return self.chooses_first or self.stacked is not None

    @property
    def reads_every_candidate(self) -> bool:
        """It picks from the evaluated LM's scores of every candidate (same-LM zero-shot, the oracles)."""
        return self.playing.reads_scores and not self.chooses_first

    @property
    def ranks(self) -> bool:
        """Candidate rows must also score the ranking tokens y' (same-LM zero-shot)."""
        return self.playing.ranks and not self.chooses_first

    @property
    def searches(self) -> bool:
        """It retrieves candidates (every kind but the LM alone)."""
        return self.declared.searches


def parse_conditions(spec: str) -> list[Condition]:
    """``"no-retrieval,bm25,trained=runs/r"`` -> Conditions (the ``--compare`` text of the command line and
    YAML); bad names and duplicates fail (a missing folder fails in `check_conditions`, when they run)."""
    conditions: list[Condition] = []
    for item in (part.strip() for part in spec.split(",")):
        condition = _parse_item(item)
        _check_new_name(condition, conditions)
        conditions.append(condition)
    return conditions


def conditions_spec(conditions: Sequence[Condition]) -> str:
    """The conditions as ``--compare`` text (``parse_conditions`` reads it back as the same list)."""
    return ",".join(c.spec for c in conditions)


def check_conditions(conditions: Sequence[Condition]) -> list[Condition]:
    """A ``--compare`` list as the engine takes it: not empty, names distinct, each condition what its spec
    says (a list of any other is not one ``--compare`` can give) and each reranker folder there."""
    if not conditions:
        raise RalmInputError("--compare: no conditions")
    checked: list[Condition] = []
    for condition in conditions:
        if condition.kind not in KINDS:
            raise RalmInputError(f"--compare: {condition}: no such kind; expected one of {', '.join(KINDS)}")
        if _parse_item(condition.spec) != condition:
            raise RalmInputError(f"--compare: {condition} is not what its spec {condition.spec!r} says")
        _check_new_name(condition, checked)
        if condition.declared.value == "folder" and not Path(str(condition.model)).is_dir():
            raise RalmInputError(f"--compare {condition.spec}: no such reranker folder {condition.model!r}")
        checked.append(condition)
    return checked


def _check_new_name(condition: Condition, earlier: Sequence[Condition]) -> None:
    if any(c.name == condition.name for c in earlier):
        raise RalmInputError(f"--compare: condition {condition.name!r} given twice")


def _parse_item(item: str) -> Condition:
    name, eq, value = (part.strip() for part in item.partition("="))
    if name in KINDS and KINDS[name].value == "threshold":
        try:
            return Condition(name, name, threshold=float(value))
        except ValueError:
            raise RalmInputError(
                f"--compare: {item!r} is not {name}=VALUE with VALUE a number (inf: never retrieve)"
            ) from None
    built_in = listed()
    if not eq:
        if name not in built_in:
            raise RalmInputError(
                f"--compare: unknown condition {item!r}; expected {', '.join(built_in)} or NAME=PATH"
            )
        return Condition(name, name)
    if not _NAME.match(name) or name in built_in or not value:
        raise RalmInputError(
            f"--compare: {item!r} is not NAME=PATH with NAME a simple identifier (not a built-in condition)"
        )
    return Condition(TRAINED, name, model=value)


def single_condition(no_retrieval: bool, reranker: str, rerank_lm: str | None = None) -> Condition:
    """The one condition of a run without ``--compare`` (``--no-retrieval``, ``--reranker``,
    ``--rerank-lm``)."""
    if no_retrieval:
        return Condition(NO_RETRIEVAL, NO_RETRIEVAL)
    values = reranker_values()
    if reranker in values:
        kind = values[reranker]
        return Condition(kind, kind, model=rerank_lm if KINDS[kind].model_chooses else None)
    if not Path(reranker).is_dir():
        raise RalmInputError(f"--reranker {reranker!r}: expected {', '.join(values)} or a reranker folder")
    return Condition(TRAINED, TRAINED, model=reranker)


def pick(condition: Condition, row: WindowScores, chosen: int | None = None, seed: int = 0) -> int | None:
    """The candidate `condition` prepends in one window's row (None: nothing).

    `row` is a table row (``ralm.eval.ppl.records.WindowScores``); `chosen` is the pick of a condition that
    chooses first, or a stacked export's encoder scores of the window's pairs. Only a condition that
    ``reads_every_candidate`` reads the row's LM scores.
    """
    if not row.candidates:
        return None
    if condition.chooses_first:
        return chosen
    if condition.stacked is not None:
        return stacked_pick(row, chosen, *condition.stacked)
    threshold = condition.played_threshold if condition.played_as else condition.threshold
    return condition.playing.pick(row, seed, threshold)


@dataclass(frozen=True)
class RowPlan:
    """The LM rows one window needs: the no-passage row, the context-matched one and the candidates (by
    BM25 rank) to score."""

    bare: bool
    candidates: tuple[int, ...]
    rank_tokens: bool = False
    """The candidate rows also score the ranking tokens y' (same-LM zero-shot is among the conditions)."""
    matched: bool = False
    """The no-passage row with the context cut by BM25's top-1 passage's length (``no-retrieval-matched``)."""

    @property
    def rows(self) -> int:
        return int(self.bare) + int(self.matched) + len(self.candidates)


def plan_rows(
    conditions: Sequence[Condition],
    row: WindowScores,
    chosen: Mapping[str, int | None],
    *,
    seed: int = 0,
    baselines: bool = False,
) -> RowPlan:
    """Which LM rows `conditions` need for one window.

    `row` is the window's unscored row (``perplexity.blank_row``: the candidates with their BM25 scores);
    `chosen` maps the names of conditions that choose first to their pick. With `baselines` (a comparison
    table) the no-passage row and every candidate are scored whatever the conditions, since every
    condition is compared with no retrieval, BM25 and the oracle.
    """
    count = len(row.candidates)
    if count == 0:
        return RowPlan(bare=True, candidates=())
    every = baselines or any(c.reads_every_candidate for c in conditions)
    plain = [c for c in conditions if not c.reads_every_candidate and not c.declared.matched_row]
    picks = {pick(c, row, chosen.get(c.name), seed) for c in plain}
    bare = baselines or None in picks or any(c.playing.reads_no_passage for c in conditions)
    wanted = tuple(range(count)) if every else tuple(sorted(p for p in picks if p is not None))
    matched = any(c.declared.matched_row for c in conditions)
    return RowPlan(bare, wanted, rank_tokens=any(c.ranks for c in conditions), matched=matched)
