"""Every condition of ``ralm eval ppl``, declared once: how it picks, which LM rows it needs, what it reads,
how it is named on the command line and in results.json, and how the demo's report words and judges it.

Everything else reads this table: ``conditions`` (parsing a ``--compare`` list, ``pick``, the row planner),
the engine (``point``, ``run``), the pipeline's eval stage (its ``--compare`` list), the report's labels, the
verdicts and the bf16 check. Adding a condition that picks from the columns a table already holds (BM25
scores, the candidates' NLLs and ranking log-probs, the no-passage NLL) is one ``ConditionKind`` in
``KINDS`` plus its test; a condition that needs new LM rows also needs the row planner and the scorer.

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
- ``oracle``: the smallest target NLL among the candidates (best of k, Figure 7's bound);
- ``oracle-or-none``: the smallest of the candidates' and the no-passage NLL (the bound of a reranker that
  may abstain);
- ``trained`` (``--reranker PATH``, ``NAME=PATH`` in a list): a ``PredictiveReranker``'s choice, abstention
  and BM25 prior applied inside the reranker.

A ``row`` handed to a pick rule is a comparison table row (``ralm.eval.ppl.records.WindowScores``): the
window's index (``window``), the no-passage NLL (``no_passage_nll``) and per candidate, in BM25 order,
``bm25``, ``nll`` and ``rank_logprob`` (None where the planner scored nothing). It always has a candidate
(``pick`` answers None for a window without one before any rule is asked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from ralm.ranking import best_first, first_smallest

if TYPE_CHECKING:
    from ralm.eval.ppl.conditions import Condition
    from ralm.eval.ppl.records import WindowScores

PickRule = Callable[["Condition", "WindowScores", int], "int | None"]
"""(condition, table row, seed) -> the candidate prepended (its BM25 rank), or None for no passage."""


@dataclass(frozen=True)
class Reference:
    """A condition every other one is compared with in the verdicts' retrieving windows."""

    key: str
    """The comparison's key in report.json (``vs_bm25``)."""
    order: int
    """Its place among the references in each condition's entry (report.json keeps this key order)."""


@dataclass(frozen=True)
class ConditionKind:
    """One kind of condition, as every part of ralm sees it."""

    name: str
    """The kind: its ``--compare`` name and results.json ``config.mode``."""
    label: str
    """What the report calls it."""
    pick: PickRule | None
    """Its choice from a window's row; None: a model always chooses first (``model_chooses``)."""
    verdict: Literal["reference", "judged", "shown"]
    """What the verdicts do with it: compare every condition with it (`reference`), state whether it helps
    (`judged`: the trained rerankers), or only show it in the tables (`shown`)."""
    value: Literal["none", "threshold", "folder"] = "none"
    """What a ``--compare`` item gives beside the name: nothing (the kind alone), ``KIND=T`` (a threshold)
    or ``NAME=PATH`` (a reranker folder; any NAME that is not a kind)."""
    value_label: str | None = None
    """The report's label when the value is known (``{value:.1f}``: the threshold results.json records)."""
    reranker: str | None = None
    """The single run's ``--reranker`` value that selects it (None: no value does)."""
    recorded_reranker: str | None = None
    """results.json ``config.reranker`` when it is not the kind's name (nor its threshold or folder)."""
    searches: bool = True
    """It retrieves: False for the LM alone, which makes no query (no candidates, no retrieving windows)."""
    model_chooses: bool = False
    """A model given with it (a reranker folder, ``--rerank-lm``) chooses before the evaluated LM scores."""
    reads_scores: bool = False
    """Without a model choosing first it picks from the evaluated LM's scores of every candidate."""
    ranks: bool = False
    """Without a model choosing first its candidate rows also score the ranking tokens y'."""
    reads_no_passage: bool = False
    """Its pick also reads the no-passage row's NLL (abstention on the true targets)."""
    matched_row: bool = False
    """It is scored on the no-passage row with the context cut by BM25's top-1 passage's length."""
    reads_targets: bool = False
    """It picks by the true targets: a bound, not a method (shown apart in the report)."""
    reference: Reference | None = None
    """With verdict `reference`: the key other conditions are compared with it under."""
    in_demo: bool = True
    """It is in the demo's ``--compare`` table (`threshold` ones when a threshold was fitted, `folder` ones
    once per trained reranker)."""


def random_pick(seed: int, window: int, k: int) -> int:
    """A uniform draw among `k` candidates that depends only on the seed and the window's index."""
    return int(np.random.default_rng([seed, window]).integers(k))


def _nothing(condition: Condition, row: WindowScores, seed: int) -> None:
    return None


def _top1(condition: Condition, row: WindowScores, seed: int) -> int:
    return 0


def _random(condition: Condition, row: WindowScores, seed: int) -> int:
    return random_pick(seed, row.window, len(row.candidates))


def _above(condition: Condition, row: WindowScores, seed: int) -> int | None:
    return 0 if max(c.bm25 for c in row.candidates) >= condition.threshold else None


def _best_ranked(condition: Condition, row: WindowScores, seed: int) -> int:
    return best_first([c.rank_logprob for c in row.candidates])[0]


def _smallest_nll(condition: Condition, row: WindowScores, seed: int) -> int:
    return first_smallest([c.nll for c in row.candidates])


def _smallest_or_none(condition: Condition, row: WindowScores, seed: int) -> int | None:
    best = _smallest_nll(condition, row, seed)
    return None if row.no_passage_nll <= row.candidates[best].nll else best


NO_RETRIEVAL, BM25, RANDOM, BM25_ABOVE = "no-retrieval", "bm25", "random", "bm25-above"
ZERO_SHOT, ORACLE, ORACLE_OR_NONE, TRAINED = "zero-shot", "oracle", "oracle-or-none", "trained"
CONTEXT_MATCHED = "no-retrieval-matched"

_DECLARED = (
    ConditionKind(
        NO_RETRIEVAL,
        "no retrieval",
        _nothing,
        "reference",
        recorded_reranker="none",
        searches=False,
        reference=Reference("vs_no_retrieval", 0),
    ),
    ConditionKind(
        CONTEXT_MATCHED,
        "no retrieval, context cut as BM25's passage cuts it",
        _nothing,
        "reference",
        recorded_reranker="none",
        matched_row=True,
        reference=Reference("vs_matched", 2),
    ),
    ConditionKind(
        BM25,
        "BM25 top-1",
        _top1,
        "reference",
        reranker="none",
        recorded_reranker="none",
        reference=Reference("vs_bm25", 1),
    ),
    ConditionKind(RANDOM, "random of BM25 top-k", _random, "shown"),
    ConditionKind(
        ZERO_SHOT,
        "zero-shot LM rerank",
        _best_ranked,
        "shown",
        reranker="zero-shot",
        model_chooses=True,
        reads_scores=True,
        ranks=True,
    ),
    # The trivial abstention rule a learned reranker must not lose to (issue 29).
    ConditionKind(
        BM25_ABOVE,
        "BM25 top-1 if its score >= T",
        _above,
        "reference",
        value="threshold",
        value_label="BM25 top-1 if score >= {value:.1f}",
        reference=Reference("vs_threshold", 3),
    ),
    ConditionKind(TRAINED, "trained reranker", None, "judged", value="folder", model_chooses=True),
    ConditionKind(
        ORACLE,
        "bound: best of k",
        _smallest_nll,
        "shown",
        reranker="oracle",
        reads_scores=True,
        reads_targets=True,
    ),
    ConditionKind(
        ORACLE_OR_NONE,
        "bound: best of k or none",
        _smallest_or_none,
        "shown",
        reads_scores=True,
        reads_no_passage=True,
        reads_targets=True,
    ),
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
