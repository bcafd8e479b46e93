"""The learner contains the simple rule: with ``--bm25-prior --abstain`` the untrained
reranker *is* "BM25's top-1 when its score is at least T" (T fitted on the training prefixes), step 0
competes in checkpoint selection, and a run whose training cannot improve on it exports the threshold rule,
which every caller applies."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ralm.rerank.inference import PredictiveReranker
from ralm.rerank.model import load_tokenizer
from ralm.train.batch import GroupCollator
from ralm.train.dataset import GroupDataset, bm25_top_stats, load_rerank_data
from ralm.train.decision import RULE_SENTENCE
from ralm.train.lit_module import RerankerModule
from ralm.train.scalar_init import threshold_scalars
from ralm.train.selection import bm25_threshold
from tests.rerank_fixtures import fit_tiny_reranker, keyword_rows, save_rows

NONE, HELPS, HURTS = -6.0, -3.0, -9.0


def _threshold_rows(real_documents, n: int = 48) -> list[dict]:
    """BM25's top-1 helps (+3 nats) exactly where the best BM25 score is at least 6, and hurts (-3) below:
    the threshold rule is the right one, and T near 6 on any sample."""
    rows = keyword_rows(real_documents, n, k=3, seed=11, prefixes_per_doc=4)
    for row in rows:
        best = max(row["bm25_scores"])
        row["lm_logprobs"] = [HELPS if best >= 6.0 else HURTS, -12.0, -12.0]
        row["no_retrieval_logprob"] = NONE
    return rows


def _rule(rows: list[dict], threshold: float) -> list[int | None]:
    return [0 if max(r["bm25_scores"]) >= threshold else None for r in rows]


def _train_threshold(rows: list[dict], train_rows: list[int]) -> float:
    """T fitted on the training rows alone, by the rule's own definition (``bm25_threshold``)."""
    train = [rows[i] for i in train_rows]
    return bm25_threshold(
        [max(r["bm25_scores"]) for r in train],
        [r["lm_logprobs"][0] - NONE for r in train],
        [r["doc_id"] for r in train],
    )


def _start_module(encoder_dir, mean: float, std: float, scalars: tuple[float, float]) -> RerankerModule:
    """An untrained prior-and-abstain module with anchor ``top`` and the given (b, c), in eval mode."""
    return RerankerModule(
        str(encoder_dir),
        max_length=40,
        max_prefix_tokens=12,
        bm25_prior=True,
        abstain=True,
        bm25_top_mean=mean,
        bm25_top_std=std,
        abstain_anchor="top",
        abstain_init=scalars,
    ).eval()


def _module_scores(module: RerankerModule, data: Path, rows: int, encoder_dir) -> torch.Tensor:
    """The module's (rows, k + 1) scores of every row's group, the empty passage last."""
    groups = GroupDataset(str(data), list(range(rows)), abstain=True, bm25_prior=True)
    collate = GroupCollator(load_tokenizer(str(encoder_dir)), max_length=40, max_prefix_tokens=12)
    with torch.no_grad():
        return module(collate([groups[i] for i in range(len(groups))]))


def test_the_untrained_module_picks_exactly_as_the_threshold_rule(tmp_path, real_documents, tiny_encoder_dir):
    rows = _threshold_rows(real_documents)
    data = save_rows(rows, tmp_path / "data")
    split = load_rerank_data(str(data), abstain=True, val_fraction=0.25, seed=0, bm25_prior=True)
    threshold = _train_threshold(rows, split.train_rows)
    assert 5.0 < threshold < 7.0  # the designed boundary, seen through the training sample
    mean, std = bm25_top_stats(str(data), split.train_rows)
    for sharpness in (0.25, 4.0):
        module = _start_module(
            tiny_encoder_dir, mean, std, threshold_scalars(threshold, mean, std, sharpness)
        )
        picks = _module_scores(module, data, len(rows), tiny_encoder_dir).argmax(dim=-1).tolist()
        expected = [3 if p is None else p for p in _rule(rows, threshold)]  # slot 3: the empty passage
        assert picks == expected


def test_the_threshold_scalars_put_the_margin_of_abstaining_at_t():
    b, c = threshold_scalars(8.0, mean=5.0, std=2.0, sharpness=3.0)
    # abstaining's margin over the top-1 at best score x is b + c (x - mean) / std = 3 (8 - x) / 2
    for x in (2.0, 7.9, 8.0, 8.1, 20.0):
        assert b + c * (x - 5.0) / 2.0 == pytest.approx(3.0 * (8.0 - x) / 2.0, abs=2e-5)
    assert b + c * (8.0 - 5.0) / 2.0 < 0  # a best score of exactly T retrieves, as the rule does
    assert threshold_scalars(math.inf, 5.0, 2.0, 3.0) == (3.0, 0.0)  # never retrieve: always abstain


def test_a_run_that_cannot_improve_on_its_start_exports_the_threshold_rule(
    tmp_path, real_documents, tiny_encoder_dir
):
    """No parameter can move (learning rates ~0): every step is the start, step 0 wins selection (a tie
    goes to it), so "trained" is the threshold rule as a model and that rule competes under its own name:
    it is exported with its T, and callers apply T. summary.json states the rule, the margin, T and each
    rule's promise test."""
    rows = _threshold_rows(real_documents)
    data = save_rows(rows, tmp_path / "data", meta={"s": 2})
    summary = fit_tiny_reranker(
        data,
        tmp_path / "out",
        tiny_encoder_dir,
        max_steps=2,
        val_every=1,
        loader={"val_batch_size": 16, "decision_fraction": 0.25},
        optim={"lr": 1e-12, "head_lr": 1e-12, "prior_lr": 0.0, "warmup_steps": 0},
        bm25_prior=True,
        abstain=True,
    )
    split = load_rerank_data(
        str(data), abstain=True, val_fraction=0.25, decision_fraction=0.25, seed=0, bm25_prior=True
    )
    threshold = _train_threshold(rows, split.train_rows)
    evidence = summary["decision_evidence"]
    assert evidence["selection"]["step"] == 0 and evidence["selection"]["validations"] == 3
    assert evidence["decision"]["trained_is_start"] and "trained" not in evidence["promise"]["tests"]
    assert summary["decision"] == "bm25-above"
    assert summary["threshold"] == pytest.approx(threshold) == pytest.approx(summary["start"]["threshold"])
    assert summary["decision_rule"] == RULE_SENTENCE and summary["margin"] == 0.01
    promise = evidence["promise"]
    assert promise["reference"] == "no-retrieval"
    assert promise["margin_nats"] == pytest.approx(2 * math.log(1.01))  # s = 2 target tokens
    usable = len(split.train_rows) + len(split.val_rows) + len(split.decision_rows)
    assert promise["tests"]["bm25"]["items"] == usable  # BM25 against none: every data-gen prefix
    assert promise["tests"]["bm25-above"]["items"] == len(split.decision_rows)
    assert promise["tests"]["bm25-above"]["passes"]
    decision = [rows[i] for i in split.decision_rows]
    above = [r["lm_logprobs"][0] if max(r["bm25_scores"]) >= threshold else NONE for r in decision]
    assert evidence["decision"]["mean_logprob"]["bm25-above"] == pytest.approx(np.mean(above))
    folder = Path(summary["reranker"])
    info = json.loads((folder / "ralm_reranker.json").read_text())
    assert info["decision"] == "bm25-above" and info["threshold"] == pytest.approx(threshold)
    assert (
        (folder / "README.md")
        .read_text()
        .split("# ralm predictive reranker\n\n")[1]
        .startswith("**This export retrieves by a threshold")
    )
    reranker = PredictiveReranker.from_pretrained(folder)
    picks = reranker.rank(
        [r["prefix"] for r in rows], [r["candidate_texts"] for r in rows], [r["bm25_scores"] for r in rows]
    )
    assert picks == _rule(rows, threshold)


def test_an_exported_anchor_top_reranker_scores_as_the_module_it_came_from(
    tmp_path, real_documents, tiny_encoder_dir
):
    """The empty passage's score under anchor ``top`` is written twice (the module for training, the export
    for inference): a module with the threshold start and a non-zero head, saved and exported, must give
    the same scores for every candidate and the empty passage, and so the same picks."""
    from ralm.rerank.export import export_reranker
    from ralm.rerank.model import output_head

    rows = _threshold_rows(real_documents, 16)
    data = save_rows(rows, tmp_path / "data")
    module = _start_module(tiny_encoder_dir, 5.5, 2.0, threshold_scalars(6.0, 5.5, 2.0, 1.0))
    with torch.no_grad():  # a head that is not zero: the encoder's own scores count too
        output_head(module.encoder).weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(0))
        module.prior_weight.fill_(0.8)
    ckpt = tmp_path / "module.ckpt"
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)}, ckpt)
    folder = export_reranker(str(ckpt), str(tmp_path / "export"), hyper_parameters={}, trained_on={})
    assert json.loads((Path(folder) / "ralm_reranker.json").read_text())["bm25_prior"]["anchor"] == "top"
    expected = _module_scores(module, data, len(rows), tiny_encoder_dir)
    reranker = PredictiveReranker.from_pretrained(folder)
    scores = reranker.score(
        [r["prefix"] for r in rows],
        [[*r["candidate_texts"], ""] for r in rows],
        [[*r["bm25_scores"], 0.0] for r in rows],
    )
    torch.testing.assert_close(torch.tensor(scores), expected, rtol=1e-4, atol=1e-4)
    picks = reranker.rank(
        [r["prefix"] for r in rows], [r["candidate_texts"] for r in rows], [r["bm25_scores"] for r in rows]
    )
    assert picks == [None if p == 3 else p for p in expected.argmax(dim=-1).tolist()]
