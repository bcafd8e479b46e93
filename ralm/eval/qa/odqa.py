"""Open-domain QA as in the RALM paper's §7: a frozen LM reads 0 (closed book) or `docs` passages.

Greedy decoding of at most 10 new tokens, the first line of the output is the prediction, and it is scored
by SQuAD-normalised exact match against any gold answer (the authors' ``eval_qa.py``). The has-answer rate
says how often the passages shown contained a gold answer. Examples are decoded in batches.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ralm.eval.qa.data import QAExample
from ralm.eval.qa.metrics import exact_match, has_answer
from ralm.eval.qa.prompts import PassageFitter, PromptPassage, input_length_for, ralm_qa_prompt
from ralm.eval.qa.retrieval import ctx_to_passage
from ralm.lm.generation import generate_batch
from ralm.lm.interface import LanguageModel


def first_line(text: str) -> str:
    """The prediction: the generation up to its first newline (as the authors' script)."""
    return text.split("\n", 1)[0]


class QARunner:
    """Answers batches of examples with passages from the examples themselves (DPR) or a passage source.

    `input_length`: the LM input length prompts fit in, used as given (the command's
    ``LMOptions.input_length``; default: that rule with the default options)."""

    def __init__(
        self,
        lm: LanguageModel,
        docs: int = 2,
        source: Any = None,
        max_new_tokens: int = 10,
        input_length: int | None = None,
    ):
        self.lm, self.docs, self.source = lm, docs, source
        self.max_new_tokens = max_new_tokens
        self.fitter = PassageFitter(lm, input_length_for(lm, input_length))

    def check(self, examples: Sequence[QAExample]) -> None:
        """Every closed-book prompt must fit the context (checked before generating anything)."""
        for ex in examples:
            render = lambda ps, q=ex.question: ralm_qa_prompt(q, ps)  # noqa: E731
            self.fitter.check_question_fits(render, self.max_new_tokens, f"example '{ex.id}'")

    def passages(self, examples: Sequence[QAExample]) -> list[list[PromptPassage]]:
        """The passages each example's prompt shows, best first."""
        if self.docs == 0:
            return [[] for _ in examples]
        out: list[list[PromptPassage] | None] = [None] * len(examples)
        to_search = []
        for i, ex in enumerate(examples):
            if ex.ctxs is not None:
                out[i] = [ctx_to_passage(c, j) for j, c in enumerate(ex.ctxs[: self.docs])]
            else:
                to_search.append(i)
        if to_search:
            questions = [examples[i].question for i in to_search]
            found = self.source.search(questions, self.docs)
            for i, ps in zip(to_search, found, strict=True):
                out[i] = ps
        return [ps or [] for ps in out]

    def answer_batch(self, examples: Sequence[QAExample]) -> list[dict]:
        """Per-example records: prompt passages, generation, prediction, EM and has-answer."""
        start = time.perf_counter()
        shown_all = self.passages(examples)
        prompts, shown = [], []
        for ex, ps in zip(examples, shown_all, strict=True):
            render = lambda p, q=ex.question: ralm_qa_prompt(q, p)  # noqa: E731
            ids, fitted = self.fitter.fit(render, ps, reserve=self.max_new_tokens)
            prompts.append(ids)
            shown.append(fitted)
        decode = self.lm.decode
        gens = generate_batch(self.lm, prompts, self.max_new_tokens, lambda toks: "\n" in decode(toks))
        seconds = (time.perf_counter() - start) / max(len(examples), 1)
        records = []
        for ex, ps, gen in zip(examples, shown, gens, strict=True):
            generation = decode(gen.token_ids)
            prediction = first_line(generation)
            records.append(
                {
                    "id": ex.id,
                    "question": ex.question,
                    "answers": ex.answers,
                    "passages": [{"id": p.id, "title": p.title} for p in ps],
                    "generation": generation,
                    "prediction": prediction,
                    "em": exact_match(prediction, ex.answers),
                    "has_answer": has_answer([f"{p.title}\n{p.text}" for p in ps], ex.answers)
                    if ps
                    else None,
                    "seconds": seconds,
                }
            )
        return records
