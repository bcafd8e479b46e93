"""Every condition of ``ralm eval ppl``, declared once: a passage rule (``ralm.passage_rules``: its name,
label, pick and what it reads) and how the engine plays it: which LM rows it needs, how it is named on the
command line and in results.json, and how the demo's report judges it.

Everything else reads this table: ``conditions`` (parsing a ``--compare`` list, ``pick``, the row planner),
the engine (``point``, ``run``), the pipeline's eval stage (its ``--compare`` list), the report's labels, the
verdicts and the bf16 check. Adding a condition that picks from the columns a table already holds (BM25
scores, the candidates' NLLs and ranking log-probs, the no-passage NLL and ranking log-prob) is one
``PassageRule`` and one ``ConditionKind`` in ``KINDS`` plus its test; a condition that needs new LM rows
also needs the row planner and the scorer.

The kinds:

- ``no-retrieval``: nothing is prepended (the baseline);
- ``no-retrieval-matched``: nothing is prepended, but the window's context is cut by the length of BM25's
  top-1 passage, exactly as that passage would cut it: the context-matched baseline. Against it a passage's
  change is what its content adds; against ``no-retrieval``, that minus the context it displaced;
- ``bm25``: candidate 0, BM25's top-1 (``--reranker none``);
- ``random``: a seeded uniform draw among the window's candidates (``--seed``; the same draw for a window
  whatever else is compared or resumed);
- ``bm25-above=T``: BM25's top-1 when the window's best BM25 score is at least T, else nothing (the trivial
  abstention rule a reranker must beat; `ralm run` fits T on the training prefixes);
- ``zero-shot``: the candidate with the largest log-probability of the ranking tokens y' (§6.1) under the
  evaluated LM, or under ``--rerank-lm`` (another tokenizer: it chooses before the LM scores anything);
- ``zero-shot-above=M``: the zero-shot candidate (under the evaluated LM) when it raises the log-prob of y'
  over no passage by at least M nats, else nothing (the LM's own abstention; `ralm run` fits M on the training
  prefixes);
- ``oracle``: the smallest target NLL among the candidates (best of k, Figure 7's bound);
- ``oracle-or-none``: the smallest of the candidates' and the no-passage NLL (the bound of a reranker that
  may abstain);
- ``trained`` (``--reranker PATH``, ``NAME=PATH`` in a list): a ``PredictiveReranker``'s choice, abstention
  and BM25 prior applied inside the reranker.

A ``row`` handed to a pick function is a comparison table row (``ralm.eval.ppl.records.WindowScores``), with
None where the planner scored nothing. It always has a candidate (``conditions.pick`` answers None for a
window without one before any rule is asked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ralm.passage_rules import (
    BM25,
    BM25_ABOVE,
    CONTEXT_MATCHED,
    NO_RETRIEVAL,
    ORACLE,
    ORACLE_OR_NONE,
    RANDOM,
    RULES,
    TRAINED,
    ZERO_SHOT,
    ZERO_SHOT_ABOVE,
    PassageRule,
    Pick,
)


@dataclass(frozen=True)
class Reference:
    """A condition every other one is compared with in the verdicts' retrieving windows."""

    key: str
    """The comparison's key in report.json (``vs_bm25``)."""
    order: int
    """Its place among the references in each condition's entry (report.json keeps this key order)."""


@dataclass(frozen=True)
class ConditionKind:
    """One kind of condition: a passage rule (``ralm.passage_rules``) as ``ralm eval ppl`` plays it."""

    rule: PassageRule
    """The rule: its name, report label, pick function and what it reads."""
    verdict: Literal["reference", "judged", "shown"]
    """What the verdicts do with it: compare every condition with it (`reference`), state whether it helps
    (`judged`: the trained rerankers), or only show it in the tables (`shown`)."""
    value: Literal["none", "threshold", "folder"] = "none"
    """What a ``--compare`` item gives beside the name: nothing (the kind alone), ``KIND=T`` (a threshold)
    or ``NAME=PATH`` (a reranker folder; any NAME that is not a kind)."""
    reranker: str | None = None
    """The single run's ``--reranker`` value that selects it (None: no value does)."""
    recorded_reranker: str | None = None
    """results.json ``config.reranker`` when it is not the kind's name (nor its threshold or folder)."""
    searches: bool = True
    """It retrieves: False for the LM alone, which makes no query (no candidates, no retrieving windows)."""
    model_chooses: bool = False
    """A model given with it (a reranker folder, ``--rerank-lm``) chooses before the evaluated LM scores."""
    matched_row: bool = False
    """It is scored on the no-passage row with the context cut by BM25's top-1 passage's length."""
    reference: Reference | None = None
    """With verdict `reference`: the key other conditions are compared with it under."""
    in_demo: bool = True
    """It is in the demo's ``--compare`` table (`threshold` ones when a threshold was fitted, `folder` ones
    once per trained reranker)."""

    @property
    def name(self) -> str:
        """The kind: its ``--compare`` name and results.json ``config.mode``."""
        return self.rule.name

    @property
    def label(self) -> str:
        """What the report calls it."""
        return self.rule.label

    @property
    def value_label(self) -> str | None:
        """The report's label when the value is known (the threshold results.json records)."""
        return self.rule.value_label

    @property
    def pick(self) -> Pick | None:
        """Its choice from a window's row; None: a model always chooses first (``model_chooses``)."""
        return self.rule.pick

    @property
    def reads_scores(self) -> bool:
        """Without a model choosing first it picks from the evaluated LM's scores of every candidate."""
        return bool(self.rule.reads & {"lm-targets", "lm-ranking-tokens"})

    @property
    def ranks(self) -> bool:
        """Without a model choosing first its candidate rows also score the ranking tokens y'."""
        return "lm-ranking-tokens" in self.rule.reads

    @property
    def reads_no_passage(self) -> bool:
        """Its pick also reads the no-passage row: the targets' NLL (abstention on the true targets) or the
        log-prob of y' (abstention by the LM's evidence)."""
        return bool(self.rule.reads & {"no-passage", "no-passage-ranking-tokens"})

    @property
    def reads_targets(self) -> bool:
        """It picks by the true targets: a bound, not a method (shown apart in the report)."""
        return self.rule.is_bound


_DECLARED = (
    ConditionKind(
        RULES[NO_RETRIEVAL],
        "reference",
        recorded_reranker="none",
        searches=False,
        reference=Reference("vs_no_retrieval", 0),
    ),
    ConditionKind(
        RULES[CONTEXT_MATCHED],
        "reference",
        recorded_reranker="none",
        matched_row=True,
        reference=Reference("vs_matched", 2),
    ),
    ConditionKind(
        RULES[BM25], "reference", reranker="none", recorded_reranker="none", reference=Reference("vs_bm25", 1)
    ),
    ConditionKind(RULES[RANDOM], "shown"),
    ConditionKind(RULES[ZERO_SHOT], "shown", reranker=ZERO_SHOT, model_chooses=True),
    ConditionKind(RULES[BM25_ABOVE], "reference", value="threshold", reference=Reference("vs_threshold", 3)),
    ConditionKind(RULES[ZERO_SHOT_ABOVE], "shown", value="threshold"),
    ConditionKind(RULES[TRAINED], "judged", value="folder", model_chooses=True),
    ConditionKind(RULES[ORACLE], "shown", reranker=ORACLE),
    ConditionKind(RULES[ORACLE_OR_NONE], "shown"),
)

KINDS: dict[str, ConditionKind] = {kind.name: kind for kind in _DECLARED}
"""Every kind by name, in the demo table's order (the bounds last)."""


def kind_named(name: str) -> ConditionKind:
    """The kind of a condition named `name` in a ``--compare`` list (or its output folder): a kind's own name,
    else a trained reranker's NAME (as ``NAME=PATH`` reads it)."""
    return KINDS.get(name) or next(k for k in KINDS.values() if k.value == "folder")


def listed() -> list[str]:
    """The kinds a ``--compare`` list names alone (no ``=VALUE``), in order."""
    return [k.name for k in KINDS.values() if k.value == "none"]


def reranker_values() -> dict[str, str]:
    """``--reranker`` value -> condition kind (any other value is a trained reranker's folder)."""
    return {k.reranker: k.name for k in KINDS.values() if k.reranker is not None}


def references() -> list[ConditionKind]:
    """The kinds every condition is compared with in the verdicts, in report.json's key order."""
    return sorted((k for k in KINDS.values() if k.reference), key=lambda k: k.reference.order)
