"""The passage rules: what ralm may prepend to a window or prefix, each declared once.

A passage rule chooses, among one retrieval's BM25 candidates, the passage the frozen LM reads, or none.
Every stage reads this table and no other module spells a rule's name:

- ``ralm eval ppl``'s conditions (``ralm.eval.ppl.registry`` adds how a comparison table plans, records
  and judges each one);
- the export decision (``ralm.train.decision``: the rules it may export, simplest first, ``EXPORTABLE``);
- the export, its ``ralm_reranker.json`` and its model card (what an export of each rule holds and says);
- ``ralm eval qa|flare`` (no retrieval, BM25's order, the zero-shot rule, an exported folder);
- the pipeline's report (each rule's label) and the command line.

Adding a rule is one ``PassageRule`` in ``_DECLARED`` plus its pick function; adding a condition of
``ralm eval ppl`` for it is one entry in the registry.

A pick function reads one retrieval's ``Row``: its index (``window``: the seeded random draw depends on
it), the targets' NLL and the ranking tokens' log-probability with no passage, and per candidate, in BM25
order, its BM25 score, the targets' NLL and the ranking tokens' log-probability with it (None where nothing
was scored). A comparison table's row
(``ralm.eval.ppl.records.WindowScores``) is one; ``ralm.train.decision`` builds them from data-gen rows.
Ties go to the earlier (higher BM25) candidate, as ``torch.argmin`` does in eval_lm.py; between passages
and no passage, no passage wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from ralm.ranking import best_first, first_smallest

NO_RETRIEVAL = "no-retrieval"
CONTEXT_MATCHED = "no-retrieval-matched"
BM25 = "bm25"
RANDOM = "random"
BM25_ABOVE = "bm25-above"
ZERO_SHOT = "zero-shot"
ZERO_SHOT_ABOVE = "zero-shot-above"
TRAINED = "trained"
ORACLE = "oracle"
ORACLE_OR_NONE = "oracle-or-none"


class Candidate(Protocol):
    """One candidate passage as a pick function reads it."""

    @property
    def bm25(self) -> float | None: ...
    @property
    def nll(self) -> float | None: ...
    @property
    def rank_logprob(self) -> float | None: ...


class Row(Protocol):
    """One retrieval as a pick function reads it (at least one candidate)."""

    @property
    def window(self) -> int: ...
    @property
    def no_passage_nll(self) -> float | None: ...
    @property
    def no_passage_rank_logprob(self) -> float | None: ...
    @property
    def candidates(self) -> Sequence[Candidate]: ...


@dataclass(frozen=True)
class Scored:
    """A candidate built from columns (data-gen's rows): what a pick function reads of it."""

    bm25: float | None = None
    nll: float | None = None
    rank_logprob: float | None = None


@dataclass(frozen=True)
class ScoredRow:
    """A retrieval built from columns (data-gen's rows): what a pick function reads of it."""

    window: int
    candidates: tuple[Scored, ...]
    no_passage_nll: float | None = None
    no_passage_rank_logprob: float | None = None


Pick = Callable[[Row, int, "float | None"], "int | None"]
"""(row, seed, threshold) -> the candidate prepended (its BM25 rank), or None for no passage."""

Reads = Literal[
    "bm25", "lm-targets", "lm-ranking-tokens", "no-passage", "no-passage-ranking-tokens", "encoder", "seed"
]
"""What a rule reads to pick: BM25's scores, the LM's NLL of the true targets under each candidate (a bound,
not a method), the LM's log-prob of the prefix's own last tokens y' under each candidate, the targets' NLL
with no passage (a bound too), the log-prob of y' with no passage, a trained encoder's scores, or a seeded
draw."""


@dataclass(frozen=True)
class Cost:
    """What one retrieval of k candidates costs beyond BM25's search, in the units every device shares."""

    lm_inputs_per_candidate: int = 0
    """Frozen-LM inputs (passage + prefix) read to choose, per candidate (the zero-shot rule: one)."""
    encoder_pairs_per_candidate: int = 0
    """Encoder (prefix, passage) pairs scored to choose, per candidate (a trained reranker: one)."""
    lm_inputs_per_retrieval: int = 0
    """Frozen-LM inputs read once per retrieval whatever k (the prefix alone, to abstain by y')."""

    def lm_inputs(self, k: int) -> int:
        return self.lm_inputs_per_candidate * k + self.lm_inputs_per_retrieval

    def encoder_pairs(self, k: int) -> int:
        return self.encoder_pairs_per_candidate * k


@dataclass(frozen=True)
class ExportForm:
    """What an export whose decision is this rule holds, and what it tells a user."""

    needs: tuple[Literal["threshold", "rank_tokens", "weights"], ...]
    """The ``ralm_reranker.json`` fields (or the weights) a caller needs to play it; () for nothing."""
    exported: str
    """What the export plays, as ``ralm train``'s summary prints it."""
    note: str | None = None
    """What an export of this rule says first (the model card) and refuses with (an encoder call on a
    folder whose decision is not the trained model's); None for the trained model itself."""


@dataclass(frozen=True)
class PassageRule:
    """One rule, as every part of ralm sees it."""

    name: str
    """Its name on the command line, in results.json, in ``ralm_reranker.json`` and in summary.json."""
    label: str
    """What a report calls it."""
    pick: Pick | None
    """Its choice from a row; None: a model chooses (a trained reranker)."""
    reads: frozenset[Reads]
    cost: Cost = Cost()
    export: ExportForm | None = None
    """How it is exported, when the export decision may choose it (None: it cannot be)."""
    value_label: str | None = None
    """The label once its parameter is known (``{value:.1f}``: the threshold)."""

    @property
    def is_bound(self) -> bool:
        """It picks by the true targets: a bound on what a rule could gain, not a method."""
        return "lm-targets" in self.reads


def random_pick(seed: int, window: int, k: int) -> int:
    """A uniform draw among `k` candidates that depends only on the seed and the retrieval's index."""
    return int(np.random.default_rng([seed, window]).integers(k))


def _nothing(row: Row, seed: int, threshold: float | None) -> None:
    return None


def _top1(row: Row, seed: int, threshold: float | None) -> int:
    return 0


def _random(row: Row, seed: int, threshold: float | None) -> int:
    return random_pick(seed, row.window, len(row.candidates))


def _above(row: Row, seed: int, threshold: float | None) -> int | None:
    if threshold is None:
        raise ValueError(f"the {BM25_ABOVE} rule needs its threshold T")
    return 0 if max(c.bm25 for c in row.candidates) >= threshold else None


def _best_ranked(row: Row, seed: int, threshold: float | None) -> int:
    return best_first([c.rank_logprob for c in row.candidates])[0]


def rank_gain(row: Row) -> float:
    """How much the zero-shot rule's candidate raises the log-prob of y' over no passage (nats): the LM's
    own evidence that the passage informs the text it reads, against the context the passage displaces."""
    best = row.candidates[_best_ranked(row, 0, None)]
    return best.rank_logprob - row.no_passage_rank_logprob


def stacked_scores(
    f: Sequence[float], rank: Sequence[float], empty: Sequence[bool], weight: float, bias: float | None
) -> list[float]:
    """The stacked reranker's scores (``ralm train --zero-shot-prior``; ``ralm.train.lit_module`` trains
    them): each passage's f + a * y', the empty passage's f + a * y' + b, f the encoder's score of the pair
    and y' the LM's log-prob of the prefix's last tokens after the passage (the empty one: after none). With
    f = 0, a > 0 and b = a * M it is the zero-shot rule abstaining below a y' gain of M."""
    return [
        v + weight * r + ((bias or 0.0) if is_empty else 0.0)
        for v, r, is_empty in zip(f, rank, empty, strict=True)
    ]


def stacked_pick(row: Row, f: Sequence[float], weight: float, bias: float | None) -> int | None:
    """The stacked reranker's choice in `row` from its encoder's scores `f` (the candidates', then with a
    `bias`, abstention, the empty passage's): the best of ``stacked_scores``, the earlier candidate on a
    tie and a passage before no passage, as its ``order`` ranks."""
    rank = [c.rank_logprob for c in row.candidates]
    empty = [False] * len(rank)
    if bias is not None:
        rank.append(row.no_passage_rank_logprob)
        empty.append(True)
    best = best_first(stacked_scores(f, rank, empty, weight, bias))[0]
    return best if best < len(row.candidates) else None


def _ranked_above(row: Row, seed: int, threshold: float | None) -> int | None:
    if threshold is None:
        raise ValueError(f"the {ZERO_SHOT_ABOVE} rule needs its threshold M (nats of y')")
    return _best_ranked(row, seed, threshold) if rank_gain(row) >= threshold else None


def _smallest_nll(row: Row, seed: int, threshold: float | None) -> int:
    return first_smallest([c.nll for c in row.candidates])


def _smallest_or_none(row: Row, seed: int, threshold: float | None) -> int | None:
    best = _smallest_nll(row, seed, threshold)
    return None if row.no_passage_nll <= row.candidates[best].nll else best


_DECLARED = (
    PassageRule(
        NO_RETRIEVAL,
        "no retrieval",
        _nothing,
        frozenset(),
        export=ExportForm(
            (),
            "no retrieval (every ralm caller prepends nothing)",
            f"This export never retrieves: its export decision is `{NO_RETRIEVAL}` (no passage beat "
            "prepending nothing on the held-out decision prefixes), so prepend no passage; it is not a "
            "working reranker",
        ),
    ),
    PassageRule(
        CONTEXT_MATCHED, "no retrieval, context cut as BM25's passage cuts it", _nothing, frozenset()
    ),
    PassageRule(
        BM25,
        "BM25 top-1",
        _top1,
        frozenset({"bm25"}),
        export=ExportForm(
            (),
            "BM25's order (every ralm caller takes candidate 0)",
            f"This export ranks as BM25: its export decision is `{BM25}` "
            "(the trained picks did not beat BM25's top-1 on the held-out decision prefixes), "
            "so use BM25's own order (its top-1); the model's scores are not a reranker that beat BM25",
        ),
    ),
    PassageRule(RANDOM, "random of BM25 top-k", _random, frozenset({"seed"})),
    # The trivial abstention rule a learned reranker must not lose to.
    PassageRule(
        BM25_ABOVE,
        "BM25 top-1 if its score >= T",
        _above,
        frozenset({"bm25"}),
        export=ExportForm(
            ("threshold",),
            "BM25's top-1 when its score is at least T, else no passage (every ralm caller applies T)",
            f"This export retrieves by a threshold: its export decision is `{BM25_ABOVE}`, so prepend BM25's "
            "top-1 when its BM25 score is at least the `threshold` in ralm_reranker.json, else nothing; "
            "the model's scores are not what was chosen",
        ),
        value_label="BM25 top-1 if score >= {value:.1f}",
    ),
    PassageRule(
        ZERO_SHOT,
        "zero-shot LM rerank",
        _best_ranked,
        frozenset({"lm-ranking-tokens"}),
        Cost(lm_inputs_per_candidate=1),
        export=ExportForm(
            ("rank_tokens",),
            "the candidate whose y' the LM finds most likely (ralm eval ppl plays it; no encoder)",
            f"This export ranks with the LM itself: its export decision is `{ZERO_SHOT}`, so prepend the "
            "candidate under which the frozen LM finds the prefix's last `rank_tokens` tokens "
            "(ralm_reranker.json) most likely (`ralm eval ppl` plays it); the model's scores are not what "
            "was chosen",
        ),
    ),
    # The zero-shot rule that may abstain: the LM's own evidence on the text it reads decides both.
    PassageRule(
        ZERO_SHOT_ABOVE,
        "zero-shot LM rerank if its y' gain >= M",
        _ranked_above,
        frozenset({"lm-ranking-tokens", "no-passage-ranking-tokens"}),
        Cost(lm_inputs_per_candidate=1, lm_inputs_per_retrieval=1),
        export=ExportForm(
            ("threshold", "rank_tokens"),
            "the candidate whose y' the LM finds most likely when it raises the log-prob of y' over no "
            "passage by at least M nats, else no passage (ralm eval ppl plays it; no encoder)",
            "This export ranks and abstains with the LM itself: its export decision is "
            f"`{ZERO_SHOT_ABOVE}`, so prepend the candidate under which the frozen LM finds the prefix's "
            "last `rank_tokens` tokens (ralm_reranker.json) most likely, when their log-probability under "
            "it exceeds theirs with no passage by at least `threshold` nats, else nothing (`ralm eval ppl` "
            "plays it); the model's scores are not what was chosen",
        ),
        value_label="zero-shot LM rerank if its y' gain >= {value:.1f}",
    ),
    PassageRule(
        TRAINED,
        "trained reranker",
        None,
        frozenset({"encoder"}),
        Cost(encoder_pairs_per_candidate=1),
        export=ExportForm(("weights",), "the selected checkpoint"),
    ),
    PassageRule(ORACLE, "bound: best of k", _smallest_nll, frozenset({"lm-targets"})),
    PassageRule(
        ORACLE_OR_NONE, "bound: best of k or none", _smallest_or_none, frozenset({"lm-targets", "no-passage"})
    ),
)

RULES: dict[str, PassageRule] = {rule.name: rule for rule in _DECLARED}
"""Every rule by name; the exportable ones simplest first."""

EXPORTABLE: tuple[str, ...] = tuple(rule.name for rule in _DECLARED if rule.export is not None)
"""The rules the export decision may choose, simplest first: an exact tie goes to the later one."""


def rule_named(name: str) -> PassageRule:
    """The rule called `name` (a KeyError names the rules there are)."""
    try:
        return RULES[name]
    except KeyError:
        raise KeyError(f"no passage rule {name!r}: expected one of {', '.join(RULES)}") from None


def picks(
    rule: str, rows: Sequence[Row], *, seed: int = 0, threshold: float | None = None
) -> list[int | None]:
    """`rule`'s choice for each of `rows` (each with at least one candidate)."""
    pick = RULES[rule].pick
    if pick is None:
        raise ValueError(f"the {rule} rule is a model's choice, not a pick from the row")
    return [pick(row, seed, threshold) for row in rows]
