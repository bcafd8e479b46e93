"""The typed training batch: every field present whatever the flags, moved by Lightning like a tensor."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ralm.rerank.model import load_tokenizer
from ralm.train.batch import GroupCollator, RankBatch
from ralm.train.dataset import GroupDataset
from ralm.train.lit_module import RerankerModule
from tests.rerank_fixtures import keyword_rows, save_rows

K = 4


@pytest.fixture(scope="module")
def data_path(tmp_path_factory, real_documents):
    return str(save_rows(keyword_rows(real_documents, 6, k=K, seed=1), tmp_path_factory.mktemp("d") / "d"))


def _batch(path: str, tokenizer, *, abstain: bool, bm25_prior: bool) -> RankBatch:
    groups = GroupDataset(path, [0, 1, 2], abstain=abstain, bm25_prior=bm25_prior)
    return GroupCollator(tokenizer, max_length=40, max_prefix_tokens=12)([groups[i] for i in range(3)])


@pytest.mark.parametrize(
    ("abstain", "bm25_prior"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_every_field_is_a_tensor_whatever_the_flags(data_path, tiny_encoder_dir, abstain, bm25_prior):
    batch = _batch(data_path, load_tokenizer(str(tiny_encoder_dir)), abstain=abstain, bm25_prior=bm25_prior)
    k = K + abstain
    for field in dataclasses.fields(RankBatch):
        assert isinstance(getattr(batch, field.name), torch.Tensor), field.name
    assert batch.mask.shape == batch.lm_logprobs.shape == batch.is_empty.shape == (3, k)
    assert batch.is_empty[:, -1].tolist() == [abstain] * 3  # the empty passage comes last
    assert batch.has_bm25 == bm25_prior
    # present: one value per slot and per prefix; absent: shape (0,), the documented empty feature
    assert batch.bm25_prior.shape == ((3, k) if bm25_prior else (0,))
    assert batch.bm25_top.shape == ((3,) if bm25_prior else (0,))


def test_the_best_bm25_score_is_the_rows_own(data_path, tiny_encoder_dir, real_documents):
    rows = keyword_rows(real_documents, 6, k=K, seed=1)
    batch = _batch(data_path, load_tokenizer(str(tiny_encoder_dir)), abstain=True, bm25_prior=True)
    expected = [max(rows[i]["bm25_scores"]) for i in range(3)]
    assert batch.bm25_top.tolist() == pytest.approx(expected)
    assert batch.bm25_prior[:, -1].tolist() == [0.0] * 3  # the empty passage has no BM25 score


def test_token_type_ids_are_empty_when_the_tokenizer_makes_none(data_path, tiny_encoder_dir):
    tokenizer = load_tokenizer(str(tiny_encoder_dir))
    tokenizer.model_input_names = ["input_ids", "attention_mask"]  # as RoBERTa's tokenizer
    without = _batch(data_path, tokenizer, abstain=False, bm25_prior=False)
    assert without.token_type_ids.shape == (0,)
    assert set(without.encoder_inputs()) == {"input_ids", "attention_mask"}
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]  # as BERT's
    with_types = _batch(data_path, tokenizer, abstain=False, bm25_prior=False)
    assert with_types.token_type_ids.shape == with_types.input_ids.shape
    assert set(with_types.encoder_inputs()) == {"input_ids", "attention_mask", "token_type_ids"}


def test_lightning_moves_and_converts_the_batch(data_path, tiny_encoder_dir):
    """Lightning moves a batch with move_data_to_device and, under DeepSpeed or a *-true precision, rebuilds
    it with the precision plugin's convert_input: both must give back a RankBatch, every field moved."""
    from lightning.fabric.utilities.apply_func import move_data_to_device
    from lightning.pytorch.plugins.precision import HalfPrecision

    batch = _batch(data_path, load_tokenizer(str(tiny_encoder_dir)), abstain=True, bm25_prior=True)
    moved = move_data_to_device(batch, torch.device("meta"))  # a device every CPU machine has
    assert isinstance(moved, RankBatch)
    assert {getattr(moved, f.name).device.type for f in dataclasses.fields(RankBatch)} == {"meta"}
    converted = HalfPrecision("bf16-true").convert_input(batch)
    assert isinstance(converted, RankBatch) and converted.input_ids.dtype == torch.long
    # The features are cast to the training dtype, the labels are not: the LM log-probs stay float32, exact.
    assert converted.bm25_prior.dtype == torch.bfloat16
    assert converted.lm_logprobs.dtype == torch.float32
    assert torch.equal(converted.lm_logprobs, batch.lm_logprobs)
    groups = GroupDataset(data_path, [0, 1, 2], abstain=True, bm25_prior=True)
    expected = [torch.tensor(groups[i].lm_logprobs, dtype=torch.float32).tolist() for i in range(3)]
    got = [row[mask].tolist() for row, mask in zip(converted.lm_logprobs, converted.mask, strict=True)]
    assert got == expected


def test_a_prior_module_refuses_a_batch_without_bm25_scores(data_path, tiny_encoder_dir):
    module = RerankerModule(str(tiny_encoder_dir), max_length=40, max_prefix_tokens=12, bm25_prior=True)
    batch = _batch(data_path, load_tokenizer(str(tiny_encoder_dir)), abstain=False, bm25_prior=False)
    with pytest.raises(ValueError, match="needs batches with BM25 scores"):
        module(batch)
