"""It must really learn: on the key-word task a tiny encoder goes from chance to >= 90% top-1 agreement."""

from __future__ import annotations

import json

import pytest
import torch

from ralm.rerank.export_record import RerankerExport
from ralm.rerank.inference import PredictiveReranker
from ralm.rerank.model import load_cross_encoder, load_tokenizer
from ralm.train.settings import EncoderOptions, LoaderOptions, OptimOptions, RunOptions
from ralm.train.train_command import train
from tests.rerank_fixtures import keyword_dataset, keyword_rows

K = 4


def _agreement(reranker: PredictiveReranker, rows: list[dict]) -> float:
    scores = reranker.score([r["prefix"] for r in rows], [r["candidate_texts"] for r in rows])
    hits = 0
    for row, s in zip(rows, scores, strict=True):
        pick = max(range(len(s)), key=s.__getitem__)
        hits += row["lm_logprobs"][pick] == max(row["lm_logprobs"])
    return hits / len(rows)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, real_documents, tiny_encoder_dir):
    root = tmp_path_factory.mktemp("learn")
    data = keyword_dataset(real_documents, root / "data", 400, k=K, seed=1)
    summary = train(
        str(data),
        str(root / "out"),
        encoder=EncoderOptions(name=str(tiny_encoder_dir), max_pair_tokens=64, max_prefix_tokens=32),
        loader=LoaderOptions(batch_size=8, val_batch_size=64, val_fraction=0.2),
        optim=OptimOptions(lr=3e-3, warmup_steps=15, max_steps=150, weight_decay=0.0),
        run=RunOptions(val_every=50, save_every=50, wandb="off"),
        trainer={"accelerator": "cpu", "devices": 1, "log_every_n_steps": 20, "enable_progress_bar": False},
    )
    return root, summary


def test_untrained_is_at_chance_and_trained_agrees(trained, real_documents, tiny_encoder_dir):
    root, summary = trained
    held_out = keyword_rows(real_documents, 200, k=K, seed=99)
    torch.manual_seed(0)
    fresh = PredictiveReranker(
        load_cross_encoder(str(tiny_encoder_dir)).eval(),
        load_tokenizer(str(tiny_encoder_dir)),
        RerankerExport(max_length=64, max_prefix_tokens=32),
        torch.device("cpu"),
    )
    before = _agreement(fresh, held_out)
    after = _agreement(PredictiveReranker.from_pretrained(root / "out" / "reranker"), held_out)
    # Chance is 1/k = 0.25; 200 prefixes put a chance-level scorer well below 0.45.
    print(f"agreement untrained {before:.3f} trained {after:.3f}", summary["last_validation"])
    assert before < 0.45, before
    assert after >= 0.90, after
    # Validation (held-out documents of the training set) tells the same story, and picks beat BM25's top-1.
    assert summary["last_validation"]["val/top1_agreement"] >= 0.85
    assert summary["best_gain_recovered"] > 0.8
    info = json.loads((root / "out" / "reranker" / "ralm_reranker.json").read_text())
    assert (
        info["format"] == "ralm-reranker/1" and info["max_prefix_tokens"] == 32 and info["abstain"] is False
    )
