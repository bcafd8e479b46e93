"""What every stage needs from a frozen causal LM: the ``LanguageModel`` protocol.

Scoring (``ralm.lm.scoring``), generation (``ralm.lm.generation``), ``ralm eval ppl``, ``ralm data-gen`` and
QA/FLARE reach the LM only through these members, so any object that has them can be evaluated: the
Hugging Face path (``ralm.lm.loading.FrozenLM``) and, in the tests, a bigram table in pure Python
(``tests/protocol_lm.py``). Token ids are plain ints; tensors cross the interface only where the model
computes (logits at chosen positions, one decoding step), on ``device``.

Outside ``ralm.lm`` nothing touches the frozen LM's model or tokenizer object (the reranker and the dense
encoder have their own), so what the stages record and compute does not depend on how an LM is built.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: importing the protocol stays cheap
    import torch


class Decoding(Protocol):
    """The state of one incremental decode: the keys and values of the tokens fed so far (a KV cache)."""

    def __len__(self) -> int:
        """How many tokens the state holds."""
        ...

    def crop(self, length: int) -> None:
        """Keep only the first `length` tokens (``length <= len(self)``): the prefix a new prompt shares."""
        ...

    def feed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run `input_ids` (B, T) after the tokens held, add them to the state, and return the float32
        next-token logits (B, V) of each row's last position.

        `attention_mask` (B, held + T) and `position_ids` (B, T) are given for left-padded batches
        (``generate_batch``): a pad is masked out and positions count real tokens only. Without them the
        rows are unpadded and positions continue from ``len(self)``.
        """
        ...


@runtime_checkable
class LanguageModel(Protocol):
    """A frozen causal LM with its tokenizer, as ralm's stages use it."""

    name: str
    """What was loaded (recorded in every results file)."""
    tokenizer_name: str
    """The tokenizer's id or folder (recorded; "" when it has none)."""
    device: torch.device
    """Where ``logits`` and ``Decoding.feed`` take their tensors."""
    dtype: torch.dtype
    """The weights' dtype (recorded)."""
    context_length: int
    """The model's own context in tokens; callers cap their input at it (``LMOptions.input_length``)."""
    special_prefix: tuple[int, ...]
    """The special tokens the tokenizer puts first by default (a BOS, or none): first in every passage and
    every QA/FLARE prompt (``ralm.lm.special_tokens``)."""
    lead: tuple[int, ...]
    """What an input without a passage starts with: ``special_prefix`` under ``--special-tokens
    every-input`` (the default), nothing under ``eval-lm`` (``ralm.lm.special_tokens``)."""
    special_tokens: str
    """The mode that made ``lead`` (recorded in every results file)."""
    eos_ids: Set[int]
    """Token ids that end a generation."""

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, with no special tokens."""
        ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` of each text (one call, so an implementation may batch)."""
        ...

    def encode_passages(self, texts: Sequence[str]) -> list[list[int]]:
        """Passages as eval_lm.py encodes them: ``special_prefix`` then ``encode``."""
        ...

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]] | None:
        """(``encode(text)``, the character at which each token starts), or None when the tokenizer cannot
        say (the text is then one document to the bootstrap)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids` (queries and prompts are made from it)."""
        ...

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Next-token logits (B, K, V) at `positions` (B, K) of each row of `input_ids` (B, T).

        Rows are right-padded with arbitrary ids; every position asked for lies before the row's padding,
        so (the model being causal) no pad can change it. Any float dtype; callers take ``.float()``.
        """
        ...

    def start_decoding(self) -> Decoding:
        """An empty decoding state (``ralm.lm.generation``)."""
        ...
