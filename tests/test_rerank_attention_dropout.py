"""`--attention-dropout`: it reaches the encoder's attention (and only there), is recorded in checkpoints, and
an encoder whose config cannot take it is refused rather than trained otherwise than asked."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import BertConfig, GPT2Config

from ralm.errors import RalmInputError
from ralm.rerank.model import load_cross_encoder, load_tokenizer
from ralm.train.lit_module import RerankerModule
from ralm.train.settings import EncoderOptions


@pytest.fixture(scope="module")
def encoder_without_hidden_dropout(tmp_path_factory, tiny_encoder_dir):
    """The tiny BERT with hidden dropout 0 and attention dropout 0.5: in training mode, what varies between
    two forward passes can then only come from the attention's dropout."""
    from transformers import BertModel

    out = tmp_path_factory.mktemp("encoder_attention_only")
    config = BertConfig.from_pretrained(tiny_encoder_dir)
    config.hidden_dropout_prob, config.attention_probs_dropout_prob = 0.0, 0.5
    torch.manual_seed(0)
    BertModel(config).save_pretrained(out)
    load_tokenizer(str(tiny_encoder_dir)).save_pretrained(out)
    return out


def _two_training_passes(model, tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    batch = tokenizer(["the king said"], ["and the servants answered him"], return_tensors="pt")
    model.train()
    outputs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs.append(model(**batch).logits)
    return outputs[0], outputs[1]


def test_zero_attention_dropout_makes_training_passes_agree(encoder_without_hidden_dropout):
    tokenizer = load_tokenizer(str(encoder_without_hidden_dropout))
    kept = load_cross_encoder(str(encoder_without_hidden_dropout))
    assert kept.config.attention_probs_dropout_prob == 0.5  # None keeps the encoder's own
    a, b = _two_training_passes(kept, tokenizer)
    assert not torch.equal(a, b)  # the attention's dropout draws differ with the seed
    off = load_cross_encoder(str(encoder_without_hidden_dropout), attention_dropout=0.0)
    assert off.config.attention_probs_dropout_prob == 0.0
    assert off.config.hidden_dropout_prob == 0.0  # only the attention's dropout is touched
    a, b = _two_training_passes(off, tokenizer)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_module_records_attention_dropout_in_its_hparams(tiny_encoder_dir):
    default = RerankerModule(str(tiny_encoder_dir))
    # BertConfig's documented default (transformers): 0.1.
    assert default.encoder.config.attention_probs_dropout_prob == 0.1
    assert default.hparams.attention_dropout is None
    module = RerankerModule(str(tiny_encoder_dir), attention_dropout=0.0)
    assert module.encoder.config.attention_probs_dropout_prob == 0.0
    assert module.hparams.attention_dropout == 0.0


def test_an_encoder_config_without_attention_dropout_is_refused(tmp_path):
    GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=50).save_pretrained(tmp_path)
    with pytest.raises(RalmInputError, match="attention_probs_dropout_prob, attention_dropout"):
        load_cross_encoder(str(tmp_path), attention_dropout=0.0)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "gpt2"  # nothing written


@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_attention_dropout_outside_zero_one_is_a_clear_error(value):
    with pytest.raises(RalmInputError, match="attention_dropout"):
        EncoderOptions(name="x", max_pair_tokens=64, max_prefix_tokens=16, attention_dropout=value)
