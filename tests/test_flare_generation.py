"""Greedy generation (ralm.lm.generation) against a plain reference loop with no cache, on a tiny GPT-2."""

from __future__ import annotations

import pytest
import torch

from ralm.lm.generation import Generator, generate_batch
from ralm.lm.loading import load_lm


@pytest.fixture(scope="module")
def tiny_lm(tiny_lm_dir):
    torch.manual_seed(0)
    lm = load_lm(tiny_lm_dir, device="cpu", dtype="float32")
    # A random 2-layer model has nearly flat logits; sharpen them so greedy choices are far from ties.
    with torch.no_grad():
        lm.model.lm_head.weight.mul_(40.0)
    return lm


def reference_greedy(lm, prompt, n):
    """Full forward over the whole sequence each step: no cache, no cleverness."""
    ids, probs = list(prompt), []
    eos = lm.tokenizer.eos_token_id
    with torch.no_grad():
        for _ in range(n):
            logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
            token = int(torch.argmax(logits))
            if token == eos:
                break
            probs.append(float(torch.softmax(logits, -1)[token]))
            ids.append(token)
    return ids[len(prompt) :], probs


def test_generator_matches_reference_and_reuses_the_cache(tiny_lm, real_documents):
    prompt = tiny_lm.encode(real_documents[0]["text"][:300])
    gen = Generator(tiny_lm)
    first = gen.generate(prompt, 12)
    ref_ids, ref_probs = reference_greedy(tiny_lm, prompt, 12)
    assert first.token_ids == ref_ids
    assert first.probs == pytest.approx(ref_probs, abs=1e-5)
    # A prompt that extends the first one by some of its own output: the shared prefix is not fed again.
    extended = prompt + first.token_ids[:5] + tiny_lm.encode(" and")
    second = gen.generate(extended, 8)
    assert gen.counters.tokens_reused == len(prompt) + 5
    ref_ids, ref_probs = reference_greedy(tiny_lm, extended, 8)
    assert second.token_ids == ref_ids
    assert second.probs == pytest.approx(ref_probs, abs=1e-5)
    # A prompt sharing only a shorter prefix crops the cache back and still matches.
    third = gen.generate(prompt[:10] + tiny_lm.encode(" the"), 6)
    assert third.token_ids == reference_greedy(tiny_lm, prompt[:10] + tiny_lm.encode(" the"), 6)[0]


def test_stop_rule_eos_and_context(tiny_lm, real_documents):
    prompt = tiny_lm.encode(real_documents[1]["text"][:200])
    full = Generator(tiny_lm).generate(prompt, 10)
    stopped = Generator(tiny_lm).generate(prompt, 10, stop=lambda toks: len(toks) == 3)
    assert stopped.token_ids == full.token_ids[:3] and stopped.stop_reason == "stop"
    assert full.stop_reason in ("length", "eos")
    near_full = tiny_lm.encode(" ".join(d["text"] for d in real_documents[:5]))[: tiny_lm.context_length - 4]
    capped = Generator(tiny_lm).generate(near_full, 10)
    assert len(capped.token_ids) <= 4 and capped.stop_reason in ("context", "eos")


def test_batch_rows_equal_lone_decodes(tiny_lm, real_documents):
    prompts = [tiny_lm.encode(d["text"][: 60 + 40 * i]) for i, d in enumerate(real_documents[:4])]
    batch = generate_batch(tiny_lm, prompts, 8)
    assert sum(len(r.token_ids) for r in batch) >= 16, "the rows should say something, not stop at once"
    for prompt, row in zip(prompts, batch, strict=True):
        alone = Generator(tiny_lm).generate(prompt, 8)
        assert row.token_ids == alone.token_ids
        assert row.probs == pytest.approx(alone.probs, abs=1e-4)
