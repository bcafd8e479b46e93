"""The condition engine's pure parts: parsing conditions, the one `pick` and its tie rule, and the planner's
LM rows per window, each against hand-written expectations (no LM needed)."""

from __future__ import annotations

import pytest

from ralm.errors import RalmInputError
from ralm.eval.ppl.conditions import Condition, RowPlan, parse_conditions, pick, plan_rows, single_condition
from ralm.eval.ppl.records import WindowScores


def row(bm25=(12.0, 9.0, 7.0), nll=None, rank=None, bare=None, window=3) -> WindowScores:
    """A window's table row with three candidates (LM values None where not scored)."""
    nll = nll or [None] * len(bm25)
    rank = rank or [None] * len(bm25)
    return WindowScores.from_json(
        {
            "window": window,
            "target_start": 40,
            "num_targets": 4,
            "no_passage_nll": bare,
            "candidates": [
                {"id": f"p{i}", "bm25": b, "nll": n, "rank_logprob": r, "copies_target": False}
                for i, (b, n, r) in enumerate(zip(bm25, nll, rank, strict=True))
            ],
        }
    )


def one(spec: str) -> Condition:
    (condition,) = parse_conditions(spec)
    return condition


def test_parsing_gives_one_typed_condition_per_item(tmp_path):
    got = parse_conditions(
        f"no-retrieval, bm25,random,zero-shot,oracle,oracle-or-none,bm25-above=2.5,mine={tmp_path}"
    )
    assert [c.kind for c in got] == [
        "no-retrieval",
        "bm25",
        "random",
        "zero-shot",
        "oracle",
        "oracle-or-none",
        "bm25-above",
        "trained",
    ]
    assert [c.name for c in got][-2:] == ["bm25-above", "mine"]
    assert got[-2].threshold == 2.5 and got[-1].model == str(tmp_path)
    assert [c.spec for c in got][-2:] == ["bm25-above=2.5", f"mine={tmp_path}"]
    assert [c.recorded_reranker for c in got] == [
        "none",
        "none",
        "random",
        "zero-shot",
        "oracle",
        "oracle-or-none",
        "2.5",
        str(tmp_path),
    ]


def test_the_single_run_options_name_the_same_conditions(tmp_path):
    assert single_condition(True, "none") == Condition("no-retrieval", "no-retrieval")
    assert single_condition(False, "none") == one("bm25")  # --reranker none is BM25's top-1
    assert single_condition(False, "oracle") == one("oracle")
    assert single_condition(False, "zero-shot") == one("zero-shot")
    other = single_condition(False, "zero-shot", rerank_lm="distilgpt2")
    assert other.model == "distilgpt2" and other.chooses_first and not other.ranks
    trained = single_condition(False, str(tmp_path))
    assert (trained.kind, trained.name, trained.model) == ("trained", "trained", str(tmp_path))
    with pytest.raises(RalmInputError, match="--reranker 'zero-shoot': expected none, zero-shot, oracle"):
        single_condition(False, "zero-shoot")


def test_pick_has_one_tie_rule_earlier_passage_then_no_passage():
    tied = row(nll=[5.0, 3.0, 3.0], rank=[-2.0, -1.0, -1.0], bare=3.0)
    assert pick(one("oracle"), tied) == 1  # the earlier of two equal candidates
    assert pick(one("zero-shot"), tied) == 1
    assert pick(one("oracle-or-none"), tied) is None  # no passage wins its tie with a passage
    assert pick(one("oracle-or-none"), row(nll=[5.0, 3.0, 3.0], bare=3.5)) == 1
    assert pick(one("bm25"), tied) == 0 and pick(one("no-retrieval"), tied) is None


def test_pick_of_the_conditions_that_read_no_lm_scores(tmp_path):
    blank = row()
    assert pick(one("bm25-above=12"), blank) == 0 and pick(one("bm25-above=12.5"), blank) is None
    # The draws, written down once from numpy (np.random.default_rng([seed, window]).integers(k)): seed 5,
    # window 3, k 3 draws 2 (over [window, seed] it would draw 0); seed 0 draws 1; k 4, windows 1-6: 033220.
    assert pick(one("random"), blank, seed=5) == 2 and pick(one("random"), blank, seed=0) == 1
    four = [pick(one("random"), row(bm25=(9.0, 8.0, 7.0, 6.0), window=w), seed=5) for w in range(1, 7)]
    assert four == [0, 3, 3, 2, 2, 0]
    trained = one(f"t={tmp_path}")
    assert pick(trained, blank, chosen=2) == 2 and pick(trained, blank, chosen=None) is None
    empty = row(bm25=())
    assert all(pick(one(s), empty, chosen=1) is None for s in ("bm25", "oracle", "random", f"t={tmp_path}"))


@pytest.mark.parametrize(
    ("spec", "chosen", "want"),
    [
        # One condition: only the rows it reads.
        ("no-retrieval", {}, RowPlan(bare=True, candidates=())),
        ("bm25", {}, RowPlan(bare=False, candidates=(0,))),
        ("random", {}, RowPlan(bare=False, candidates=(1,))),  # seed 0, window 3, k 3: see above
        ("bm25-above=10", {}, RowPlan(bare=False, candidates=(0,))),
        ("bm25-above=20", {}, RowPlan(bare=True, candidates=())),
        ("zero-shot", {}, RowPlan(bare=False, candidates=(0, 1, 2), rank_tokens=True)),
        ("oracle", {}, RowPlan(bare=False, candidates=(0, 1, 2))),
        ("oracle-or-none", {}, RowPlan(bare=True, candidates=(0, 1, 2))),
        ("t=TRAINED", {"t": 2}, RowPlan(bare=False, candidates=(2,))),
        ("t=TRAINED", {"t": None}, RowPlan(bare=True, candidates=())),  # the reranker abstained
        # Several: the union.
        ("no-retrieval,bm25", {}, RowPlan(bare=True, candidates=(0,))),
        ("bm25,t=TRAINED", {"t": 2}, RowPlan(bare=False, candidates=(0, 2))),
        ("bm25,oracle", {}, RowPlan(bare=False, candidates=(0, 1, 2))),
        ("oracle,zero-shot,no-retrieval", {}, RowPlan(bare=True, candidates=(0, 1, 2), rank_tokens=True)),
    ],
)
def test_the_planner_scores_only_the_rows_the_conditions_read(tmp_path, spec, chosen, want):
    conditions = parse_conditions(spec.replace("TRAINED", str(tmp_path)))
    assert plan_rows(conditions, row(), chosen) == want


def test_other_lm_zero_shot_needs_only_its_pick(tmp_path):
    other = single_condition(False, "zero-shot", rerank_lm="distilgpt2")
    assert plan_rows([other], row(), {"zero-shot": 1}) == RowPlan(bare=False, candidates=(1,))


def test_a_comparison_table_scores_the_baselines_and_a_window_without_candidates_one_row(tmp_path):
    bm25 = parse_conditions("bm25")
    assert plan_rows(bm25, row(), {}, baselines=True) == RowPlan(bare=True, candidates=(0, 1, 2))
    with_y = plan_rows(parse_conditions("zero-shot"), row(), {}, baselines=True)
    assert with_y == RowPlan(bare=True, candidates=(0, 1, 2), rank_tokens=True) and with_y.rows == 4
    every = parse_conditions(f"oracle,zero-shot,bm25,t={tmp_path}")
    for baselines in (False, True):
        assert plan_rows(every, row(bm25=(), window=0), {"t": None}, baselines=baselines) == RowPlan(True, ())
