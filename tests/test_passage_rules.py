"""The passage rules are one vocabulary: each name is spelled in one module of ralm/, each pick function
agrees with an independent numpy computation on random rows, and the rules the export may choose are the
ones the decision, the export's record and its card know."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from ralm.passage_rules import (
    BM25,
    BM25_ABOVE,
    EXPORTABLE,
    NO_RETRIEVAL,
    ORACLE,
    ORACLE_OR_NONE,
    RULES,
    TRAINED,
    ZERO_SHOT,
    ZERO_SHOT_ABOVE,
    Scored,
    ScoredRow,
    picks,
)

PACKAGE = Path(__file__).resolve().parents[1] / "ralm"
ALSO_SPELLED = {BM25: {"ralm/retrieval/index_meta.py"}}
"""Where a rule's name is also a literal with another meaning: ``"bm25"`` keys the BM25 parameters (k1, b)
in an index's ``ralm_index.json``, a file format field."""


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (a module's, a class's, a function's) or bare
    string statements (attribute docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def test_each_rule_name_is_a_string_literal_in_one_module():
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in RULES and id(node) not in skip:
                where[node.value].add(path.relative_to(PACKAGE.parent).as_posix())
    for name in RULES:
        assert where[name] - ALSO_SPELLED.get(name, set()) == {"ralm/passage_rules.py"}, (name, where[name])


def _rows(seed: int, count: int = 300) -> list[ScoredRow]:
    """Random rows with ties: values drawn from a few levels, so equal scores are common."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        k = int(rng.integers(1, 6))
        levels = rng.integers(0, 3, size=(3, k)).astype(float)
        candidates = tuple(
            Scored(bm25=levels[0, j] * 5, nll=levels[1, j], rank_logprob=-levels[2, j]) for j in range(k)
        )
        none = (float(rng.integers(0, 3)), -float(rng.integers(0, 3)))
        rows.append(ScoredRow(i, candidates, no_passage_nll=none[0], no_passage_rank_logprob=none[1]))
    return rows


def test_the_pick_functions_agree_with_numpy():
    """argmax/argmin return the first extreme: the earlier (higher BM25) candidate wins a tie; no passage
    wins a tie with the best passage."""
    rows = _rows(0)
    rank = [np.array([c.rank_logprob for c in r.candidates]) for r in rows]
    nll = [np.array([c.nll for c in r.candidates]) for r in rows]
    bm25 = [np.array([c.bm25 for c in r.candidates]) for r in rows]
    assert picks(ZERO_SHOT, rows) == [int(np.argmax(v)) for v in rank]
    assert picks(ORACLE, rows) == [int(np.argmin(v)) for v in nll]
    assert picks(ORACLE_OR_NONE, rows) == [
        None if r.no_passage_nll <= v.min() else int(np.argmin(v)) for r, v in zip(rows, nll, strict=True)
    ]
    assert picks(BM25_ABOVE, rows, threshold=5.0) == [0 if v.max() >= 5.0 else None for v in bm25]
    for m in (-1.0, 0.0, 1.0):  # the zero-shot pick when its y' log-prob beats no passage's by at least M
        assert picks(ZERO_SHOT_ABOVE, rows, threshold=m) == [
            int(np.argmax(v)) if v.max() - r.no_passage_rank_logprob >= m else None
            for r, v in zip(rows, rank, strict=True)
        ]
    assert picks(BM25, rows) == [0] * len(rows)
    assert picks(NO_RETRIEVAL, rows) == [None] * len(rows)
    for rule in (BM25_ABOVE, ZERO_SHOT_ABOVE):
        with pytest.raises(ValueError, match="threshold"):
            picks(rule, rows)
    with pytest.raises(ValueError, match="model"):
        picks(TRAINED, rows)


def test_the_exportable_rules_are_the_decisions_choices_and_the_exports_records():
    from ralm.rerank.export_record import DECISIONS
    from ralm.rerank.model_card import DECISION_NOTES
    from ralm.train.decision import CHOICES

    # simplest first
    assert EXPORTABLE == CHOICES == (NO_RETRIEVAL, BM25, BM25_ABOVE, ZERO_SHOT, ZERO_SHOT_ABOVE, TRAINED)
    assert set(DECISIONS) == set(EXPORTABLE)
    assert set(DECISION_NOTES) == set(EXPORTABLE) - {TRAINED}  # every rule but the model itself warns
    for name in EXPORTABLE:
        assert f"`{name}`" in DECISION_NOTES.get(name, f"`{name}`")  # the note names its own decision


def test_cost_per_retrieval():
    """The zero-shot rule reads one LM input per candidate (one more to abstain), a trained reranker one
    encoder pair, BM25 none."""
    k = 16
    assert (RULES[ZERO_SHOT].cost.lm_inputs(k), RULES[ZERO_SHOT].cost.encoder_pairs(k)) == (k, 0)
    # abstaining by y' reads the prefix alone once more
    assert (RULES[ZERO_SHOT_ABOVE].cost.lm_inputs(k), RULES[ZERO_SHOT_ABOVE].cost.encoder_pairs(k)) == (
        k + 1,
        0,
    )
    assert (RULES[TRAINED].cost.lm_inputs(k), RULES[TRAINED].cost.encoder_pairs(k)) == (0, k)
    assert (RULES[BM25_ABOVE].cost.lm_inputs(k), RULES[BM25_ABOVE].cost.encoder_pairs(k)) == (0, 0)
    assert [name for name, rule in RULES.items() if rule.is_bound] == [ORACLE, ORACLE_OR_NONE]
