"""The option groups every LM stage shares: which frozen LM reads the inputs (`LMOptions`) and how In-Context
RALM cuts a text into retrieval windows (`WindowOptions`).

`ralm data-gen`, `ralm eval ppl`, `ralm eval qa`, `ralm eval flare` and `ralm run` take the same groups,
so an option means one thing everywhere and the rule that caps the LM input at the model's context
(`LMOptions.input_length`) is written once. On the command line the fields are leaf options (``--lm``,
``--max-length``, ``--dtype``, ``--stride``); ``--lm X`` is short for ``--lm.model X`` (a YAML file may
write ``lm: X`` too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ralm.config_types import AtLeastTwoInt, Dtype, NonNegativeInt, PositiveInt, added_later, check_fields
from ralm.errors import RalmInputError
from ralm.lm.special_tokens import SpecialTokens

if TYPE_CHECKING:
    from ralm.lm.loading import FrozenLM

PAPER_INPUT_LENGTH = 1024
"""The paper's LM input (GPT-2's context): the default input length wherever the LM allows it."""


@dataclass
class LMOptions:
    """The frozen causal LM: which model, where it runs, and how many tokens one input holds."""

    model: str | None = None
    """Hugging Face id, model folder, or .gguf file of the frozen LM (``--lm`` for short)."""
    gguf_file: str | None = None
    """GGUF file name inside the model folder, if any."""
    device: str = "auto"
    """auto: cuda when available, else cpu; or cpu, cuda, cuda:N."""
    dtype: Dtype = "auto"
    """auto: bf16 on a GPU that computes it natively, else fp32; fastest: auto on a GPU, on a CPU bf16 where
    measured faster; config: the model config's dtype, as the authors' eval_lm.py loads it (fp16 for OPT);
    or fp32, bf16, fp16."""
    max_length: AtLeastTwoInt | None = None
    """LM input length in tokens (passage + prefix + targets); default 1024, the paper's; never more than
    the LM's own context."""
    special_tokens: SpecialTokens = "every-input"
    """How an input without a passage starts: every-input: with the tokenizer's default special tokens (its
    BOS), as every passage does, so conditions differ by the passage alone; eval-lm: without them, as the
    authors' eval_lm.py encodes the text (only to reproduce its numbers; ralm.lm.special_tokens)."""
    compile: bool = added_later(False)
    """torch.compile the scoring forward (inductor; on a CPU with the weights frozen as constants, which
    prepacks them for oneDNN and fuses the elementwise work between the matrix products). Gemma-3-270m bf16 on
    a 2-core Xeon with AMX: data-gen's pairs/s 1.43x after about a minute of compiling, so it pays on runs of
    many minutes (bench/RESULTS.md, "Compiled scoring"); its labels move like another bf16 kernel's.
    Generation stays eager."""

    def __post_init__(self) -> None:
        check_fields(self)

    def input_length(self, context_length: int) -> int:
        """THE cap rule: the requested input length (``--max-length``, default the paper's 1,024) within the
        LM's context."""
        return min(self.max_length or PAPER_INPUT_LENGTH, context_length)

    def require(self) -> str:
        """The model to load; a command without one fails naming the option."""
        if not self.model:
            raise RalmInputError("--lm: required (a Hugging Face id, model folder, or .gguf file)")
        return self.model

    def load(self) -> FrozenLM:
        """The frozen LM these options name, on their device and dtype."""
        from ralm.lm.loading import load_lm

        return load_lm(
            self.require(),
            device=self.device,
            dtype=self.dtype,
            gguf_file=self.gguf_file,
            special_tokens=self.special_tokens,
            compile=self.compile,
        )


def window_fits(input_length: int, max_passage_tokens: int, *parts: int) -> bool:
    """THE window-fit rule: one LM input of `input_length` tokens (already capped: `LMOptions.input_length`)
    holds a whole passage cut to `max_passage_tokens` (0: no passage) beside every other part of a window,
    none overlapping (`parts`: the targets s, the query ℓ where the prefix must hold it, the ranking tokens
    s'). data-gen, eval and a zero-shot reranking LM refuse inputs with it, each naming its options."""
    return max_passage_tokens + sum(parts) <= input_length


LMOptions.shorthand = "model"  # `--lm X` / YAML `lm: X` mean `--lm.model X` (ralm.cli.command_args)


@dataclass
class WindowOptions:
    """In-Context RALM's retrieval windows: retrieve every s tokens with the last ℓ tokens as the query,
    and cut each passage before it is prepended."""

    stride: PositiveInt = 4
    """s: retrieve every s tokens; each window (or training prefix) scores its next s tokens
    (the paper: 4)."""
    query_tokens: PositiveInt = 32
    """ℓ: the BM25 query is the decoded last ℓ tokens before the targets (the paper: 32)."""
    max_passage_tokens: NonNegativeInt = 256
    """Retrieved passages are cut to this many tokens (the paper: 256)."""

    def __post_init__(self) -> None:
        check_fields(self)
