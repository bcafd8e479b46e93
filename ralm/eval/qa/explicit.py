"""FLARE's explicit queries (§3.2.2) as the authors ask them (jzbjyb/FLARE at ec4b06b, ``src/``).

For an unsure look-ahead sentence: its terms are the groups of tokens with probability <= beta
(``ralm.eval.qa.lookahead.low_confidence_terms``), punctuation-only ones dropped; the LM is asked, once
per term, for a question whose answer is that term, given the answer so far and the sentence (not the
user's input: the authors' context is the generated text in the prompt, ``templates.py:760-763`` with
``openai_api.py:400``, followed by the sentence, ``templates.py:313``); surrounding double quotes are
stripped from the term (``templates.py:312``). A reply that does not end in "?" is dropped
(``templates.py:325-326``), so a sentence whose every reply was dropped retrieves nothing (its queries
are empty and none is sent, ``openai_api.py:424``). With no term left the whole sentence is the one
query (``templates.py:318-319``). Each question retrieves; the passages are interleaved, best first.

Deliberate differences: the authors send the prompt to a chat model; a local LM completes text, so ralm
ends the prompt with ``Question:`` and reads the first non-empty line of the reply. The authors first
have the chat model expand each span to the whole term or phrase it starts
(``extract_constituents``, ``templates.py:162-168``); ralm asks about the span of unsure tokens as it is
(one LM call fewer per term, and a small LM's expansions are unreliable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ralm.eval.qa.lookahead import is_punctuation, low_confidence_terms

QUESTION_PROMPT = (
    "{text}\n\nGiven the above passage, ask a question to which the answer is the term/entity/phrase "
    '"{term}".\n'
    "Question:"
)
"""The authors' question-generation prompt (``templates.py:313``) with ralm's completion cue."""
QUESTION_TOKENS = 32
"""Most tokens of one generated question."""


def question_terms(
    decode: Callable[[list[int]], str], tokens: Sequence[int], probs: Sequence[float], beta: float
) -> list[str]:
    """The terms to ask about: each group of unsure tokens, decoded and stripped, punctuation-only ones
    (and empty ones) dropped."""
    terms = [decode(list(tokens[start:end])).strip() for start, end in low_confidence_terms(probs, beta)]
    return [term for term in terms if not is_punctuation(term)]


def question_prompt(context: str, term: str) -> str:
    """The prompt asking for a question whose answer is `term`; `context` is the answer so far followed
    by the look-ahead sentence."""
    return QUESTION_PROMPT.format(text=context.strip(), term=term.strip('"'))


def reply_question(reply: str) -> str | None:
    """The question in the LM's reply (its first non-empty line), or None when it does not end in "?"."""
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    return line if line.endswith("?") else None
