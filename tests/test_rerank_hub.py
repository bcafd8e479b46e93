"""The export in the tools people use: its model card, sentence-transformers, and the hub upload (offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ralm.errors import RalmInputError
from ralm.rerank.cross_encoder_files import MODULE_FILES
from ralm.rerank.export import export_reranker
from ralm.rerank.hub import push_reranker
from ralm.rerank.inputs import encode_pairs
from ralm.rerank.model_card import CARD, check_model_card, read_card_metadata, remote_code_note
from ralm.train.lit_module import RerankerModule


@pytest.fixture()
def export(tmp_path, tiny_encoder_dir) -> Path:
    """A real export (prior and abstention) from a checkpoint whose head and scalars were moved; its
    encoder folder records a hub origin, as a folder saved from a hub model does."""
    import shutil

    encoder = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, encoder)
    config = json.loads((encoder / "config.json").read_text())
    (encoder / "config.json").write_text(
        json.dumps({**config, "_name_or_path": "google/bert_uncased_L-2_H-128_A-2"})
    )
    torch.manual_seed(5)
    module = RerankerModule(str(encoder), max_length=48, max_prefix_tokens=16, bm25_prior=True, abstain=True)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hparams = {**dict(module.hparams), "bm25_top_mean": 3.0, "bm25_top_std": 2.0}
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": hparams}, tmp_path / "best.ckpt")
    evidence = {
        "selection": {
            "prefixes": 40,
            "documents": 6,
            "validations": 4,
            "step": 30,
            "checkpoint": "best.ckpt",
        },
        "decision": {"prefixes": 60, "documents": 9},
        "overlap": 0,
        "comparisons": {
            "trained - bm25": {
                "difference": 0.4,
                "low": 0.1,
                "high": 0.7,
                "better": True,
                "items": 60,
                "detectable_difference": 0.43,
            }
        },
    }
    return Path(
        export_reranker(
            str(tmp_path / "best.ckpt"),
            str(tmp_path / "reranker"),
            hyper_parameters=hparams,
            trained_on={
                "lm": "SmolLM2-135M",
                "train_prefixes": 160,
                "val_prefixes": 40,
                "decision_prefixes": 60,
                "format": "ralm-rerank-data/1",
            },
            metrics={"validation_at_best": {"val/gain_recovered": 0.25}},
            decision="trained",
            decision_evidence=evidence,
        )
    )


def test_the_model_card_says_what_the_folder_holds(export):
    info = json.loads((export / "ralm_reranker.json").read_text())
    meta = check_model_card(export)
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-ranking"
    assert meta["base_model"] == "google/bert_uncased_L-2_H-128_A-2"  # the encoder folder's recorded origin
    card = (export / CARD).read_text()
    assert (
        f"w = {info['bm25_prior']['weight']:.4f}" in card
        and f"b = {info['bm25_prior']['abstain_bias']:.4f}" in card
    )
    assert (
        "SmolLM2-135M" in card
        and "160 training prefixes, 40 selection prefixes, 60 decision prefixes" in card
    )
    assert "step 30 (best.ckpt), best of 4 validations on 40 selection prefixes from 6 documents" in card
    assert "60 decision prefixes from 9 other documents" in card and "selection or training: 0" in card
    assert "trained - bm25: +0.400 nats per prefix [+0.100, +0.700], better (smallest detectable" in card
    assert "**This export" not in card  # a trained export says nothing before its description
    assert "gain_recovered 0.2500" in card


def test_sentence_transformers_scores_whole_prefixes_as_ralm_does(export, real_documents):
    """CrossEncoder on the export cuts a whole prefix as ralm does (its start dropped, then the passage
    cut from its end) and returns the model's logit: the same score as ralm's own encoding."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(export)
    model = AutoModelForSequenceClassification.from_pretrained(export).eval()
    texts = [d["text"] for d in real_documents[:4]]
    # Whole prefixes far beyond the 16-token cut, one shorter than it, long passages and the empty one.
    prefixes = [texts[0], texts[1][:2000], "In the beginning", texts[2]]
    passages = [texts[3][:900], texts[2][:300], texts[1][:900], ""]
    assert [len(tokenizer(p, add_special_tokens=False)["input_ids"]) > 16 for p in prefixes] == [
        True,
        True,
        False,
        True,
    ]
    with torch.no_grad():
        ours = model(
            **encode_pairs(tokenizer, prefixes, passages, max_length=48, max_prefix_tokens=16)
        ).logits
    with pytest.raises(ValueError, match="trust_remote_code"):  # the input module is code: opt in
        sentence_transformers.CrossEncoder(str(export), device="cpu")
    cross = sentence_transformers.CrossEncoder(str(export), device="cpu", trust_remote_code=True)
    theirs = cross.predict(list(zip(prefixes, passages, strict=True)))  # identity activation: logits
    assert torch.allclose(ours.squeeze(-1), torch.as_tensor(theirs, dtype=torch.float32), atol=1e-5)
    # What it encoded: the pair as ralm builds it (prefix tail first, passage cut to fit 48 tokens).
    features = cross[0].preprocess(list(zip(prefixes, passages, strict=True)))
    expected = encode_pairs(tokenizer, prefixes, passages, max_length=48, max_prefix_tokens=16)
    assert torch.equal(features["input_ids"], expected["input_ids"])
    assert features["input_ids"].shape[1] == 48


def test_push_checks_everything_before_uploading(export, tmp_path, monkeypatch):
    from huggingface_hub import HfApi

    calls = []
    monkeypatch.setattr(
        HfApi, "create_repo", lambda self, repo_id, **kw: calls.append(("create", repo_id, kw))
    )
    monkeypatch.setattr(
        HfApi, "upload_folder", lambda self, **kw: calls.append(("upload", kw)) or "https://hf.co/x/commit/1"
    )
    with pytest.raises(RalmInputError, match="not a valid hub repo id"):
        push_reranker(export, "owner/bad name!")
    with pytest.raises(RalmInputError, match="not a ralm reranker export"):
        push_reranker(tmp_path, "owner/reranker")
    card = export / CARD
    card.write_text(card.read_text().replace("pipeline_tag: text-ranking\n", ""))
    with pytest.raises(RalmInputError, match="metadata field\\(s\\) pipeline_tag missing"):
        push_reranker(export, "owner/reranker")
    assert calls == []  # nothing reached the hub
    card.write_text(
        card.read_text().replace(
            "library_name: transformers\n", "library_name: transformers\npipeline_tag: text-ranking\n"
        )
    )
    assert read_card_metadata(export)["pipeline_tag"] == "text-ranking"
    assert push_reranker(export, "owner/reranker") == "https://hf.co/x/commit/1"
    assert calls[0] == ("create", "owner/reranker", {"repo_type": "model", "private": True, "exist_ok": True})
    assert calls[1][1]["folder_path"] == str(export) and calls[1][1]["repo_id"] == "owner/reranker"


def test_a_card_without_a_hub_base_model_names_the_missing_field(tmp_path, tiny_encoder_dir):
    from ralm.rerank.model_card import render_model_card

    (tmp_path / CARD).write_text(
        render_model_card({"base_model": str(tiny_encoder_dir), "decision": "trained"})
    )
    with pytest.raises(
        RalmInputError, match=r"metadata field\(s\) base_model missing.*base_model: the hub id"
    ):
        check_model_card(tmp_path)


def test_push_to_hub_with_a_local_encoder_without_origin_stops_before_training(tmp_path, tiny_encoder_dir):
    from ralm.train.settings import EncoderOptions
    from ralm.train.train_command import train

    with pytest.raises(RalmInputError, match="has no hub id for the model card's base_model"):
        train(
            str(tmp_path / "no-data"),
            str(tmp_path / "out"),
            encoder=EncoderOptions(name=str(tiny_encoder_dir)),
            push_to_hub="owner/reranker",
        )
    assert not (tmp_path / "out").exists()


def test_the_card_says_why_the_folders_code_must_be_trusted_and_which_files_run(export):
    """The input module is the only code in the folder, and the card names it beside the reason."""
    card = (export / CARD).read_text()
    assert remote_code_note(16) in card
    assert "`trust_remote_code=True` is needed because ralm's cut is code" in card
    assert "this folder's `cross_encoder_input.py` and `pair_rule.py`" in card
    assert sorted(p.name for p in export.rglob("*.py")) == sorted(MODULE_FILES)


def test_no_tokenizer_truncation_setting_builds_ralms_pair(export, real_documents):
    """Why the cut is code: one tokenizer call truncates a pair by one rule (a strategy and a side), which
    cannot keep the prefix's last 16 tokens and then cut only the passage. A long prefix with a short
    passage and a short prefix with a long passage: no setting builds both pairs as ralm does."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(export)
    texts = [d["text"] for d in real_documents[:3]]
    prefixes, passages = [texts[0][:3000], "In the beginning"], [texts[1][:60], texts[2][:3000]]
    encoded = encode_pairs(tokenizer, prefixes, passages, max_length=48, max_prefix_tokens=16)
    expected = [[i for i in row if i != tokenizer.pad_token_id] for row in encoded["input_ids"].tolist()]
    tried = []
    for side in ("left", "right"):
        tokenizer.truncation_side = side
        for strategy in ("longest_first", "only_first", "only_second"):
            try:
                got = tokenizer(prefixes, passages, truncation=strategy, max_length=48)["input_ids"]
            except Exception:  # a strategy that cannot fit a pair at all: not ralm's pair either
                continue
            tried.append((side, strategy))
            assert got != expected, (side, strategy)
    assert len(tried) >= 2, tried
