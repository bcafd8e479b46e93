"""The stacked reranker (``ralm train --zero-shot-prior``): its score is the frozen LM's y' score plus an
encoder's correction, so untrained it IS the zero-shot rule that abstains below M, and every caller plays
it with the LM's y' rows."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from ralm.errors import RalmInputError
from ralm.passage_rules import ZERO_SHOT_ABOVE, Scored, ScoredRow, picks, stacked_pick
from ralm.rerank.export_record import RecordError, RerankerExport, ZeroShotPrior
from ralm.train.dataset import load_rerank_data
from tests.rerank_fixtures import fit_tiny_reranker, keyword_rows, save_rows

META = {"format": "ralm-rerank-data/2", "rank_tokens": 16, "k": 3}


def _rows_with_y_prime(real_documents, n: int = 60, seed: int = 3, informative: float = 1.0) -> list[dict]:
    """Keyword rows whose y' log-probs are drawn so that the zero-shot pick's gain over no passage spreads
    on both sides of 0 (the rule then both retrieves and abstains); with `informative` 0, y' says nothing
    of which candidate helps."""
    rng = np.random.default_rng(seed)
    rows = keyword_rows(real_documents, n, k=3, seed=seed)
    for row in rows:
        key = int(np.argmax(row["lm_logprobs"]))  # the key-word candidate: y' tends to favour it, noisily
        base = -20.0 + informative * 2.0 * (np.arange(3) == key)
        row["lm_rank_logprobs"] = (base + rng.normal(0.0, 1.5, size=3)).round(3).tolist()
        row["no_retrieval_rank_logprob"] = float(round(-20.0 + informative + rng.normal(0.0, 1.5), 3))
    return rows


def _scored_rows(rows: list[dict]) -> list[ScoredRow]:
    """The rows as the passage rules read them (the rules' own reference implementation)."""
    return [
        ScoredRow(
            i,
            tuple(Scored(rank_logprob=v) for v in row["lm_rank_logprobs"]),
            no_passage_rank_logprob=row["no_retrieval_rank_logprob"],
        )
        for i, row in enumerate(rows)
    ]


def test_the_stacked_pick_adds_the_encoders_scores_to_the_lms_and_abstains_by_b():
    """Brute force on hand-made numbers: scores f + a y' for passages, f + a y'_none + b for none."""
    row = ScoredRow(0, (Scored(rank_logprob=-10.0), Scored(rank_logprob=-9.0)), no_passage_rank_logprob=-9.5)
    # f = 0: the zero-shot pick (candidate 1, gain 0.5) when b = a M with M <= 0.5, else none
    assert stacked_pick(row, [0.0, 0.0, 0.0], 2.0, 2.0 * 0.4) == 1
    assert stacked_pick(row, [0.0, 0.0, 0.0], 2.0, 2.0 * 0.6) is None
    # the encoder moves the pick: +2.5 on candidate 0 outweighs a = 2 times its 1-nat deficit
    assert stacked_pick(row, [2.5, 0.0, 0.0], 2.0, 0.0) == 0
    # and the abstention: +4 on the empty passage beats candidate 1's 2 x 0.5 + 0
    assert stacked_pick(row, [0.0, 0.0, 4.0], 2.0, 0.0) is None
    # a tie goes to the passage, as the rule retrieves at a gain of exactly M
    assert stacked_pick(row, [0.0, 0.0, 0.0], 2.0, 1.0) == 1
    # without abstention (b None) there is no empty passage
    assert stacked_pick(row, [0.0, 3.0], 1.0, None) == 1


def test_the_untrained_stacked_model_is_the_zero_shot_rule_fitted_on_the_training_prefixes(
    tmp_path, real_documents, tiny_encoder_dir
):
    """fit_start gives (a, b) = (k, k M), M the zero-shot rule's threshold fitted on the training prefixes
    alone; the module built with them picks, on every prefix, what ``zero-shot-above`` at M picks."""
    from ralm.train.batch import GroupCollator
    from ralm.train.lit_module import RerankerModule
    from ralm.train.scalar_init import fit_start, rank_gain_columns
    from ralm.train.settings import OptimOptions

    rows = _rows_with_y_prime(real_documents)
    data = save_rows(rows, tmp_path / "data", meta=META)
    split = load_rerank_data(str(data), abstain=True, val_fraction=0.2, seed=0, zero_shot_prior=True)
    fitted = fit_start(str(data), split, OptimOptions(), abstain=True, bm25_prior=False, zero_shot_prior=True)
    margin = rank_gain_columns(str(data), split.train_rows).fit()
    assert fitted.start["rule"] == ZERO_SHOT_ABOVE and fitted.start["threshold"] == margin
    a, b = fitted.hparams["zero_shot_init"]
    assert a == fitted.start["sharpness"] and b == pytest.approx(a * margin, abs=1e-4)

    module = RerankerModule(
        str(tiny_encoder_dir),
        max_length=40,
        max_prefix_tokens=12,
        abstain=True,
        zero_shot_prior=True,
        zero_shot_init=(a, b),
    ).eval()
    every = list(range(len(rows)))
    groups = split.groups(every)
    collate = GroupCollator(_tokenizer(tiny_encoder_dir), max_length=40, max_prefix_tokens=12)
    batch = collate([groups[i] for i in every])
    with torch.no_grad():
        scores = module(batch)
    chosen = [int(i) for i in scores.argmax(dim=1)]
    got = [None if i == 3 else i for i in chosen]  # slot 3 is the empty passage
    assert got == picks(ZERO_SHOT_ABOVE, _scored_rows(rows), threshold=margin)
    assert None in got and any(g is not None for g in got)


def _tokenizer(folder):
    from ralm.rerank.model import load_tokenizer

    return load_tokenizer(str(folder))


def test_where_retrieving_gains_on_no_training_prefix_the_start_retrieves_on_none_of_them():
    """The threshold fit finds no M (every pick loses to no passage): the start's M lies one nat above the
    largest y' gain, so the untrained model abstains on every training prefix, as the rule would."""
    from ralm.train.scalar_init import RankGainColumns, _stacked_margin

    gain = np.array([0.5, 2.0, -1.0, -math.inf])
    columns = RankGainColumns(gain=gain, picked=np.full(4, -9.0), none=np.full(4, -6.0), docs=list("abcd"))
    assert columns.fit() == math.inf
    margin = _stacked_margin(columns)
    assert margin == 3.0 and not (gain >= margin).any()


def test_the_start_sharpness_is_the_one_whose_marginal_loss_is_lowest_by_hand(real_documents, tmp_path):
    """The paper's loss of the untrained stacked model, computed here in numpy from the columns:
    -log sum_i softmax(a y' + b [empty])_i exp(log p(y | d_i)), averaged over prefixes."""
    from ralm.train.scalar_init import SHARPNESS, read_zero_shot_columns, zero_shot_scalars, zero_shot_start

    rows = _rows_with_y_prime(real_documents, n=20)
    data = save_rows(rows, tmp_path / "data", meta=META)
    columns = read_zero_shot_columns(str(data), list(range(20)), abstain=True)
    start = zero_shot_start(columns, 0.3, "marginal")

    def by_hand(a: float) -> float:
        _, b = zero_shot_scalars(0.3, a)
        losses = []
        for row in rows:
            s = np.array(
                [a * v for v in row["lm_rank_logprobs"]] + [a * row["no_retrieval_rank_logprob"] + b]
            )
            lp = np.array(row["lm_logprobs"] + [row["no_retrieval_logprob"]])
            log_p = s - np.log(np.exp(s - s.max()).sum()) - s.max()
            losses.append(-np.log(np.exp(log_p + lp).sum()))
        return float(np.mean(losses))

    expected = {a: by_hand(a) for a in SHARPNESS}
    for a in SHARPNESS:
        assert start["loss_by_sharpness"][str(a)] == pytest.approx(expected[a], rel=1e-6)
    assert start["sharpness"] == min(expected, key=expected.get)


def test_a_stacked_reranker_costs_the_lm_rule_plus_its_encoder_and_no_lm_budget_admits_it():
    from ralm.train.decision import rule_costs, within_budget

    costs = rule_costs(4, abstain=True, lm_ms=100.0, encoder_ms=2.0, stacked=True)
    assert costs["trained"] == {"lm_inputs": 5, "encoder_pairs": 5, "ms": 5 * 100.0 + 5 * 2.0}
    assert costs["zero-shot-above"]["lm_inputs"] == 5 and costs["bm25"]["lm_inputs"] == 0
    assert not within_budget("trained", 4, 0, stacked=True) and within_budget("trained", 4, 5, stacked=True)
    assert within_budget("trained", 4, 0, stacked=False)


def test_the_export_record_carries_the_prior_and_refuses_what_cannot_be_played():
    base = {"max_length": 40, "max_prefix_tokens": 12, "abstain": True}
    prior = ZeroShotPrior(weight=2.0, rank_tokens=16, abstain_bias=1.5)
    record = RerankerExport(**base, zero_shot_prior=prior)
    again = RerankerExport.from_dict(json.loads(record.to_json()))
    assert again.zero_shot_prior == prior and again.to_json() == record.to_json()
    # an export without the prior writes no such key (older exports stay byte-identical)
    assert "zero_shot_prior" not in json.loads(RerankerExport(**base).to_json())
    with pytest.raises(RecordError, match="abstain_bias"):
        RerankerExport(**base, zero_shot_prior=ZeroShotPrior(weight=2.0, rank_tokens=16))
    with pytest.raises(RecordError, match="rank_tokens"):
        ZeroShotPrior(weight=2.0, rank_tokens=0)


def test_ralm_train_with_the_zero_shot_prior_starts_as_the_rule_and_exports_what_callers_can_play(
    tmp_path, real_documents, tiny_encoder_dir
):
    """A tiny run: summary.json's start is zero-shot-above at M fitted on the training prefixes, step 0
    competes in selection, the trained rule's cost reads the LM; a stacked export refuses to rank without
    y' and ranks as ``stacked_pick`` with it. Both priors at once are refused before anything loads."""
    from ralm.rerank.export import export_reranker
    from ralm.rerank.inference import PredictiveReranker

    data = save_rows(_rows_with_y_prime(real_documents), tmp_path / "data", meta=META)
    with pytest.raises(RalmInputError, match="two starts"):
        fit_tiny_reranker(
            data,
            tmp_path / "both",
            tiny_encoder_dir,
            max_steps=2,
            abstain=True,
            bm25_prior=True,
            zero_shot_prior=True,
        )
    summary = fit_tiny_reranker(
        data,
        tmp_path / "out",
        tiny_encoder_dir,
        max_steps=4,
        abstain=True,
        zero_shot_prior=True,
        run={"keep_checkpoints": True},
    )
    assert summary["start"]["rule"] == ZERO_SHOT_ABOVE
    costs = summary["decision_evidence"]["costs"]["per_retrieval"]
    assert costs["trained"]["lm_inputs"] == 4 and costs["trained"]["encoder_pairs"] == 4
    step0 = tmp_path / "out" / "step0-zero-shot.ckpt"
    assert step0.exists()
    folder = export_reranker(
        str(step0), str(tmp_path / "stacked"), hyper_parameters={}, trained_on={}, rank_tokens=16
    )
    record = RerankerExport.read(folder)
    a, b = summary["start"]["zero_shot_init"]
    prior = record.zero_shot_prior  # the module's float32 scalars
    assert (prior.weight, prior.abstain_bias) == pytest.approx((a, b), rel=1e-6) and prior.rank_tokens == 16
    reranker = PredictiveReranker.from_pretrained(folder)
    with pytest.raises(RalmInputError, match="stacked on the frozen LM.s zero-shot score.*last 16 tokens"):
        reranker.rank(["a prefix"], [["one", "two"]])
    y = [[-10.0, -9.0, -9.5]]  # the two passages' y', then no passage's
    margin = summary["start"]["threshold"]
    expected = 1 if -9.0 - -9.5 >= margin else None
    assert reranker.rank(["a prefix"], [["one", "two"]], rank_logprobs=y) == [expected]
    assert not math.isnan(margin)
