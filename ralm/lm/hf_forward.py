"""The forward passes of a Hugging Face causal LM behind ``ralm.lm.interface.LanguageModel``: logits at chosen
positions (scoring) and one KV-cached decoding step (generation). ``ralm.lm.loading.FrozenLM`` delegates here.

Scoring applies the LM head only at the positions that predict target tokens (``logits_to_keep``), which at
stride 4 skips >99% of the vocabulary projection; how a model takes ``logits_to_keep`` is found on first use,
since its spelling changed across transformers versions. Decoding wraps a ``transformers`` ``DynamicCache``.
"""

from __future__ import annotations

import inspect
import weakref

import torch

# How each model takes `logits_to_keep`, found on first use: "2d" (a per-row position tensor, recent
# transformers), "int" (keep the last n positions), or "none" (full logits, then gather).
_KEEP_MODE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_for_scoring(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """`model` behind ``torch.compile`` for ``scored_logits`` (``LMOptions.compile``).

    On a CPU inductor's ``freezing`` treats the frozen weights as constants: the linear layers' weights are
    packed once for oneDNN, and the elementwise work around them (Gemma's fp32 RMSNorm round trips, GELU) is
    fused into a few kernels. Shapes follow torch's automatic dynamic rule: the first input shape compiles
    static, a second one a dynamic graph.

    Freezing is set in inductor's process-wide config, not as ``torch.compile(options=...)``: compiled
    lazily at the first call and again at each new shape, the graph must see it every time, and as an
    option it did not take (no faster than inductor without it; bench/lm_forward.py). Every later compile
    in the process freezes too, which a frozen LM's process wants.
    """
    if torch.device(device).type == "cpu":
        import torch._inductor.config as inductor_config

        inductor_config.freezing = True
    return torch.compile(model)


def scored_logits(model, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Logits (B, K, V) at `positions` (B, K) of each row, computing the head only where needed.

    `model` may be a ``torch.compile`` wrapper; how it takes ``logits_to_keep`` is the wrapped model's."""
    key = getattr(model, "_orig_mod", model)
    mode = _KEEP_MODE.get(key)
    if mode in (None, "2d"):
        try:
            logits = model(input_ids=input_ids, logits_to_keep=positions, use_cache=False).logits
            if logits.ndim == 3 and logits.shape[:2] == positions.shape:
                _KEEP_MODE[key] = "2d"
                return logits
        except torch.OutOfMemoryError:
            raise  # a real failure, not a sign that this model lacks per-row logits_to_keep
        except (TypeError, IndexError, RuntimeError, ValueError):
            if mode == "2d":
                raise
        mode = None
    if mode in (None, "int"):
        first = int(positions.min())
        keep = input_ids.shape[1] - first
        try:
            logits = model(input_ids=input_ids, logits_to_keep=keep, use_cache=False).logits
            _KEEP_MODE[key] = "int"
            return torch.take_along_dim(logits, (positions - first)[..., None], dim=1)
        except TypeError:
            if mode == "int":
                raise
    _KEEP_MODE[key] = "none"
    logits = model(input_ids=input_ids, use_cache=False).logits
    return torch.take_along_dim(logits, positions[..., None], dim=1)


def eos_ids(tokenizer, model) -> set[int]:
    """Token ids that end a generation: the tokenizer's EOS and the model config's (may be a list)."""
    ids: set[int] = set()
    tok_eos = getattr(tokenizer, "eos_token_id", None)
    if tok_eos is not None:
        ids.add(int(tok_eos))
    cfg_eos = getattr(getattr(model, "config", None), "eos_token_id", None)
    if isinstance(cfg_eos, int):
        ids.add(cfg_eos)
    elif isinstance(cfg_eos, list | tuple):
        ids.update(int(i) for i in cfg_eos)
    return ids


def _cache_argument(model: torch.nn.Module) -> str:
    """transformers renamed ``past_key_values`` to ``cache`` during 5.x; accept both spellings."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class HFDecoding:
    """``ralm.lm.interface.Decoding`` over a ``transformers`` ``DynamicCache``."""

    def __init__(self, model: torch.nn.Module):
        from transformers import DynamicCache  # transformers only when something is generated

        self.model = model
        self.cache = DynamicCache()
        self._cache_arg = _cache_argument(model)
        self._logits_to_keep = "logits_to_keep" in inspect.signature(model.forward).parameters

    def __len__(self) -> int:
        return self.cache.get_seq_length()

    def crop(self, length: int) -> None:
        held = len(self)
        if length < held:
            self.cache.crop(-(held - length))  # a negative value removes that many tokens from the end

    def feed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        kwargs = {"input_ids": input_ids, "use_cache": True}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        kwargs[self._cache_arg] = self.cache
        if self._logits_to_keep:
            # The vocabulary projection only where we read it, asked for by index, not as the int 1: an int
            # makes transformers slice hidden_states[:, -1:, :], a view whose batch stride spans the whole
            # input, and torch's bf16 linear on a CPU then repacks the whole head weight for every row
            # (Gemma 3's 262k x 640: a 479-token prompt took 1.5 s against 0.23 s on a 2-core Xeon, with the
            # same logits; bench/generation_prompt.py, bench/RESULTS.md "Generation's prompt").
            last = torch.tensor([input_ids.shape[1] - 1], device=input_ids.device)
            kwargs["logits_to_keep"] = last
        return self.model(**kwargs).logits[:, -1].float()
