"""The condition registry is the one list of conditions: every kind declared there parses, has the report's
words and a verdict behaviour, and a pick-only kind declared in a test (nowhere else) is parsed, planned,
scored by ``ralm eval ppl --compare``, put in the demo's table, labelled and compared by the verdicts."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppl_fixtures import ppl_setup  # noqa: F401

from ralm.eval.ppl.conditions import Condition, RowPlan, parse_conditions, pick, plan_rows
from ralm.eval.ppl.ppl_command import eval_ppl
from ralm.eval.ppl.records import CandidateScores, WindowRecord, WindowScores
from ralm.eval.ppl.registry import KINDS, ConditionKind, kind_named, references
from ralm.lm.options import LMOptions, WindowOptions
from ralm.passage_rules import PassageRule
from ralm.pipeline.labels import TRAINED_PREFIX, demo_conditions, label
from ralm.pipeline.verdicts import retrieving_comparisons, verdicts
from ralm.retrieval.options import RetrievalOptions

SECOND = ConditionKind(
    PassageRule(
        "bm25-second",
        "BM25's second candidate",
        lambda row, seed, threshold: min(1, len(row.candidates) - 1),
        frozenset({"bm25"}),
    ),
    "shown",
)
"""A new pick-only condition, declared here only: BM25's second candidate (its first when it has one)."""


def spec_of(kind: ConditionKind, folder: Path) -> str:
    """A ``--compare`` item naming a condition of `kind`."""
    return {"none": kind.name, "threshold": f"{kind.name}=2.5", "folder": f"mine={folder}"}[kind.value]


@pytest.mark.parametrize("name", list(KINDS))
def test_every_registered_kind_parses_and_says_how_it_is_judged(name, tmp_path):
    kind = KINDS[name]
    (condition,) = parse_conditions(spec_of(kind, tmp_path))
    assert condition.kind == name and condition.declared is kind
    assert parse_conditions(condition.spec) == [condition]  # the recorded spec reads back as the same
    assert kind_named(condition.name) is kind
    assert kind.verdict in ("reference", "judged", "shown")
    assert (kind.verdict == "reference") == (kind.reference is not None)
    assert (kind.pick is None) == (kind.value == "folder")  # only a reranker folder always chooses first


def test_every_condition_of_the_demo_table_has_a_label(tmp_path):
    """Fails when a kind is declared without the report's words (the report would print its bare name)."""
    trained = {f"{TRAINED_PREFIX}0": tmp_path, f"{TRAINED_PREFIX}1": tmp_path}
    conditions = demo_conditions({"bm25-above": 2.0, "zero-shot-above": 1.5}, trained)
    assert {c.kind for c in conditions} == set(KINDS)  # every declared kind is in the demo's table
    labels = [label(c.name) for c in conditions]
    for condition, words in zip(conditions, labels, strict=True):
        assert words.strip() and words != condition.name, condition
    assert len(set(labels)) == len(labels)  # no two rows of the table read the same
    assert label(f"{TRAINED_PREFIX}1") == "trained reranker, seed 1"
    assert label(f"{TRAINED_PREFIX}1", {"exported": "trained"}) == "trained reranker, seed 1"
    assert label(f"{TRAINED_PREFIX}2", {"exported": "zero-shot"}) == "seed 2, exported zero-shot"
    stacked = label(f"{TRAINED_PREFIX}0", {"exported": "stacked"})  # it reads the LM: the row says so
    assert stacked == "stacked reranker (zero-shot LM rule + encoder), seed 0"
    assert label("bm25-above", {"rule": "3.25"}) == "BM25 top-1 if score >= 3.2"
    assert label("zero-shot-above", {"rule": "1.5"}) == "zero-shot LM rerank if its y' gain >= 1.5"


def test_the_demo_table_and_the_references_keep_their_order(tmp_path):
    """The demo's ``--compare`` list and report.json's comparison keys are in the order of existing runs."""
    fitted = {"bm25-above": 1.5, "zero-shot-above": 2.0}
    names = [c.name for c in demo_conditions(fitted, {"trained-seed0": tmp_path})]
    assert names == [
        "no-retrieval",
        "no-retrieval-matched",
        "bm25",
        "random",
        "zero-shot",
        "bm25-above",
        "zero-shot-above",
        "trained-seed0",
        "oracle",
        "oracle-or-none",
    ]
    assert [c.name for c in demo_conditions(None, {})] == [
        n for n in names if not n.endswith("-above") and not n.startswith("trained")
    ]
    only_t = [c.name for c in demo_conditions({"bm25-above": 1.5}, {})]
    assert "bm25-above" in only_t and "zero-shot-above" not in only_t
    assert [k.reference.key for k in references()] == [
        "vs_no_retrieval",
        "vs_bm25",
        "vs_matched",
        "vs_threshold",
    ]


def test_a_pick_only_condition_is_one_declaration(monkeypatch):
    monkeypatch.setitem(KINDS, SECOND.name, SECOND)
    conditions = parse_conditions("no-retrieval,bm25-second")
    bm25 = [CandidateScores(f"p{i}", score) for i, score in enumerate((5.0, 4.0, 1.0))]
    row = WindowScores(window=2, target_start=40, num_targets=4, no_passage_nll=9.0, candidates=bm25)
    assert pick(conditions[1], row) == 1
    assert plan_rows(conditions, row, {}) == RowPlan(bare=True, candidates=(1,))
    assert [c.name for c in demo_conditions(None, {})][-1] == "bm25-second"  # declared last here
    assert label("bm25-second") == "BM25's second candidate"
    windows = [WindowRecord(i, 0, 0, 10 + i, 4, 8.0 + i % 3, None, None, None, False) for i in range(12)]
    rows = {"no-retrieval": windows, "bm25": windows, "bm25-second": windows}
    comparisons = retrieving_comparisons(rows, 10, resamples=50)
    assert set(comparisons["bm25-second"]) >= {"vs_no_retrieval", "vs_bm25"}
    assert verdicts("related", comparisons)[0].startswith("BM25 top-1 vs no retrieval")


def test_a_declared_pick_only_condition_runs_in_eval_ppl_compare(monkeypatch, ppl_setup, tmp_path):
    """Scored from the table's own rows: its windows hold the second candidate's NLL in candidates.jsonl."""
    monkeypatch.setitem(KINDS, SECOND.name, SECOND)
    out = tmp_path / "compare"
    eval_ppl(
        text=str(ppl_setup["text"]),
        output=str(out),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", dtype="float32", max_length=128),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=3),
        max_tokens=200,
        retrieval_cache=str(tmp_path / "cache.jsonl"),
        progress=False,
        window=WindowOptions(stride=16, max_passage_tokens=32),
        compare=[Condition(kind, kind) for kind in ("no-retrieval", "bm25", "bm25-second")],
        print_table=False,
    )
    table = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    rows = [json.loads(x) for x in (out / "bm25-second" / "windows.jsonl").read_text().splitlines()]
    assert len(rows) == len(table) > 2 and sum(len(t["candidates"]) > 1 for t in table) > 2
    for t, r in zip(table, rows, strict=True):
        index = min(1, len(t["candidates"]) - 1) if t["candidates"] else None
        assert r["chosen_rank"] == index
        assert r["nll"] == (t["no_passage_nll"] if index is None else t["candidates"][index]["nll"])
    results = json.loads((out / "bm25-second" / "results.json").read_text())
    assert results["config"]["mode"] == "bm25-second" and results["config"]["reranker"] == "bm25-second"


def test_a_new_condition_needs_the_fields_that_make_it_one():
    """A declaration without its label or verdict behaviour is refused where it is written."""
    with pytest.raises(TypeError):
        PassageRule("nameless", pick=lambda r, s, t: 0, reads=frozenset())  # no label
    with pytest.raises(TypeError):
        ConditionKind(
            PassageRule("unjudged", "a label", lambda r, s, t: 0, frozenset())
        )  # no verdict behaviour
    assert Condition("bm25", "bm25").declared is KINDS["bm25"]


def test_a_seeds_no_lm_export_is_compared_with_the_zero_shot_rule_it_does_without():
    """Its NLL is the zero-shot rule's plus 4 · log 1.1 in every window of 4 targets: token perplexity
    exactly 10% higher, in every resample (the interval is the point); the main export gets no such row."""
    import math

    def windows(shift: float) -> list[WindowRecord]:
        return [
            WindowRecord(i, 0, 0, 10 + i, 4, 8.0 + i % 3 + shift, None, None, None, False) for i in range(12)
        ]

    rows = {
        "no-retrieval": windows(1.0),
        "bm25": windows(0.5),
        "zero-shot": windows(0.0),
        f"{TRAINED_PREFIX}0": windows(0.0),
        "no-lm-seed0": windows(4 * math.log(1.1)),
    }
    comparisons = retrieving_comparisons(rows, 10, resamples=50)
    change = comparisons["no-lm-seed0"]["vs_zero_shot"]
    assert change["change"] == change["low"] == change["high"] == pytest.approx(0.10)
    assert "vs_zero_shot" not in comparisons[f"{TRAINED_PREFIX}0"]
    lines = verdicts("related", comparisons, {"no-lm-seed0": "bm25-above"})
    assert lines[-1] == (
        "seed 0, no LM: exported bm25-above vs the zero-shot LM rerank, which it does without: "
        "+10.0% [+10.0, +10.0], higher"
    )


def test_the_report_names_a_seeds_trained_stacked_export_stacked_and_any_rule_by_its_name(tmp_path):
    """summary.json's decision as the report's rows read it: a trained model with the zero-shot prior is
    ``stacked`` (its row then says it reads the LM), a plain one ``trained``, a rule its own name."""
    import json

    from ralm.pipeline.report import _decision

    cases = [
        ("trained", True, "stacked"),
        ("trained", False, "trained"),
        ("zero-shot-above", True, "zero-shot-above"),
    ]
    for decision, stacked, expected in cases:
        (tmp_path / "summary.json").write_text(
            json.dumps({"decision": decision, "config": {"zero_shot_prior": stacked}})
        )
        assert _decision(tmp_path) == expected
