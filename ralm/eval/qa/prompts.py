"""Prompts for open-domain QA (the RALM paper's, verbatim) and FLARE, and fitting passages into the context.

Long-form generation (``--format continuation``) shows the passages before the text to continue
(``continuation_prompt``), as In-Context RALM prepends them.

The ODQA prompts are those of the RALM authors' ``eval_qa.py`` (PAPERS.md, paper appendix C): closed book
``Answer these questions:\\nQ: {q}\\nA:``; open book the passages as ``{title}\\n\\n{text}`` blocks joined by
blank lines, then ``Based on these texts`` (``this text`` for one passage) ``, answer these questions:``.
Questions are normalised as there: a final "?" added, the first letter lower-cased.

When a prompt does not fit the LM's context, the passages are cut (each keeps an equal share of the room
left), never the question; the authors' script instead dropped tokens from the start of the prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ralm.errors import RalmInputError

if TYPE_CHECKING:
    from ralm.lm.interface import LanguageModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PromptPassage:
    """A passage as shown in a prompt: its id (for traces), title and body text."""

    id: str
    title: str
    text: str


def normalize_question(question: str) -> str:
    """As the RALM authors' ``normalize_question``: end with "?" and lower-case the first character."""
    question = question.strip()
    if not question.endswith("?"):
        question += "?"
    return question[0].lower() + question[1:]


def ralm_qa_prompt(question: str, passages: Sequence[PromptPassage]) -> str:
    """The paper's closed-book (no passages) or open-book prompt."""
    q = normalize_question(question)
    if not passages:
        return f"Answer these questions:\nQ: {q}\nA:"
    docs = "\n\n".join(f"{p.title}\n\n{p.text}" for p in passages)
    which = "this text" if len(passages) == 1 else "these texts"
    return f"{docs}\n\nBased on {which}, answer these questions:\nQ: {q}\nA:"


def search_results(passages: Sequence[PromptPassage]) -> str:
    """FLARE's passage block (empty without passages): numbered ``[i] title: text`` lines."""
    if not passages:
        return ""
    return (
        "Search results:\n"
        + "".join(f"[{i + 1}] {p.title}: {p.text}\n" for i, p in enumerate(passages))
        + "\n"
    )


def flare_prompt(question: str, passages: Sequence[PromptPassage], exemplars: Sequence[tuple]) -> str:
    """FLARE's layout: few-shot exemplars, then the passages prepended to the user input, then the input.

    An exemplar is ``(question, answer)`` or ``(question, answer, passages)`` (``use_ctx_for_examplars``:
    its passages shown before it, as for the input). The exemplars come first so that their KV cache is
    shared by every step, whatever was retrieved. The answer is generated right after ``Answer:``.
    """
    shots = "".join(
        f"{search_results(shot[2] if len(shot) > 2 else ())}Question: {shot[0]}\nAnswer: {shot[1]}\n\n"
        for shot in exemplars
    )
    return f"{shots}{search_results(passages)}Question: {question.strip()}\nAnswer:"


def continuation_prompt(text: str, passages: Sequence[PromptPassage]) -> str:
    """The long-form layout (``--format continuation``): each passage as In-Context RALM shows it (its
    title line, its text) and a blank line, then the text to continue, which the LM continues directly."""
    return "".join(f"{p.title}\n{p.text}\n\n" for p in passages) + text


def input_length_for(lm: LanguageModel, input_length: int | None) -> int:
    """The LM input length a runner uses: `input_length` exactly as given (a command resolves it once, with
    ``LMOptions.input_length``), or, when a Python caller gives none, that rule with the default options."""
    if input_length is not None:
        return input_length
    from ralm.lm.options import LMOptions

    return LMOptions().input_length(lm.context_length)


def prompt_ids(lm: LanguageModel, prompt: str) -> list[int]:
    """A prompt's token ids as the LM expects an input to start: its tokenizer's special prefix (a BOS, if
    it adds one), then the text (the authors' eval_qa.py tokenizes prompts with the tokenizer's defaults;
    ``ralm.lm.special_tokens``)."""
    return [*lm.special_prefix, *lm.encode(prompt)]


def keep_last(lm: LanguageModel, ids: Sequence[int], max_tokens: int) -> list[int]:
    """`ids` (a `prompt_ids` result) cut from the start to `max_tokens`, the special prefix kept first."""
    lead = len(lm.special_prefix)
    if len(ids) <= max_tokens:
        return list(ids)
    return [*ids[:lead], *ids[len(ids) - (max_tokens - lead) :]]


class PassageFitter:
    """Cuts passages so that ``render(passages)`` plus `reserve` new tokens fits in `input_length` tokens."""

    def __init__(self, lm: LanguageModel, input_length: int):
        self.lm = lm
        self.input_length = input_length
        self.cuts = 0
        self._warned = False

    def _ids(self, prompt: str) -> list[int]:
        return prompt_ids(self.lm, prompt)

    def check_question_fits(
        self, render: Callable[[Sequence[PromptPassage]], str], reserve: int, where: str
    ) -> None:
        """Raise when even the prompt without passages leaves no room (before any generation starts)."""
        n = len(self._ids(render([])))
        if n + min(reserve, 1) > self.input_length:
            raise RalmInputError(
                f"{where}: the prompt without passages is {n} tokens, longer than the LM's context "
                f"({self.input_length})"
            )

    def fit(
        self,
        render: Callable[[Sequence[PromptPassage]], str],
        passages: Sequence[PromptPassage],
        reserve: int,
    ) -> tuple[list[int], list[PromptPassage]]:
        """Token ids of the rendered prompt and the (possibly cut) passages, leaving `reserve` tokens free."""
        budget = self.input_length - reserve
        ids = self._ids(render(passages))
        if len(ids) <= budget or not passages:
            return ids, list(passages)
        skeleton = len(self._ids(render([PromptPassage(p.id, p.title, "") for p in passages])))
        texts = [self.lm.encode(p.text) for p in passages]
        share = max((budget - skeleton) // len(passages), 0)
        while True:
            cut = [
                PromptPassage(p.id, p.title, self.lm.decode(t[:share]))
                for p, t in zip(passages, texts, strict=True)
            ]
            ids = self._ids(render(cut))
            if len(ids) <= budget or share == 0:
                break
            # Re-tokenising the joined text can merge or split tokens at the cut: shrink until it fits.
            share = max(share - max((len(ids) - budget) // len(passages), 1), 0)
        self.cuts += 1
        if not self._warned:
            log.warning(
                "prompts longer than the LM's context (%d tokens): passages are cut, never the question",
                self.input_length,
            )
            self._warned = True
        if share == 0 and len(ids) > budget:
            return self._ids(render([])), []
        return ids, cut
