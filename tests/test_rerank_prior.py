"""The BM25 prior (``--bm25-prior``): score = f + w * z(BM25); untrained, the reranker ranks exactly like
BM25."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch

from ralm.rerank.checkpoints import read_checkpoint
from ralm.rerank.export import export_reranker
from ralm.rerank.inference import PredictiveReranker
from ralm.rerank.inputs import bm25_prior
from ralm.rerank.model import load_tokenizer
from ralm.train.batch import GroupCollator
from ralm.train.dataset import GroupDataset, load_rerank_data
from ralm.train.lit_module import RerankerModule
from ralm.train.metrics import selection_sums
from ralm.train.train_command import _print_summary
from ralm.train.training_callbacks import STEP0_FILE
from tests.rerank_fixtures import fit_tiny_reranker, keyword_dataset


@pytest.fixture(scope="module")
def prior_run(tmp_path_factory, real_documents, tiny_encoder_dir) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("prior")
    data = keyword_dataset(real_documents, root / "data", 40, k=3, seed=5)
    summary = fit_tiny_reranker(
        data,
        root / "out",
        tiny_encoder_dir,
        max_steps=4,
        val_every=2,
        loader={"val_batch_size": 16},
        bm25_prior=True,
    )
    return data, summary


def test_the_prior_is_increasing_in_bm25_and_standardised():
    z = bm25_prior([3.0, 9.0, 1.0, 5.0])
    assert sorted(range(4), key=z.__getitem__) == [2, 0, 3, 1]
    assert sum(z) == pytest.approx(0.0, abs=1e-9)
    assert sum(v * v for v in z) / 4 == pytest.approx(1.0)
    assert bm25_prior([4.0, 4.0]) == [0.0, 0.0]  # no spread: no preference, not a division by 0
    assert bm25_prior([]) == []


def test_an_untrained_prior_module_scores_exactly_the_prior(prior_run, tiny_encoder_dir):
    data, _ = prior_run
    module = RerankerModule(
        str(tiny_encoder_dir), max_length=40, max_prefix_tokens=12, bm25_prior=True
    ).eval()
    rerank_data = load_rerank_data(str(data), abstain=False, val_fraction=0.25, seed=0, bm25_prior=True)
    groups = GroupDataset(str(data), rerank_data.train_rows[:8], abstain=False, bm25_prior=True)
    collate = GroupCollator(load_tokenizer(str(tiny_encoder_dir)), max_length=40, max_prefix_tokens=12)
    batch = collate([groups[i] for i in range(len(groups))])
    with torch.no_grad():
        scores = module(batch)
    assert torch.equal(scores, batch.bm25_prior)  # f is 0 everywhere and w is 1
    sums = selection_sums(scores, batch.lm_logprobs, batch.mask)
    assert sums.pick_logprob == sums.bm25_logprob  # it picks BM25's top-1: gain recovered is exactly 0


def test_the_export_holds_its_checkpoints_prior_and_recovers_the_gain_it_records(prior_run):
    """The recorded gain recovered is the exported reranker's own on the selection prefixes, recomputed
    from the rows (pick, BM25's top-1 and the oracle), and the recorded prior weight is the exported
    checkpoint's (the selected step's when trained, the step-0 model's 1.0 when BM25 won)."""
    data, summary = prior_run
    folder = Path(summary["reranker"])
    info = json.loads((folder / "ralm_reranker.json").read_text())
    checkpoint = folder.parent / (STEP0_FILE if info["checkpoint"] == STEP0_FILE else "checkpoints")
    checkpoint = checkpoint if checkpoint.is_file() else checkpoint / info["checkpoint"]
    state = read_checkpoint(str(checkpoint))["state_dict"]
    assert info["bm25_prior"]["rule"] == "bm25-zscore"
    assert info["bm25_prior"]["weight"] == pytest.approx(float(state["prior_weight"]), abs=1e-7)
    split = load_rerank_data(str(data), abstain=False, val_fraction=0.25, seed=0, bm25_prior=True)
    rows = list(datasets.load_from_disk(str(data)).select(split.val_rows))
    reranker = PredictiveReranker.from_pretrained(folder)
    picks = reranker.rank(
        [r["prefix"] for r in rows], [r["candidate_texts"] for r in rows], [r["bm25_scores"] for r in rows]
    )
    pick = np.mean([r["lm_logprobs"][p] for r, p in zip(rows, picks, strict=True)])
    bm25, oracle = (
        np.mean([r["lm_logprobs"][0] for r in rows]),
        np.mean([max(r["lm_logprobs"]) for r in rows]),
    )
    assert summary["best_gain_recovered"] == pytest.approx((pick - bm25) / (oracle - bm25), abs=1e-4)


def test_the_exported_step0_reranker_ranks_like_bm25(prior_run, tmp_path):
    data, summary = prior_run
    ckpt = Path(summary["reranker"]).parent / STEP0_FILE
    folder = export_reranker(str(ckpt), str(tmp_path / "step0"), hyper_parameters={}, trained_on={})
    reranker = PredictiveReranker.from_pretrained(folder)
    assert reranker.prior_weight == 1.0
    prefixes = ["in the beginning was the word", "and the earth was without form"]
    candidates = [["alpha passage", "beta passage", "gamma passage"], ["one", "two"]]
    bm25 = [[2.0, 7.5, 3.1], [1.0, 1.5]]
    scores = reranker.score(prefixes, candidates, bm25)
    for group_scores, group_bm25 in zip(scores, bm25, strict=True):
        assert group_scores == pytest.approx(bm25_prior(group_bm25))
    assert reranker.best(prefixes[0], candidates[0], bm25[0]) == 1
    with pytest.raises(ValueError, match="bm25_scores"):
        reranker.score(prefixes, candidates)


def test_an_untrained_prior_module_with_abstention_still_ranks_like_bm25(prior_run, tiny_encoder_dir):
    """The empty passage scores the abstention bias (0 untrained), below BM25's top-1 (z > 0)."""
    data, _ = prior_run
    module = RerankerModule(
        str(tiny_encoder_dir), max_length=40, max_prefix_tokens=12, bm25_prior=True, abstain=True
    ).eval()
    rerank_data = load_rerank_data(str(data), abstain=True, val_fraction=0.25, seed=0, bm25_prior=True)
    groups = GroupDataset(str(data), rerank_data.train_rows[:8], abstain=True, bm25_prior=True)
    items = [groups[i] for i in range(len(groups))]
    assert all(g.passages[-1] == "" and g.bm25_prior[-1] == 0.0 for g in items)
    collate = GroupCollator(load_tokenizer(str(tiny_encoder_dir)), max_length=40, max_prefix_tokens=12)
    batch = collate(items)
    with torch.no_grad():
        scores = module(batch)
    assert torch.equal(scores, batch.bm25_prior)
    sums = selection_sums(scores, batch.lm_logprobs, batch.mask, batch.is_empty)
    assert sums.pick_logprob == sums.bm25_logprob and sums.abstained == 0.0
    # The no-retrieval log-prob is summed from the groups' empty slots: the rows' own column.
    assert sums.none_logprob == pytest.approx(sum(float(g.lm_logprobs[-1]) for g in items))


def test_head_and_prior_weight_learn_at_their_own_rates(tiny_encoder_dir):
    """The zeroed head and the prior weight would barely move at an encoder's learning rate (1e-5)."""
    module = RerankerModule(
        str(tiny_encoder_dir),
        max_length=40,
        max_prefix_tokens=12,
        bm25_prior=True,
        lr=1e-5,
        head_lr=3e-3,
        prior_lr=0.05,
        weight_decay=0.01,
    )
    optimizer = module.configure_optimizers()["optimizer"]
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    trainable = [p for p in module.parameters() if p.requires_grad]
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(trainable) == len(group_of)
    head = module.encoder.classifier  # BertForSequenceClassification's one-logit layer
    assert (
        group_of[id(head.weight)]["initial_lr"] == 3e-3 and group_of[id(head.weight)]["weight_decay"] == 0.01
    )
    assert group_of[id(head.bias)]["initial_lr"] == 3e-3 and group_of[id(head.bias)]["weight_decay"] == 0.0
    assert group_of[id(module.prior_weight)]["initial_lr"] == 0.05
    assert group_of[id(module.prior_weight)]["weight_decay"] == 0.0
    embeddings = module.encoder.base_model.embeddings.word_embeddings.weight
    assert group_of[id(embeddings)]["initial_lr"] == 1e-5 and group_of[id(embeddings)]["weight_decay"] == 0.01
    layer_norm = module.encoder.base_model.embeddings.LayerNorm.weight
    assert group_of[id(layer_norm)]["initial_lr"] == 1e-5 and group_of[id(layer_norm)]["weight_decay"] == 0.0


def test_without_a_validation_win_the_export_is_bm25_itself(tmp_path, real_documents, tiny_encoder_dir):
    """BM25's top-1 is always the LM's best here: no checkpoint can beat it, so a tie exports step 0."""
    from tests.rerank_fixtures import keyword_rows, save_rows

    rows = keyword_rows(real_documents, 24, k=3, seed=2)
    for row in rows:
        row["lm_logprobs"] = [-5.0, -7.0, -9.0]
    data = save_rows(rows, tmp_path / "data")
    summary = fit_tiny_reranker(
        data,
        tmp_path / "out",
        tiny_encoder_dir,
        max_steps=3,
        val_every=1,
        loader={"val_batch_size": 16},
        optim={"head_lr": 1e-2},
        bm25_prior=True,
    )
    info = json.loads((Path(summary["reranker"]) / "ralm_reranker.json").read_text())
    assert info["checkpoint"] == STEP0_FILE and summary["best_gain_recovered"] == 0.0
    assert info["bm25_prior"]["weight"] == 1.0


def test_when_no_passage_beats_every_candidate_the_export_never_retrieves(
    tmp_path, real_documents, tiny_encoder_dir, capfd
):
    """Every row's target is likelier with no passage than with any: validation must choose no retrieval,
    and the exported reranker then declines everywhere (rank gives None), in eval and QA alike."""
    from tests.rerank_fixtures import keyword_rows, save_rows

    rows = keyword_rows(real_documents, 24, k=3, seed=2)
    for row in rows:
        row["lm_logprobs"] = [-5.0, -7.0, -9.0]
        row["no_retrieval_logprob"] = -1.0
    data = save_rows(rows, tmp_path / "data")
    capfd.readouterr()  # the fixture's own output
    summary = fit_tiny_reranker(
        data,
        tmp_path / "out",
        tiny_encoder_dir,
        max_steps=3,
        val_every=1,
        loader={"val_batch_size": 16},
        optim={"head_lr": 1e-2},
        run={"keep_checkpoints": False},
        # a bar, piped here (pytest captures stderr): plain lines instead
        trainer={"enable_progress_bar": True},
        bm25_prior=True,
        abstain=True,
    )
    assert summary["decision"] == "no-retrieval"
    # No threshold gains on the training prefixes: the threshold rule is no retrieval itself, not a rule
    # of its own, and no infinite T reaches a JSON file (JSON has no Infinity).
    assert summary["threshold"] is None and summary["start"]["threshold"] is None
    assert "bm25-above" not in summary["decision_evidence"]["promise"]["tests"]
    assert "Infinity" not in (tmp_path / "out" / "summary.json").read_text()
    # Nothing retrieved, nothing recovered: no number, not 0.0 (nor the step-0 model's gain).
    assert summary["best_gain_recovered"] is None
    # Piped (not a terminal): training reports in whole lines, never bar fragments.
    log = capfd.readouterr().err
    assert "\r" not in log and "validation at step 3: gain_recovered" in log and "train: done, 3 step" in log
    # Only the export is kept: no Lightning checkpoints, no step-0 model.
    assert not (tmp_path / "out" / "checkpoints").exists() and not (tmp_path / "out" / STEP0_FILE).exists()
    info = json.loads((Path(summary["reranker"]) / "ralm_reranker.json").read_text())
    assert info["decision"] == "no-retrieval" and info["metrics"]["best_val/gain_recovered"] is None
    assert {"abstain_bias", "abstain_weight", "bm25_top_mean", "bm25_top_std"} <= set(info["bm25_prior"])
    # The abstention feature's statistics: mean and std of the training prefixes' best BM25 scores.
    split = load_rerank_data(str(data), abstain=True, val_fraction=0.25, seed=0, bm25_prior=True)
    tops = [max(rows[i]["bm25_scores"]) for i in split.train_rows]
    evidence = info["decision_evidence"]  # the two samples, stated, from documents of their own
    assert evidence["selection"]["prefixes"] == len(split.val_rows) > 0
    assert evidence["decision"]["prefixes"] == len(split.decision_rows) > 0 and evidence["overlap"] == 0
    assert info["bm25_prior"]["bm25_top_mean"] == pytest.approx(sum(tops) / len(tops), rel=1e-6)
    assert info["bm25_prior"]["bm25_top_std"] == pytest.approx(float(np.std(tops)), rel=1e-5)
    reranker = PredictiveReranker.from_pretrained(summary["reranker"])
    assert reranker.rank(["a prefix"], [["one passage", "another"]], [[2.0, 1.0]]) == [None]
    # The printed summary says what selection chose, on which prefixes, and what decided, on which: never
    # the step-0 file as "best" with a gain recovered of 0.0 while validation saw a trained step.
    _print_summary(summary)
    printed = capfd.readouterr().out
    step = evidence["selection"]["step"]
    chosen = STEP0_FILE if step == 0 else f"best-step{step}.ckpt"  # the start competes in selection
    assert f"selected      step {step} ({chosen})" in printed
    assert f"on {len(split.val_rows)} selection prefixes" in printed
    assert f"decision      no-retrieval on {len(split.decision_rows)} decision prefixes" in printed
    assert "exported      no retrieval" in printed


def test_the_validation_history_survives_a_checkpoint_round_trip():
    """Resumed runs know the steps validated before the kill (Lightning saves callback state)."""
    from ralm.train.selection import ValidationHistory

    history = ValidationHistory()
    history.steps = [(4, {"val/gain_recovered": 0.5})]
    history.per_prefix = {
        4: torch.tensor([[-1.0, -2.0, float("nan")], [-3.0, -2.5, float("nan")]], dtype=torch.float64)
    }
    restored = ValidationHistory()
    restored.load_state_dict(torch.load(_saved(history.state_dict()), weights_only=True))
    assert restored.step_at_score("val/gain_recovered", 0.5) == 4
    assert restored.at_score("val/gain_recovered", 0.5) == {"val/gain_recovered": 0.5}
    torch.testing.assert_close(restored.per_prefix[4], history.per_prefix[4], equal_nan=True)


def _saved(obj):
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_a_checkpoint_with_old_0_dim_scalars_and_their_moments_loads(tiny_encoder_dir):
    module = RerankerModule(
        str(tiny_encoder_dir), max_length=40, max_prefix_tokens=12, bm25_prior=True, abstain=True
    )
    state = {
        k: (v.reshape(()) if k in ("prior_weight", "abstain_bias", "abstain_weight") else v)
        for k, v in module.state_dict().items()
    }
    checkpoint = {
        "state_dict": state,
        "optimizer_states": [
            {
                "state": {
                    0: {"exp_avg": torch.zeros(()), "exp_avg_sq": torch.zeros(()), "step": torch.tensor(3.0)}
                }
            }
        ],
    }
    module.on_load_checkpoint(checkpoint)
    module.load_state_dict(checkpoint["state_dict"])
    moments = checkpoint["optimizer_states"][0]["state"][0]
    assert (
        module.prior_weight.shape == (1,) and moments["exp_avg"].shape == (1,) and moments["step"].dim() == 0
    )
