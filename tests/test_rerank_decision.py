"""The export decision: made on prefixes that chose nothing, sized to see a difference, and obeyed by
every caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralm.errors import RalmInputError
from ralm.train.dataset import load_rerank_data
from ralm.train.settings import LoaderOptions
from tests.rerank_fixtures import KEYWORD_LOGPROB, keyword_rows, save_rows

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "configs" / "train" / "paper.yaml"


def test_the_two_held_out_shares_must_leave_prefixes_to_train_on():
    with pytest.raises(RalmInputError, match="decision_fraction=0.5: with val_fraction=0.5"):
        LoaderOptions(val_fraction=0.5, decision_fraction=0.5)


ZERO_SHOT_META = {"format": "ralm-rerank-data/2", "rank_tokens": 16, "k": 3}


def _zero_shot_best_data(tmp_path, real_documents, meta: dict) -> Path:
    """40 prefixes of k = 3 whose key-word candidate is the LM's best on the targets (``KEYWORD_LOGPROB``
    against -9) and on y' (-1 against -2, as with no passage): the zero-shot rule picks the best."""
    rows = keyword_rows(real_documents, 40, k=3, seed=2)
    for row in rows:
        key = max(range(3), key=lambda i: row["lm_logprobs"][i])
        row["lm_logprobs"] = [KEYWORD_LOGPROB if i == key else -9.0 for i in range(3)]
        row["lm_rank_logprobs"] = [-1.0 if i == key else -2.0 for i in range(3)]
        row["no_retrieval_rank_logprob"] = -2.0
    return save_rows(rows, tmp_path / "data", meta=meta)


def _run_paper_config(tmp_path, data: Path, tiny_encoder_dir, *extra: str) -> dict:
    from ralm.train.train_command import main

    main(
        [
            "--config",
            str(PAPER),
            "--data",
            str(data),
            "--output",
            str(tmp_path / "out"),
            "--name",
            str(tiny_encoder_dir),
            "--max-pair-tokens",
            "40",
            "--max-prefix-tokens",
            "12",
            "--global-batch-size",
            "4",
            "--batch-size",
            "4",
            "--max-steps",
            "3",
            "--warmup-steps",
            "1",
            "--val-every",
            "1",
            "--save-every",
            "1",
            "--num-workers",
            "0",
            "--val-fraction",
            "0.25",
            "--decision-fraction",
            "0.25",
            "--accelerator",
            "cpu",
            "--devices",
            "1",
            "--wandb",
            "off",
            "--enable-progress-bar",
            "false",
            *extra,
        ]
    )
    return json.loads((tmp_path / "out" / "summary.json").read_text())


def test_the_paper_config_without_abstain_still_checks_the_export_against_bm25(
    tmp_path, real_documents, tiny_encoder_dir, capsys
):
    """configs/train/paper.yaml (no --abstain, no --bm25-prior): BM25's top-1 is the LM's best on every
    prefix, so no checkpoint can beat it; the comparison is made on the decision prefixes, recorded, and
    the export is BM25's order, which every caller then takes."""
    from ralm.rerank.inference import PredictiveReranker

    rows = keyword_rows(real_documents, 40, k=3, seed=2)
    for row in rows:
        row["lm_logprobs"] = [-5.0, -7.0, -9.0]
    data = save_rows(rows, tmp_path / "data")
    summary = _run_paper_config(tmp_path, data, tiny_encoder_dir)
    split = load_rerank_data(str(data), abstain=False, val_fraction=0.25, decision_fraction=0.25, seed=0)
    evidence = summary["decision_evidence"]
    assert summary["decision"] == "bm25" and list(evidence["comparisons"]) == ["trained - bm25"]
    assert evidence["comparisons"]["trained - bm25"]["items"] == len(split.decision_rows) > 0
    assert evidence["selection"]["prefixes"] == len(split.val_rows) and evidence["overlap"] == 0
    assert evidence["decision"]["documents"] == len({rows[i]["doc_id"] for i in split.decision_rows})
    assert evidence["selection"]["validations"] == 3 and summary["best_gain_recovered"] == 0.0
    info = json.loads((Path(summary["reranker"]) / "ralm_reranker.json").read_text())
    assert info["decision"] == "bm25" and info["decision_evidence"] == evidence
    reranker = PredictiveReranker.from_pretrained(summary["reranker"])
    candidates = [[r["candidate_texts"][2], r["candidate_texts"][0]] for r in rows[:8]]
    assert reranker.rank([r["prefix"] for r in rows[:8]], candidates) == [0] * 8  # BM25's top-1, not scores
    card = (Path(summary["reranker"]) / "README.md").read_text()
    assert card.split("# ralm predictive reranker\n\n", 1)[1].startswith("**This export ranks as BM25")
    printed = capsys.readouterr().out
    assert f"decision      bm25 on {len(split.decision_rows)} decision prefixes" in printed
    sentence_transformers = pytest.importorskip("sentence_transformers")
    with pytest.raises(ValueError, match="This export ranks as BM25"):  # its scores are not what won
        sentence_transformers.CrossEncoder(summary["reranker"], device="cpu", trust_remote_code=True)


def test_a_no_retrieval_export_without_a_step0_model_holds_no_weights_and_says_so(
    tmp_path, real_documents, tiny_encoder_dir
):
    """--abstain without --bm25-prior: no passage beats every candidate, so the decision is no retrieval;
    the folder then holds no trained weights, its card and snippets say first that it never retrieves,
    ralm declines and the CrossEncoder path refuses with that note."""
    from ralm.rerank.inference import PredictiveReranker
    from ralm.rerank.model_card import DECISION_NOTES

    rows = keyword_rows(real_documents, 40, k=3, seed=2)
    for row in rows:
        row["lm_logprobs"] = [-5.0, -7.0, -9.0]
        row["no_retrieval_logprob"] = -1.0
    data = save_rows(rows, tmp_path / "data")
    summary = _run_paper_config(tmp_path, data, tiny_encoder_dir, "--abstain", "true")
    folder = Path(summary["reranker"])
    assert summary["decision"] == "no-retrieval" and summary["best_gain_recovered"] is None
    assert "zero-shot" not in summary["decision_evidence"]["promise"]["tests"]  # format /1: no y' column
    assert summary["exported_checkpoint"] is None and summary["best_checkpoint"].endswith(".ckpt")
    assert not list(folder.glob("*.safetensors")) and not list(folder.glob("*.bin"))
    card = (folder / "README.md").read_text()
    body = card.split("# ralm predictive reranker\n\n", 1)[1]
    assert body.startswith("**This export never retrieves")
    blocks = card.split("```python\n")[1:]
    assert len(blocks) == 3 and all(b.startswith("# This export never retrieves") for b in blocks)
    reranker = PredictiveReranker.from_pretrained(folder)
    assert reranker.rank(["a prefix", "another"], [["one", "two"], ["three"]]) == [None, None]
    with pytest.raises(RalmInputError, match="never retrieves.*holds no model weights"):
        reranker.score(["a prefix"], [["one"]])
    sentence_transformers = pytest.importorskip("sentence_transformers")
    with pytest.raises(ValueError, match="This export never retrieves") as refused:
        sentence_transformers.CrossEncoder(str(folder), device="cpu", trust_remote_code=True)
    assert str(refused.value) == DECISION_NOTES["no-retrieval"]


def test_the_lms_own_y_prime_score_is_exported_when_it_is_the_best_rule(
    tmp_path, real_documents, tiny_encoder_dir
):
    """Format /2 records log p(y' | [d_i; x]): where it points at the key-word candidate (the LM's best),
    the zero-shot rule gains 3 nats a prefix over no passage on every data-gen prefix and beats BM25's
    random top-1 on the decision prefixes, so it is exported; the export holds its y' length, the card
    says the LM ranks, and ralm's `rank` refuses without the LM. Data without the column (/1) has no such
    rule (the other tests of this file). A budget of k = 3 LM inputs keeps out ``zero-shot-above``, which
    reads the prefix alone once more (here it would tie: the y' gain is the same on every prefix)."""
    from ralm.rerank.inference import PredictiveReranker
    from ralm.rerank.model_card import DECISION_NOTES
    from tests.rerank_fixtures import KEYWORD_LOGPROB, NO_RETRIEVAL_LOGPROB

    data = _zero_shot_best_data(tmp_path, real_documents, {"format": "ralm-rerank-data/2", "rank_tokens": 16})
    summary = _run_paper_config(
        tmp_path, data, tiny_encoder_dir, "--abstain", "true", "--max-rerank-lm-inputs", "3"
    )
    evidence = summary["decision_evidence"]
    assert evidence["costs"]["over_budget"] == ["zero-shot-above"]
    tests = evidence["promise"]["tests"]
    assert tests["zero-shot"]["prefixes"] == "every data-gen prefix" and tests["zero-shot"]["items"] == 40
    assert tests["zero-shot"]["difference"] == pytest.approx(KEYWORD_LOGPROB - NO_RETRIEVAL_LOGPROB)
    assert evidence["decision"]["mean_logprob"]["zero-shot"] == pytest.approx(KEYWORD_LOGPROB)
    assert evidence["comparisons"]["zero-shot - bm25"]["difference"] > 0
    if summary["decision"] != "trained":  # three steps may learn the key word; only a tie goes to trained
        assert summary["decision"] == "zero-shot"
        info = json.loads((Path(summary["reranker"]) / "ralm_reranker.json").read_text())
        assert info["decision"] == "zero-shot" and info["rank_tokens"] == 16
        card = (Path(summary["reranker"]) / "README.md").read_text()
        assert card.split("# ralm predictive reranker\n\n", 1)[1].startswith(
            "**This export ranks with the LM"
        )
        with pytest.raises(RalmInputError, match="cannot order passages without that LM"):
            PredictiveReranker.from_pretrained(summary["reranker"]).rank(["a prefix"], [["one", "two"]])
        sentence_transformers = pytest.importorskip("sentence_transformers")
        with pytest.raises(ValueError, match="This export ranks with the LM") as refused:  # not its scores
            sentence_transformers.CrossEncoder(summary["reranker"], device="cpu", trust_remote_code=True)
        assert str(refused.value) == DECISION_NOTES["zero-shot"]
    else:
        assert evidence["decision"]["mean_logprob"]["trained"] == pytest.approx(KEYWORD_LOGPROB)


def test_each_rules_cost_per_retrieval_is_counted_from_the_vocabulary():
    """k = 4 candidates at 100 ms per LM input and 2 ms per encoder pair: the zero-shot rule reads 4 LM
    inputs (400 ms), a reranker trained with abstention scores 5 pairs, the empty passage too (10 ms), the
    BM25 rules nothing; without a measured LM rate the zero-shot rule's time is unknown."""
    from ralm.train.decision import _lm_ms, rule_costs, within_budget

    costs = rule_costs(4, abstain=True, lm_ms=100.0, encoder_ms=2.0)
    assert costs["zero-shot"] == {"lm_inputs": 4, "encoder_pairs": 0, "ms": 400.0}
    assert costs["zero-shot-above"] == {"lm_inputs": 5, "encoder_pairs": 0, "ms": 500.0}  # + the prefix alone
    assert costs["trained"] == {"lm_inputs": 0, "encoder_pairs": 5, "ms": 10.0}
    assert (
        costs["bm25-above"]
        == costs["bm25"]
        == costs["no-retrieval"]
        == {"lm_inputs": 0, "encoder_pairs": 0, "ms": 0.0}
    )
    assert rule_costs(4, abstain=False, lm_ms=None, encoder_ms=2.0)["zero-shot"]["ms"] is None
    assert rule_costs(4, abstain=False, lm_ms=None, encoder_ms=2.0)["trained"]["ms"] == 8.0
    assert [within_budget(r, 4, 0) for r in ("trained", "zero-shot", "bm25")] == [True, False, True]
    assert within_budget("zero-shot", 4, 4) and not within_budget("zero-shot", 4, 3)
    assert within_budget("zero-shot", 4, None) and not within_budget("zero-shot", 0, 0)
    assert _lm_ms({"summary": {"pairs_per_second": 4.0}}) == 250.0 and _lm_ms({}) is None


def test_a_budget_of_no_lm_inputs_keeps_the_zero_shot_rule_from_the_export(
    tmp_path, real_documents, tiny_encoder_dir
):
    """The data of the test above, where the zero-shot rule is the best: with --max-rerank-lm-inputs 0 it
    is not exported, the evidence says the budget excluded it, and the card and summary state each rule's
    cost per retrieval."""

    data = _zero_shot_best_data(tmp_path, real_documents, ZERO_SHOT_META)
    summary = _run_paper_config(
        tmp_path, data, tiny_encoder_dir, "--abstain", "true", "--max-rerank-lm-inputs", "0"
    )
    costs = summary["decision_evidence"]["costs"]
    assert summary["decision"] != "zero-shot" and costs["over_budget"] == ["zero-shot-above", "zero-shot"]
    assert "zero-shot" not in summary["decision_evidence"]["decision"]["mean_logprob"]
    assert costs["max_lm_inputs"] == 0 and summary["config"]["max_rerank_lm_inputs"] == 0
    assert costs["per_retrieval"]["zero-shot"]["lm_inputs"] == 3
    assert costs["per_retrieval"]["trained"]["encoder_pairs"] == 4  # three candidates and the empty passage
    card = (Path(summary["reranker"]) / "README.md").read_text()
    assert "**Cost per retrieval**" in card and "zero-shot 3 LM inputs" in card
    assert "budget 0 LM inputs per retrieval, which excludes zero-shot-above, zero-shot" in card


def test_the_no_lm_export_is_the_budget_decision_beside_the_best_rule(
    tmp_path, real_documents, tiny_encoder_dir
):
    """--no-lm-export on the data of the test above (the zero-shot rule the best): OUTPUT/reranker holds the
    zero-shot export, OUTPUT/reranker-no-lm the rule that a separate run under --max-rerank-lm-inputs 0
    exports from the same seed, with the same evidence of the ranking; summary.json records both."""
    from ralm.rerank.inference import PredictiveReranker

    data = _zero_shot_best_data(tmp_path, real_documents, ZERO_SHOT_META)
    both = _run_paper_config(
        tmp_path / "both", data, tiny_encoder_dir, "--abstain", "true", "--no-lm-export", "true"
    )
    budget = _run_paper_config(
        tmp_path / "budget", data, tiny_encoder_dir, "--abstain", "true", "--max-rerank-lm-inputs", "0"
    )
    assert both["decision"] in ("zero-shot", "zero-shot-above")
    no_lm = both["no_lm_export"]
    assert no_lm["decision"] == budget["decision"] and no_lm["over_budget"] == [
        "zero-shot-above",
        "zero-shot",
    ]
    folder = PredictiveReranker.from_pretrained(no_lm["reranker"])
    assert folder.decision == budget["decision"] and Path(no_lm["reranker"]).name == "reranker-no-lm"
    record = json.loads((Path(no_lm["reranker"]) / "ralm_reranker.json").read_text())
    assert record["decision_evidence"]["comparisons"] == budget["decision_evidence"]["comparisons"]
    assert (
        _run_paper_config(tmp_path / "plain", data, tiny_encoder_dir, "--abstain", "true")["no_lm_export"]
        is None
    )


def test_the_report_and_the_card_state_each_rules_cost(tmp_path):
    """One seed's summary.json with the costs the decision records: the report's decision line and the
    card's cost line both give them, the budget and what it excluded."""
    from ralm.pipeline.report import decision_lines
    from ralm.rerank.model_card import cost_text
    from ralm.train.decision import rule_costs

    costs = {
        "per_retrieval": rule_costs(4, abstain=True, lm_ms=100.0, encoder_ms=2.0),
        "max_lm_inputs": 0,
        "over_budget": ["zero-shot"],
    }
    expected = (
        "no-retrieval nothing beyond BM25; bm25 nothing beyond BM25; bm25-above nothing beyond BM25; "
        "zero-shot 4 LM inputs (~400.0 ms); zero-shot-above 5 LM inputs (~500.0 ms); "
        "trained 5 encoder pairs (~10.0 ms); "
        "budget 0 LM inputs per retrieval, which excludes zero-shot"
    )
    assert cost_text(costs) == expected and cost_text({}) == ""
    (tmp_path / "summary.json").write_text(
        json.dumps({"decision": "trained", "decision_evidence": {"costs": costs}})
    )
    (line,) = decision_lines({"seed 0": tmp_path})
    assert line.endswith(f"; cost per retrieval: {expected}")
    # A seed's no-LM export is priced against the zero-shot rule it does without: 10 ms / 400 ms.
    no_lm = {"decision": "trained", "reranker": "reranker-no-lm"}
    (tmp_path / "summary.json").write_text(
        json.dumps({"decision": "zero-shot", "no_lm_export": no_lm, "decision_evidence": {"costs": costs}})
    )
    (line,) = decision_lines({"seed 0": tmp_path})
    assert line.endswith(
        "; with no LM at rerank time: exported trained "
        "(cost per retrieval: ~10 ms, 0.025x the zero-shot rule's ~400 ms)"
    )


def test_the_lms_own_abstention_is_exported_where_the_passage_helps_only_the_text_it_informs(
    tmp_path, real_documents, tiny_encoder_dir
):
    """Half the documents are informed by a candidate (the key word's: the target gains 3 nats over no
    passage, and y' gains 2 under it), half by none (every candidate costs the target 3 nats, and y' loses
    half a nat under the LM's favourite). The zero-shot rule then gains on the first and loses as much on
    the second, so it fails the promise; "zero-shot-above", M fitted on the training prefixes at the y'
    gain of 2, retrieves on the first alone and is exported with M and its y' length. ralm's `order`
    refuses it without the LM, and ``ralm eval ppl`` plays it on the evaluated LM's rows."""
    from ralm.eval.ppl.chooser_loading import play_exports
    from ralm.eval.ppl.conditions import Condition, pick
    from ralm.eval.ppl.records import CandidateScores, WindowScores
    from ralm.rerank.inference import PredictiveReranker
    from tests.rerank_fixtures import KEYWORD_LOGPROB, NO_RETRIEVAL_LOGPROB

    rows = keyword_rows(real_documents, 40, k=3, seed=2)
    for row in rows:
        informed = int(row["doc_id"].removeprefix("doc")) % 2 == 0
        key = max(range(3), key=lambda i: row["lm_logprobs"][i])
        row["lm_logprobs"] = [KEYWORD_LOGPROB if i == key and informed else -9.0 for i in range(3)]
        row["lm_rank_logprobs"] = [-1.0 if i == key else -2.0 for i in range(3)]
        row["no_retrieval_rank_logprob"] = -3.0 if informed else -0.5
    meta = {"format": "ralm-rerank-data/2", "rank_tokens": 16}
    data = save_rows(rows, tmp_path / "data", meta=meta)
    summary = _run_paper_config(tmp_path, data, tiny_encoder_dir, "--abstain", "true")
    evidence = summary["decision_evidence"]
    tests = evidence["promise"]["tests"]
    assert evidence["promise"]["rank_threshold"] == summary["rank_threshold"] == 2.0
    assert tests["zero-shot"]["difference"] == pytest.approx(0.0) and not tests["zero-shot"]["passes"]
    assert tests["zero-shot-above"]["passes"] and tests["zero-shot-above"]["prefixes"] == "decision prefixes"
    decided = evidence["decision"]["mean_logprob"]
    informed = [r for r in rows if int(r["doc_id"].removeprefix("doc")) % 2 == 0]
    assert decided["zero-shot-above"] > decided["no-retrieval"] == pytest.approx(NO_RETRIEVAL_LOGPROB)
    assert evidence["costs"]["per_retrieval"]["zero-shot-above"]["lm_inputs"] == 4
    if summary["decision"] == "trained":  # three steps may learn the key word and when to abstain
        assert decided["trained"] >= decided["zero-shot-above"]
        return
    assert summary["decision"] == "zero-shot-above" and len(informed) == 20
    folder = summary["reranker"]
    info = json.loads((Path(folder) / "ralm_reranker.json").read_text())
    assert (info["decision"], info["threshold"], info["rank_tokens"]) == ("zero-shot-above", 2.0, 16)
    card = (Path(folder) / "README.md").read_text()
    assert card.split("# ralm predictive reranker\n\n", 1)[1].startswith("**This export ranks and abstains")
    with pytest.raises(RalmInputError, match="without that LM.*qa.flare cannot play its abstention"):
        PredictiveReranker.from_pretrained(folder).rank(["a prefix"], [["one", "two"]])
    (played,) = play_exports([Condition("trained", "mine", model=folder)], rank_tokens=16)
    assert (played.played_as, played.played_threshold) == ("zero-shot-above", 2.0)
    candidates = [CandidateScores("a", 9.0, nll=5.0, rank_logprob=-4.0), CandidateScores("b", 8.0, 4.0, -2.5)]
    for none_rank, chosen in ((-4.5, 1), (-4.0, None)):  # y' gains 2.0 (>= M: its pick), then 1.5
        row = WindowScores(
            1, 40, 4, no_passage_nll=6.0, no_passage_rank_logprob=none_rank, candidates=candidates
        )
        assert pick(played, row) == chosen
