"""Continuation scoring against a naive reference: one unpadded forward per request, full logits,
CrossEntropyLoss."""

from __future__ import annotations

import random

import pytest
import torch

from ralm.lm import hf_forward, scoring
from ralm.lm.loading import compiled_record, load_lm
from ralm.lm.scoring import ScoreRequest, ScoringSettings, compose, score_continuations
from ralm.testing import reference_logprobs

SETTINGS = ScoringSettings(input_length=128, max_passage_tokens=64)


def test_compose_cuts_passage_and_drops_prefix_from_the_start():
    passage, prefix, target = [1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15], [20, 21]
    # passage cut to 3, room for prefix = 9 - 3 - 2 = 4: the last four prefix tokens stay.
    assert compose(passage, prefix, target, input_length=9, max_passage_tokens=3) == [
        1,
        2,
        3,
        12,
        13,
        14,
        15,
        20,
        21,
    ]
    # Everything fits: nothing dropped.
    assert compose([1], [10, 11], [20], input_length=100) == [1, 10, 11, 20]
    # Exactly passage + target: the prefix disappears, the passage sits right before the target.
    assert compose([1, 2], [10, 11], [20], input_length=3) == [1, 2, 20]
    assert compose([], [10, 11, 12], [20], input_length=3) == [11, 12, 20]


def test_compose_puts_the_lead_first_and_never_cuts_it():
    """An input without a passage starts with the LM's lead (its BOS): never cut by the passage limit, and it
    takes the room of the prefix's first tokens."""
    assert compose([], [10, 11, 12], [20], input_length=3, max_passage_tokens=0, lead=[2]) == [2, 12, 20]
    assert compose([2, 5, 6], [10, 11], [20], input_length=4, max_passage_tokens=2, lead=[]) == [2, 5, 11, 20]
    assert compose([], [], [20, 21], input_length=4, lead=[2]) == [2, 20, 21]  # the lead is context enough


def test_compose_rejects_what_cannot_fit_or_has_no_context():
    with pytest.raises(ValueError, match="do not fit"):
        compose([1, 2, 3], [10], [20, 21], input_length=4)
    with pytest.raises(ValueError, match="no context"):
        compose([], [], [20], input_length=8)


def random_requests(rng: random.Random, vocab: int, count: int) -> list[ScoreRequest]:
    out = []
    for _ in range(count):
        passage = [rng.randrange(vocab) for _ in range(rng.choice([0, 5, 40, 90]))]  # 90 > max_passage 64
        prefix = [rng.randrange(vocab) for _ in range(rng.choice([1, 7, 60, 200]))]  # 200 forces dropping
        target = [rng.randrange(vocab) for _ in range(rng.choice([1, 4, 16]))]
        out.append(ScoreRequest(passage, prefix, target))
    return out


@pytest.fixture(scope="module")
def tiny_lm(tiny_lm_dir):
    return load_lm(tiny_lm_dir)


def tiny_llama(tokenizer_vocab: int):
    """A Llama (RoPE, RMSNorm, untied head) built from a config: a second architecture, nothing GPT-2."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=tokenizer_vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_batched_scores_match_naive_reference(tiny_lm, arch, tmp_path):
    lm = tiny_lm
    if arch == "llama":
        model = tiny_llama(lm.vocab_size)
        model.save_pretrained(tmp_path)
        lm.tokenizer.save_pretrained(tmp_path)
        lm = load_lm(tmp_path)
    requests = random_requests(random.Random(0), lm.vocab_size, 24)
    got = score_continuations(
        lm, requests, ScoringSettings(input_length=128, max_passage_tokens=64, batch_size=5)
    )
    for request, scores in zip(requests, got, strict=True):
        assert scores.dtype == torch.float32 and scores.shape == (len(request.target),)
        ref = reference_logprobs(lm.model, request.passage, request.prefix, request.target, 128, 64)
        torch.testing.assert_close(scores.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["int", "none"])
def test_fallbacks_for_older_logits_to_keep_agree(tiny_lm, mode):
    """Models whose forward lacks per-row logits_to_keep take a slower path with the same numbers."""
    requests = random_requests(random.Random(1), tiny_lm.vocab_size, 10)
    fast = score_continuations(tiny_lm, requests, SETTINGS)
    hf_forward._KEEP_MODE[tiny_lm.model] = mode
    try:
        slow = score_continuations(tiny_lm, requests, SETTINGS)
    finally:
        del hf_forward._KEEP_MODE[tiny_lm.model]
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_empty_target_gives_empty_tensor_and_order_is_kept(tiny_lm):
    requests = [ScoreRequest([1, 2], [3, 4, 5], []), ScoreRequest([], [7] * 50, [8, 9])]
    got = score_continuations(tiny_lm, requests, ScoringSettings(input_length=64))
    assert got[0].shape == (0,) and got[1].shape == (2,)
    ref = reference_logprobs(tiny_lm.model, [], [7] * 50, [8, 9], 64, 256)
    torch.testing.assert_close(got[1].double(), ref, rtol=1e-5, atol=1e-5)


def test_batches_respect_budgets_and_keep_long_targets_apart():
    lengths, keeps = [10, 50, 30, 50, 5, 50], [2, 2, 2, 2, 2, 40]
    batches = scoring._batches(lengths, keeps, batch_size=2, max_batch_tokens=100, max_batch_scored=64)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for b in batches:
        assert len(b) <= 2 and len(b) * max(lengths[i] for i in b) <= 100
        assert len(b) * max(keeps[i] for i in b) <= 64
    assert batches[0] == [5]  # the 40-target row alone: 2 x 40 would exceed 64 scored positions
    assert batches[1] == [1, 3]  # then longest first


@pytest.mark.gpu
def test_cuda_bf16_scores_track_cpu_fp32(tiny_lm_dir):
    """The GPU path (auto: cuda + bf16) gives the fp32 CPU log-probs to bf16 precision."""
    gpu = load_lm(tiny_lm_dir, device="auto", dtype="auto")
    assert gpu.device.type == "cuda" and gpu.dtype == torch.bfloat16
    cpu = load_lm(tiny_lm_dir, device="cpu", dtype="float32")
    requests = random_requests(random.Random(2), cpu.vocab_size, 16)
    fast = score_continuations(gpu, requests, SETTINGS)
    ref = score_continuations(cpu, requests, SETTINGS)
    for a, b in zip(fast, ref, strict=True):
        assert a.dtype == torch.float32 and a.device.type == "cpu"
        torch.testing.assert_close(a, b, rtol=0.05, atol=0.1)


@pytest.mark.slow
def test_compiled_scoring_matches_the_naive_reference(tiny_lm_dir):
    """``--compile``: the same per-token log-probs through ``torch.compile`` (freezing on a CPU), across
    the several input shapes that make it recompile, and a run that records it."""
    lm = load_lm(tiny_lm_dir, compile=True)
    requests = random_requests(random.Random(2), lm.vocab_size, 12)
    got = score_continuations(lm, requests, SETTINGS)
    assert lm._compiled is not None
    for request, scores in zip(requests, got, strict=True):
        ref = reference_logprobs(lm.model, request.passage, request.prefix, request.target, 128, 64)
        torch.testing.assert_close(scores.double(), ref, rtol=1e-4, atol=1e-4)
    assert compiled_record(lm) == {"lm_compiled": True}
    assert compiled_record(load_lm(tiny_lm_dir)) == {}  # eager runs record nothing: their keys stay
