"""Greedy generation with the probability of every chosen token, for FLARE and open-domain QA.

FLARE decides whether to retrieve from the probabilities of the tokens the LM just produced, so generation
must return them (a local model gives them for free; the original code needed an API with log-probs).
Two entry points:

- :class:`Generator` decodes one sequence at a time and keeps the KV cache of its last call. A new prompt
  that starts with tokens the cache already holds (FLARE's next look-ahead after a kept sentence, the
  shared few-shot exemplars after a retrieval) only feeds the new tokens. Counters say how much was fed.
- :func:`generate_batch` decodes many prompts together with left padding (closed-book QA, single-time
  retrieval): each row is exactly what :class:`Generator` would produce alone.

The LM is a :class:`ralm.lm.interface.LanguageModel`: its ``start_decoding`` state (a KV cache) is fed the
new tokens and gives the next-token logits; ``eos_ids``, ``device`` and ``context_length`` bound the decode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ralm.lm.interface import Decoding, LanguageModel

# A stop rule sees the tokens generated so far and says whether to stop after the last one.
StopRule = Callable[[list[int]], bool]


@dataclass
class Generation:
    """What one greedy decode produced (without the prompt, without a final EOS token)."""

    token_ids: list[int]
    probs: list[float]
    """Probability the LM gave each chosen token (softmax of the raw logits, temperature 1)."""
    stop_reason: str
    """``eos``, ``stop`` (the stop rule fired), ``length`` (max_new_tokens) or ``context`` (LM is full)."""


@dataclass
class GenerationCounters:
    """Work done by a :class:`Generator`: the efficiency numbers `bench/flare.py` reports."""

    calls: int = 0
    """Generation calls (each is one prompt decoded to a stop)."""
    forward_passes: int = 0
    tokens_fed: int = 0
    """Prompt and generated tokens run through the model."""
    tokens_reused: int = 0
    """Prompt tokens served from the KV cache of the previous call instead of being fed again."""


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Generator:
    """Greedy decoding of one sequence at a time, reusing the KV cache of the longest shared prefix."""

    def __init__(self, lm: LanguageModel, reuse_cache: bool = True):
        self.lm = lm
        self.reuse_cache = reuse_cache
        self.counters = GenerationCounters()
        self._eos = lm.eos_ids
        self._state: Decoding | None = None
        self._cached_ids: list[int] = []  # the tokens whose keys and values `_state` holds

    def _forward(self, ids: list[int]) -> torch.Tensor:
        """Feed `ids` after the cached tokens; return the logits of the last position (float32, [vocab])."""
        logits = self._state.feed(torch.tensor([ids], device=self.lm.device))
        self.counters.forward_passes += 1
        self.counters.tokens_fed += len(ids)
        self._cached_ids.extend(ids)
        return logits[0]

    def _start(self, prompt_ids: list[int]) -> torch.Tensor:
        """Crop the cache to the prefix it shares with the prompt and feed the rest (at least one token)."""
        keep = _common_prefix(self._cached_ids, prompt_ids) if self.reuse_cache else 0
        keep = min(keep, len(prompt_ids) - 1)
        cache_len = len(self._state) if self._state is not None else 0
        if keep == 0 or cache_len != len(self._cached_ids):
            # Nothing shared, or a model that does not fill the cache as expected: start afresh.
            self._state, self._cached_ids, keep = self.lm.start_decoding(), [], 0
        elif keep < cache_len:
            self._state.crop(keep)
            del self._cached_ids[keep:]
        self.counters.tokens_reused += keep
        return self._forward(list(prompt_ids[keep:]))

    @torch.inference_mode()
    def generate(
        self, prompt_ids: Sequence[int], max_new_tokens: int, stop: StopRule | None = None
    ) -> Generation:
        """Greedily continue `prompt_ids` until EOS, the stop rule, `max_new_tokens` or the LM's context."""
        if not prompt_ids:
            raise ValueError("generation needs a non-empty prompt")
        self.counters.calls += 1
        prompt = list(prompt_ids)
        if len(prompt) >= self.lm.context_length:
            return Generation([], [], "context")
        logits = self._start(prompt)
        tokens: list[int] = []
        probs: list[float] = []
        while True:
            token = int(torch.argmax(logits))
            prob = float(torch.softmax(logits, dim=-1)[token])
            if token in self._eos:
                return Generation(tokens, probs, "eos")
            tokens.append(token)
            probs.append(prob)
            if stop is not None and stop(tokens):
                return Generation(tokens, probs, "stop")
            if len(tokens) >= max_new_tokens:
                return Generation(tokens, probs, "length")
            if len(prompt) + len(tokens) >= self.lm.context_length:
                return Generation(tokens, probs, "context")
            logits = self._forward([token])


@torch.inference_mode()
def generate_batch(
    lm: LanguageModel, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop: StopRule | None = None
) -> list[Generation]:
    """Greedy decoding of several prompts at once (left padding); row i equals a lone decode of prompts[i].

    Prompts must fit the LM's context with room for at least one new token (callers cut passages first).
    """
    if not prompts:
        return []
    device, eos = lm.device, lm.eos_ids
    width = max(len(p) for p in prompts)
    if min(len(p) for p in prompts) == 0:
        raise ValueError("generation needs non-empty prompts")
    budget = min(max_new_tokens, lm.context_length - width)
    pad = next(iter(eos), 0)
    ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    state = lm.start_decoding()
    results = [Generation([], [], "length") for _ in prompts]
    done = [False] * len(prompts)
    step_ids = ids
    for _ in range(max(budget, 0)):
        # Positions count real tokens only, so a padded row sees the same positions as when alone.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, -step_ids.shape[1] :]
        logits = state.feed(step_ids, attention_mask=mask, position_ids=positions)
        probs = torch.softmax(logits, dim=-1)
        chosen = torch.argmax(logits, dim=-1)
        for row, token in enumerate(chosen.tolist()):
            if done[row]:
                continue
            result = results[row]
            if token in eos:
                result.stop_reason, done[row] = "eos", True
                continue
            result.token_ids.append(token)
            result.probs.append(float(probs[row, token]))
            if stop is not None and stop(result.token_ids):
                result.stop_reason, done[row] = "stop", True
        if all(done):
            break
        step_ids = chosen.unsqueeze(-1)
        mask = torch.cat([mask, torch.ones_like(step_ids)], dim=-1)
    for row, result in enumerate(results):
        if not done[row] and len(result.token_ids) < max_new_tokens:
            result.stop_reason = "context"  # the LM's window ran out before max_new_tokens
    return results
