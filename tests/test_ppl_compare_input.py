"""`ralm eval ppl --compare`: bad input fails naming the option, before any work."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import pytest
from ppl_compare_fixtures import _run
from ppl_fixtures import ppl_setup  # noqa: F401

from ralm.errors import RalmInputError
from ralm.eval.ppl.conditions import Condition, parse_conditions
from ralm.eval.ppl.ppl_command import RerankingOptions, eval_ppl
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions


def test_bad_compare_options_fail_naming_the_option(ppl_setup, tmp_path):
    missing_lm = tmp_path / "no-such-model"  # an error about the LM would mean the checks came too late

    def fails(match, **kwargs):
        args = {
            "text": str(ppl_setup["text"]),
            "lm": LMOptions(str(missing_lm), device="cpu"),
            "output": str(tmp_path / "out"),
            "retrieval": RetrievalOptions(str(ppl_setup["index"])),
            "progress": False,
            **kwargs,
        }
        with pytest.raises(RalmInputError, match=match):
            if isinstance(args.get("compare"), str):  # --compare text, read as the command line reads it
                args["compare"] = parse_conditions(args["compare"])
            eval_ppl(**args)

    fails("--compare: cannot be combined with --no-retrieval", compare="bm25", no_retrieval=True)
    fails(
        "--compare: cannot be combined with --rerank-lm",
        compare="zero-shot",
        reranking=RerankingOptions(reranker="zero-shot", rerank_lm=str(missing_lm)),
    )
    fails(
        "--compare: cannot be combined with --reranker oracle",
        compare="bm25",
        reranking=RerankingOptions("oracle"),
    )
    fails("--compare: unknown condition 'bm-25'", compare="bm25,bm-25")
    fails("--compare: unknown condition ''", compare="")
    fails("--compare: condition 'oracle' given twice", compare="oracle,bm25,oracle")
    fails("--compare: condition 'mine' given twice", compare=f"mine={tmp_path},mine={tmp_path}")
    fails("--compare: 'oracle=.*' is not NAME=PATH", compare=f"oracle={tmp_path}")
    fails("--compare: 'my reranker=.*' is not NAME=PATH", compare=f"my reranker={tmp_path}")
    fails("--compare trained=.*: no such reranker folder", compare=f"trained={tmp_path / 'nothing'}")
    fails("--index: required with --compare", compare="no-retrieval", retrieval=RetrievalOptions())
    # A typed list is checked as its text would be: what a --compare list can say, and nothing twice.
    fails("--compare: no conditions", compare=[])
    fails("--compare: condition 'bm25' given twice", compare=[Condition("bm25", "bm25")] * 2)
    fails("is not what its spec 'zero-shot' says", compare=[Condition("zero-shot", "zero-shot", model="x")])
    fails(
        "--compare mine=.*: no such reranker folder", compare=[Condition("trained", "mine", str(missing_lm))]
    )
    with pytest.raises(TypeError, match="parse_conditions"):
        eval_ppl(str(ppl_setup["text"]), str(tmp_path / "out"), compare="bm25")
    assert not (tmp_path / "out").exists()


def test_zero_shot_in_the_list_needs_room_for_the_ranking_tokens(ppl_setup, tmp_path):
    # 110 + 4 targets fit in 128, but not with the 16 ranking tokens zero-shot scores too.
    window = WindowOptions(stride=4, max_passage_tokens=110)
    with pytest.raises(RalmInputError, match="--max-length 128: too small .* and 16 ranking tokens"):
        _run(ppl_setup, tmp_path / "out", tmp_path / "cache.jsonl", compare="bm25,zero-shot", window=window)


def test_a_threshold_rule_that_is_not_a_number_is_refused():
    from ralm.eval.ppl.conditions import parse_conditions

    with pytest.raises(RalmInputError, match="bm25-above=VALUE with VALUE a number"):
        parse_conditions("bm25,bm25-above=high")
    with pytest.raises(RalmInputError, match="zero-shot-above=VALUE with VALUE a number"):
        parse_conditions("zero-shot-above=")
    (rule,) = parse_conditions("bm25-above=inf")
    assert rule.kind == "bm25-above" and float(rule.recorded_reranker) == float("inf")
