"""FLARE's option group (``FlareOptions``: ``--flare.theta`` or the leaf ``--theta``, ...): the paper's
settings, and the authors' options under their config keys.

Numbers are checked by their types (``ralm.config_types``), the choices in ``__post_init__``, so bad
settings fail when they are built, before any model loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ralm.config_types import ClosedUnitInterval, PositiveInt, check_fields
from ralm.errors import RalmInputError
from ralm.passage_rules import NO_RETRIEVAL

METHODS = ("flare", NO_RETRIEVAL, "single", "window", "stride", "sentence")
QUERY_MODES = ("masked", "past+masked", "full", "explicit")
PRE_RETRIEVAL = ("first", "first-keep", "none")


@dataclass
class FlareOptions:
    """FLARE and baseline settings (defaults: the paper's 2WikiMultihopQA setup)."""

    method: str = "flare"
    """flare, no-retrieval, single, window, stride or sentence."""
    theta: ClosedUnitInterval = 0.8
    """A look-ahead sentence retrieves when a token's probability is <= this (the authors' comparison);
    1 retrieves after every sentence, 0 never (the authors' code reads 0 as "always")."""
    beta: ClosedUnitInterval = 0.4
    """Tokens with probability <= this are masked out of masked queries (each replaced by a space) and
    make the terms explicit queries ask about."""
    query: str = "masked"
    """How FLARE forms its query from an unsure sentence: masked (implicit, tokens <= beta masked),
    past+masked (the last max_query_tokens tokens of the input and the answer so far, then the masked
    sentence: the text's own names with the LM's guess of what comes next), full (the whole sentence) or
    explicit (§3.2: one LM question per term of tokens <= beta, tokens fewer than 5
    apart one term, punctuation-only terms dropped, replies without "?" dropped, no term: the sentence; the
    question is asked given the answer so far, ending in "Question:" for a completion LM, and about the raw
    term, which the authors first have a chat model expand)."""
    docs: PositiveInt = 2
    """Passages a search shows the LM (they replace the previous search's; under first-keep the input's
    stay beside them)."""
    lookahead_tokens: PositiveInt = 64
    """Look-ahead length before it is cut at the first sentence end."""
    window_tokens: PositiveInt = 16
    """Tokens between retrievals for the window and stride baselines."""
    max_new_tokens: PositiveInt = 256
    """Most tokens generated per answer."""
    max_query_tokens: PositiveInt = 64
    """Queries keep at most their last this many tokens."""
    stop: str = "\n\n"
    """End-of-answer pattern: generation stops when the answer contains it (it is cut off)."""
    keep_confident: bool = True
    """Keep a confident look-ahead instead of regenerating it (identical under greedy decoding)."""
    use_full_input_as_query: bool = True
    """The first query (every method's) is the whole input, as in the authors' 2WikiMultihopQA config;
    false (their code's default): its last max_query_tokens."""
    use_ctx_for_examplars: bool = False
    """Each exemplar shows the passages its question retrieves (the authors' "ret"); off by default: two
    passages per exemplar take ~300 tokens of a small LM's context from the question's own passages."""
    look_ahead_pre_retrieval: str = "first"
    """flare: first (retrieve with the input before the first look-ahead, the authors'), first-keep (the
    same, and the input's passages stay first in every prompt, each later search's new passages after
    them: the authors' option of that name) or none (the first look-ahead without passages)."""
    reinit_ctx: bool = False
    """flare: generate every look-ahead without the previous passages, the kept ones excepted (the
    authors' default: false)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Bad settings are input errors, raised when the settings are built (before any model loads):
        the numbers by their types, the choices here."""
        check_fields(self)
        if self.method not in METHODS:
            raise RalmInputError(f"--method must be one of {', '.join(METHODS)}, got '{self.method}'")
        if self.query not in QUERY_MODES:
            raise RalmInputError(f"--query must be one of {', '.join(QUERY_MODES)}, got '{self.query}'")
        if not self.stop:
            raise RalmInputError("--stop must be a non-empty end-of-answer pattern")
        if self.look_ahead_pre_retrieval not in PRE_RETRIEVAL:
            raise RalmInputError(
                f"--look-ahead-pre-retrieval must be one of {', '.join(PRE_RETRIEVAL)}, got "
                f"'{self.look_ahead_pre_retrieval}'"
            )
