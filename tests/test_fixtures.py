"""The shared tiny models load through the ordinary Hugging Face path and behave like real ones."""

import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer


def test_tiny_lm_round_trips_text(tiny_lm_dir, real_documents):
    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    text = real_documents[0]["text"][:300]
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    logits = model(torch.tensor([ids[:20]])).logits
    assert logits.shape == (1, 20, len(tok))


def test_tiny_encoder_encodes_pairs(tiny_encoder_dir):
    tok = AutoTokenizer.from_pretrained(tiny_encoder_dir)
    enc = tok("the query", "the passage", return_tensors="pt")
    ids = enc["input_ids"][0].tolist()
    assert ids[0] == tok.cls_token_id and ids.count(tok.sep_token_id) == 2
    model = AutoModelForSequenceClassification.from_pretrained(tiny_encoder_dir, num_labels=1)
    assert model(**enc).logits.shape == (1, 1)
