"""How an LM input starts: the one rule that keeps every condition's input as the LM expects it.

A tokenizer may put special tokens before every text it encodes with its defaults (Gemma, LLaMA and OPT a
BOS; GPT-2 and SmolLM2 nothing): the LM's ``special_prefix``. Passages always carry it first, as the
authors' eval_lm.py encodes them (``tokenizer.encode(doc)``). What an input *without* a passage starts with
is the mode (``--special-tokens``, every LM stage):

- ``every-input`` (default): the same prefix. No retrieval is then the prefix followed by the window's last
  L - |prefix| tokens, the context-matched baseline the prefix followed by what the passage leaves, and
  data-gen's no-retrieval row likewise: conditions differ by the passage alone. Without it a BOS-trained LM
  such as Gemma reads no retrieval's text with no BOS, and every figure against no retrieval mixes the
  passage's effect with the BOS's (measured on the demo's windows: about a third of no retrieval's
  perplexity).
- ``eval-lm``: nothing, as eval_lm.py encodes the evaluated text (``add_special_tokens=False``): the
  asymmetry of the published numbers, kept only to reproduce them, and named in every output.

QA and FLARE prompts start with the prefix in both modes, as the authors' eval_qa.py tokenizes a prompt with
the tokenizer's defaults.

The lead is never cut (``ralm.lm.scoring.ScoreRequest.lead``): it takes the room of a window's first tokens.
Window 0, whose targets are all but its first token, then predicts its second token from the lead alone
(its first is neither context nor target, in the same targets as eval-lm's); window 0 retrieves nothing
in any condition, so comparisons, which read the retrieving windows, are unaffected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from ralm.errors import RalmInputError

SpecialTokens = Literal["every-input", "eval-lm"]
"""The modes of ``--special-tokens`` (above)."""

SPECIAL_TOKENS: tuple[str, ...] = get_args(SpecialTokens)


def check_special_tokens(mode: str) -> None:
    if mode not in SPECIAL_TOKENS:
        raise RalmInputError(f"--special-tokens: must be one of {', '.join(SPECIAL_TOKENS)}, got {mode!r}")


def input_lead(special_prefix: Sequence[int], mode: str) -> tuple[int, ...]:
    """The ids an input without a passage starts with under `mode`."""
    check_special_tokens(mode)
    return tuple(special_prefix) if mode == "every-input" else ()


def special_tokens_record(special_prefix: Sequence[int], mode: str) -> dict:
    """What a results file records of the rule (keyed: a resumed run cannot mix two modes' rows)."""
    return {"special_tokens": mode, "special_prefix": list(special_prefix)}


def describe(special_prefix: Sequence[int], mode: str) -> str:
    """The rule in one line, for a report's header."""
    if not special_prefix:
        return "the tokenizer adds no special tokens: every input starts with its text or passage"
    ids = ", ".join(str(i) for i in special_prefix)
    if mode == "every-input":
        return f"every input starts with the tokenizer's special prefix [{ids}], with or without a passage"
    return (
        f"eval-lm mode: passages start with the tokenizer's special prefix [{ids}], inputs without a passage "
        "do not (eval_lm.py's asymmetry: comparisons against no retrieval mix in the prefix's effect)"
    )
