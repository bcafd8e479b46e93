"""FLARE-direct (Jiang et al., 2023) and its baselines, on a local LM whose token probabilities we read.

Methods (``FlareOptions.method``):
- ``no-retrieval``: the LM answers from the prompt alone.
- ``single``: retrieve once with the question, then generate the whole answer.
- ``window``: retrieve with the question, then every ``window_tokens`` generated tokens with that window.
- ``stride``: retrieve with the question, then every ``window_tokens`` generated tokens with the last
  ``max_query_tokens`` tokens of the input and the answer so far (In-Context RALM's retrieval stride, as
  its generation would retrieve).
- ``sentence``: retrieve with the question, then after each sentence with that sentence.
- ``flare``: retrieve with the question; then repeatedly generate a look-ahead of up to ``lookahead_tokens``
  with the current passages, cut it at its first sentence end; unless a token's probability is <= theta
  (``ralm.eval.qa.lookahead.is_unsure``) the sentence is kept as it is (greedy decoding would regenerate it
  unchanged); otherwise retrieve with the sentence (``masked``: tokens with probability <= beta replaced by
  a space; ``past+masked``: the last ``max_query_tokens`` tokens of the input and the answer so far, then
  the masked sentence; ``full``: all of it; ``explicit``: the LM asks one question per term of unsure
  tokens, §3.2, ``ralm.eval.qa.explicit``, and each question retrieves), replace the passages and
  regenerate the sentence with them.

Counts (per example, and in the trace per step): a step (a sentence, a window, or the whole answer) is
*retrieving* when passages from a search made during generation (not the input's) reached its prompt;
``searches`` counts every query sent, the input's included. A search whose passages are all declined (a
reranker whose export decided no retrieval), cut to fit, or already kept (``first-keep``) is a search, not a
retrieving step.

The authors' options (their config keys, ``configs/2wikihop_flare_config.json``) are options here:
``use_full_input_as_query`` (the first query is the whole input, not its last ``max_query_tokens``),
``use_ctx_for_examplars`` (each exemplar shows the passages its own question retrieves),
``look_ahead_pre_retrieval`` (``first``: retrieve with the input before the first look-ahead;
``first-keep``: the same, and the input's passages stay first in every prompt, a later search's passages
that are not among them after them; ``none``: the first look-ahead is generated without passages, as
FlashRAG's FLARE does) and ``reinit_ctx`` (every look-ahead is generated without the previous passages,
the kept ones excepted). As in their code (``ctx_increase="replace"``) new passages replace the old ones
(the kept ones excepted). The answer is generated as token ids appended to the prompt's ids, so every
step's prompt extends the previous one and the generator's KV cache serves it. A masked query left empty
(every token at or below beta) retrieves nothing, as in the authors' code, so the look-ahead is kept.
Sentence ends and queries: ``ralm.eval.qa.lookahead``; settings: ``ralm.eval.qa.flare_options``.

Two prompt layouts: ``qa`` (FLARE's: exemplars, search results, ``Question: ... Answer:``; the answer ends at
``stop``) and ``continuation`` (long-form generation: the passages, then the text the LM continues; no
exemplars and no stop pattern, so every method generates ``max_new_tokens`` unless the LM ends the text).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ralm.errors import RalmInputError
from ralm.eval.qa.data import QAExample
from ralm.eval.qa.explicit import QUESTION_TOKENS, question_prompt, question_terms, reply_question
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.lookahead import (
    first_sentence_length,
    is_unsure,
    masked_query,
    sentence_end,
    sentence_min_probs,
)
from ralm.eval.qa.prompts import (
    PassageFitter,
    PromptPassage,
    continuation_prompt,
    flare_prompt,
    input_length_for,
    keep_last,
    prompt_ids,
)
from ralm.lm.generation import Generation, Generator, generate_batch
from ralm.lm.interface import LanguageModel
from ralm.passage_rules import NO_RETRIEVAL

LAYOUTS = ("qa", "continuation")


class FlareRunner:
    """Answers examples with one method; keeps the generator (and its KV cache) across examples.
    `input_length`: the LM input length, used as given (the command's ``LMOptions.input_length``);
    `layout`: ``qa`` or ``continuation`` (the module's docstring)."""

    def __init__(
        self,
        lm: LanguageModel,
        config: FlareOptions,
        source: Any = None,
        exemplars: Sequence[tuple[str, str]] = (),
        input_length: int | None = None,
        reuse_cache: bool = True,
        layout: str = "qa",
    ):
        if config.method != NO_RETRIEVAL and source is None:
            raise RalmInputError(f"--method {config.method} needs --index")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got '{layout}'")
        if layout == "continuation" and exemplars:
            raise RalmInputError("--exemplars: long-form continuation shows no exemplars")
        self.lm, self.cfg, self.source, self.exemplars = lm, config, source, list(exemplars)
        self.layout = layout
        self.stop: str | None = None if layout == "continuation" else config.stop
        """The end-of-answer pattern (None: the answer runs to max_new_tokens or the LM's end)."""
        self.input_length = input_length_for(lm, input_length)
        self.generator = Generator(lm, reuse_cache=reuse_cache)
        self.fitter = PassageFitter(lm, self.input_length)
        if config.use_ctx_for_examplars and source is not None:
            self.exemplars = self._exemplars_with_passages(self.exemplars)

    def _exemplars_with_passages(self, exemplars: list) -> list[tuple[str, str, list[PromptPassage]]]:
        """Each exemplar with the passages its question retrieves (retrieved once, shown in every prompt)."""
        questions = [shot[0] for shot in exemplars]
        found = self.source.search([self.first_query(q) for q in questions], self.cfg.docs)
        return [(shot[0], shot[1], passages) for shot, passages in zip(exemplars, found, strict=True)]

    # ------------------------------------------------------------------ helpers
    def prompt_for(self, question: str) -> Callable[[Sequence[PromptPassage]], str]:
        if self.layout == "continuation":
            return lambda passages: continuation_prompt(question, passages)
        return lambda passages: flare_prompt(question, passages, self.exemplars)

    def check(self, examples: Sequence[QAExample]) -> None:
        """Every question must fit the context without passages, and an explicit query's prompt with room
        for its question (checked before generating anything)."""
        for ex in examples:
            self.fitter.check_question_fits(self.prompt_for(ex.question), 1, f"example '{ex.id}'")
        if self.cfg.method == "flare" and self.cfg.query == "explicit":
            n = len(prompt_ids(self.lm, question_prompt("", "")))
            if n + QUESTION_TOKENS > self.input_length:
                raise RalmInputError(
                    f"--query explicit: its question prompt ({n} tokens) plus {QUESTION_TOKENS} for the "
                    f"question does not fit the LM's context ({self.input_length}); raise --max-length"
                )

    def query_for(self, text: str) -> str:
        ids = self.lm.encode(text.strip())
        return self.lm.decode(ids[-self.cfg.max_query_tokens :]).strip()

    def past_query(self, state: _State) -> str:
        """The last max_query_tokens tokens of the input and the answer so far (the answer's ids follow the
        input's, as the LM reads them): In-Context RALM's query."""
        ids = [*self.lm.encode(state.question.strip()), *state.answer]
        return self.lm.decode(ids[-self.cfg.max_query_tokens :]).strip()

    def cut_at_stop(self, text: str) -> str:
        """The answer: `text` up to the stop pattern (all of it without one)."""
        return text if self.stop is None else text.split(self.stop, 1)[0]

    def first_query(self, question: str) -> str:
        """The query for the input: all of it (use_full_input_as_query) or its last max_query_tokens."""
        return question.strip() if self.cfg.use_full_input_as_query else self.query_for(question)

    def _retrieve(self, query: str) -> list[PromptPassage]:
        return self.source.search([query], self.cfg.docs)[0]

    def _search(self, state: _State, queries: list[str], step: dict) -> None:
        """Replace the passages with those of `queries` (interleaved, best first, when several), after the
        kept ones (``first-keep``); the next prompt that shows a new one makes its step a retrieving one."""
        found = self.source.search(queries, self.cfg.docs)
        merged: dict[str, PromptPassage] = {}
        for rank in range(self.cfg.docs):  # round-robin over the queries, best passages first
            for passages in found:
                if rank < len(passages):
                    merged.setdefault(passages[rank].id, passages[rank])
        kept = {p.id for p in state.kept}
        new = [p for p in list(merged.values())[: self.cfg.docs] if p.id not in kept]
        state.passages, state.fresh = [*state.kept, *new], bool(new)
        step["searches"] = len(queries)

    def _answer_stop(self, answer: list[int]) -> Callable[[list[int]], bool]:
        stop = self.stop
        if stop is None:
            return lambda toks: False
        tail = self.lm.decode(answer)[-len(stop) :] if answer else ""
        return lambda toks: stop in tail + self.lm.decode(toks)

    def _sentence_stop(self, answer: list[int]) -> Callable[[list[int]], bool]:
        answer_stop = self._answer_stop(answer)
        return lambda toks: answer_stop(toks) or sentence_end(self.lm.decode(toks)) is not None

    # ------------------------------------------------------------------ one example
    def answer(self, ex: QAExample) -> dict:
        """Generate the answer to one example; returns its text, trace and work counters."""
        cfg, start = self.cfg, time.perf_counter()
        before = asdict(self.generator.counters)
        searches_before = self.source.searches if self.source is not None else 0
        state = _State(ex.question, self.prompt_for(ex.question))
        if cfg.method != NO_RETRIEVAL and not (
            cfg.method == "flare" and cfg.look_ahead_pre_retrieval == "none"
        ):
            query = self.first_query(ex.question)
            state.passages = self._retrieve(query)
            state.trace.append({"step": "input", "query": query, "passages": [p.id for p in state.passages]})
            if cfg.method == "flare" and cfg.look_ahead_pre_retrieval == "first-keep":
                state.kept = list(state.passages)
        step_fn = {
            NO_RETRIEVAL: self._step_whole,
            "single": self._step_whole,
            "window": self._step_window,
            "stride": self._step_window,
            "sentence": self._step_sentence,
            "flare": self._step_flare,
        }[cfg.method]
        while not state.finished and len(state.answer) < cfg.max_new_tokens:
            step_fn(state)
        after = asdict(self.generator.counters)
        steps = [s for s in state.trace if "text" in s]
        return {
            "generation": self.cut_at_stop(self.lm.decode(state.answer)),
            "trace": state.trace,
            "steps": len(steps),
            "searches": (self.source.searches - searches_before) if self.source is not None else 0,
            "search_steps": sum(1 for s in steps if s["searches"]),
            "retrieval_steps": sum(1 for s in steps if s["retrieved"]),
            "lm_calls": after["calls"] - before["calls"],
            "tokens_fed": after["tokens_fed"] - before["tokens_fed"],
            "tokens_reused": after["tokens_reused"] - before["tokens_reused"],
            "seconds": time.perf_counter() - start,
        }

    def _head(self, state: _State, step: dict) -> list[int]:
        """Prompt ids with the current passages (cut to fit), recording which passages were shown and
        whether they are a search's made during generation (the step is then a retrieving one)."""
        head, shown = self.fitter.fit(state.render, state.passages, reserve=self.cfg.max_new_tokens)
        step["passages"] = [p.id for p in shown]
        step["retrieved"] = state.fresh and bool(shown)
        step.setdefault("searches", 0)
        state.fresh = False
        return head

    def _budget(self, state: _State, cap: int) -> int:
        return min(cap, self.cfg.max_new_tokens - len(state.answer))

    def _accept(self, state: _State, gen: Generation, piece: list[int], step: dict) -> None:
        """Append a piece of answer; decide whether the answer is complete."""
        state.answer += piece
        step["text"] = self.lm.decode(piece)
        state.trace.append(step)
        ended = len(piece) == len(gen.token_ids) and gen.stop_reason in ("eos", "context")
        if not piece or ended or (self.stop is not None and self.stop in self.lm.decode(state.answer)):
            state.finished = True

    def _sentence(self, state: _State, step: dict) -> tuple[Generation, list[int]]:
        """Generate a look-ahead with the current passages and cut it at its first sentence end."""
        head = self._head(state, step)
        gen = self.generator.generate(
            head + state.answer,
            self._budget(state, self.cfg.lookahead_tokens),
            self._sentence_stop(state.answer),
        )
        return gen, gen.token_ids[: first_sentence_length(self.lm.decode, gen.token_ids)]

    def _step_whole(self, state: _State) -> None:
        step: dict = {}
        head = self._head(state, step)
        gen = self.generator.generate(
            head + state.answer, self._budget(state, self.cfg.max_new_tokens), self._answer_stop(state.answer)
        )
        self._accept(state, gen, gen.token_ids, step)

    def _step_window(self, state: _State) -> None:
        step: dict = {}
        head = self._head(state, step)
        gen = self.generator.generate(
            head + state.answer, self._budget(state, self.cfg.window_tokens), self._answer_stop(state.answer)
        )
        self._accept(state, gen, gen.token_ids, step)
        self._retrieve_after(state, step)

    def _step_sentence(self, state: _State) -> None:
        step: dict = {}
        gen, piece = self._sentence(state, step)
        self._accept(state, gen, piece, step)
        self._retrieve_after(state, step)

    def _retrieve_after(self, state: _State, step: dict) -> None:
        """Backward-looking baselines: the piece just generated is the next piece's query (``stride``: the
        last max_query_tokens of the input and the answer so far)."""
        if state.finished or len(state.answer) >= self.cfg.max_new_tokens:
            return
        if self.cfg.method == "stride":
            query = self.past_query(state)
        else:
            query = self.query_for(step["text"])
        if query:
            self._search(state, [query], step)
            step["next_query"] = query

    def _step_flare(self, state: _State) -> None:
        cfg = self.cfg
        step: dict = {}
        if cfg.reinit_ctx and state.answer:  # (the input's passages still serve the first look-ahead)
            state.passages, state.fresh = list(state.kept), False
        gen, piece = self._sentence(state, step)
        if not piece:
            self._accept(state, gen, piece, step)
            return
        probs = gen.probs[: len(piece)]
        step["min_prob"] = min(probs)
        if is_unsure(probs, cfg.theta):
            if cfg.query == "explicit":
                queries = self._explicit_queries(state, piece, probs, step)
            elif cfg.query in ("masked", "past+masked"):
                masked = self.query_for(masked_query(self.lm.decode, piece, probs, cfg.beta))
                past = self.past_query(state) if cfg.query == "past+masked" else ""
                queries = [f"{past} {masked}".strip()] if masked else []
            else:
                queries = [self.query_for(self.lm.decode(piece))]
            queries = [q for q in queries if q]
            step["query"] = " | ".join(queries)
            # No query left (every token masked, or every question dropped): as in the authors' code,
            # nothing is sent and the passages stay.
            if queries:
                self._search(state, queries, step)  # replaces the earlier passages (not the kept)
        if step["searches"] or not cfg.keep_confident:
            step["lookahead"] = self.lm.decode(piece)
            gen, piece = self._sentence(state, step)
        self._accept(state, gen, piece, step)

    def ask(self, context: str, term: str) -> str:
        """The LM's reply (greedy, up to its first non-empty line) to the question prompt for `term`."""
        prompt = prompt_ids(self.lm, question_prompt(context, term))
        prompt = keep_last(self.lm, prompt, self.input_length - QUESTION_TOKENS)
        # Stop at the end of the first non-empty line (a chat model may open with a newline).
        gen = self.generator.generate(
            prompt, QUESTION_TOKENS, lambda toks: "\n" in self.lm.decode(toks).lstrip()
        )
        return self.lm.decode(gen.token_ids)

    def _explicit_queries(self, state: _State, piece: list[int], probs, step: dict) -> list[str]:
        """One question per term of unsure tokens (replies without "?" dropped); with no term, the
        sentence."""
        terms = question_terms(self.lm.decode, piece, probs, self.cfg.beta)
        step["terms"] = terms
        if not terms:  # no token at or below beta (only theta was crossed), or punctuation only
            step["fallback"] = "sentence"
            return [self.query_for(self.lm.decode(piece))]
        context = self.lm.decode(state.answer + piece)  # the answer so far, then the sentence
        replies = [reply_question(self.ask(context, term)) for term in terms]
        step["questions"] = [q for q in replies if q is not None]
        step["dropped"] = sum(q is None for q in replies)
        return [self.query_for(q) for q in step["questions"]]


@dataclass
class _State:
    """One example's answer in progress."""

    question: str
    render: Callable[[Sequence[PromptPassage]], str]
    answer: list[int] = field(default_factory=list)
    passages: list[PromptPassage] = field(default_factory=list)
    kept: list[PromptPassage] = field(default_factory=list)
    """The input's passages under ``first-keep``: first in every prompt, never replaced."""
    trace: list[dict] = field(default_factory=list)
    finished: bool = False
    fresh: bool = False
    """The passages come from a search made during generation and no prompt has shown them yet."""


def run_batched(runner: FlareRunner, examples: Sequence[QAExample], batch_size: int) -> list[dict]:
    """``no-retrieval`` and ``single`` have one generation per example: decode `batch_size` at once."""
    cfg, lm = runner.cfg, runner.lm
    start = time.perf_counter()
    passages: list[list[PromptPassage]] = [[] for _ in examples]
    queries = [runner.first_query(ex.question) for ex in examples]
    if cfg.method == "single":
        passages = runner.source.search(queries, cfg.docs)
    heads, shown = [], []
    for ex, ps in zip(examples, passages, strict=True):
        head, fitted = runner.fitter.fit(runner.prompt_for(ex.question), ps, reserve=cfg.max_new_tokens)
        heads.append(head)
        shown.append(fitted)
    stop = runner.stop
    rule = None if stop is None else (lambda t: stop in lm.decode(t))
    gens = []
    for i in range(0, len(heads), batch_size):
        gens += generate_batch(lm, heads[i : i + batch_size], cfg.max_new_tokens, rule)
    seconds = (time.perf_counter() - start) / max(len(examples), 1)
    out = []
    for q, fitted, head, gen in zip(queries, shown, heads, gens, strict=True):
        trace = []
        if cfg.method == "single":
            trace.append({"step": "input", "query": q, "passages": [p.id for p in fitted]})
        text = lm.decode(gen.token_ids)
        # The input's passages only: no search during generation, so the step is not a retrieving one.
        trace.append({"passages": [p.id for p in fitted], "retrieved": False, "searches": 0, "text": text})
        out.append(
            {
                "generation": runner.cut_at_stop(text),
                "trace": trace,
                "steps": 1,
                "searches": int(cfg.method == "single"),
                "search_steps": 0,
                "retrieval_steps": 0,
                "lm_calls": 1,
                "tokens_fed": len(head) + len(gen.token_ids),
                "tokens_reused": 0,
                "seconds": seconds,
                # What FLARE's theta would see of this generation (ralm.eval.qa.flare_sweep.theta_for_rate).
                "sentence_min_probs": sentence_min_probs(
                    lm.decode, gen.token_ids, gen.probs, cfg.lookahead_tokens
                ),
            }
        )
    return out
