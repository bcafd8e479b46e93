"""Passages for QA and FLARE: BM25 (or any index) candidates, optionally reranked, best first.

Rerankers (``--reranker``):
- ``none``: the index's own order; only ``docs`` passages are fetched.
- ``zero-shot``: fetch ``candidates`` passages and order them by the LM's log-probability of the query given
  each passage (the RALM paper's §6.1 rule, with the retrieval query as the scored continuation), through
  ``ralm.lm.scoring.score_continuations``, the one scorer every stage uses.
- a folder: a trained predictive reranker (``ralm.rerank.inference.PredictiveReranker.order``) orders the
  candidates against the query actually issued (in FLARE: the masked look-ahead sentence or the LM's
  question, so the reranker and BM25 judge the same text). If it was trained to abstain, the empty passage
  is a candidate too and, when it ranks among the top ``docs``, fewer passages are shown.

With ``passage_form="continuation"`` each candidate is handed on from its sentence that best matches the
query issued, into the next passage of its document (``ralm.retrieval.passage_forms``), as ``ralm eval
ppl --passage-form continuation`` and data-gen hand them to the LM; the prompt builder cuts it to the room.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralm.errors import RalmInputError
from ralm.eval.qa.prompts import PromptPassage, input_length_for
from ralm.passage_rules import NO_RETRIEVAL, ZERO_SHOT
from ralm.ranking import best_first
from ralm.retrieval.passage_forms import CONTINUATION, RETRIEVED, PassageForm, continued, passage_store
from ralm.retrieval.types import Hit

if TYPE_CHECKING:
    from ralm.lm.interface import LanguageModel
    from ralm.retrieval.options import RetrievalOptions


def hit_to_passage(hit: Hit) -> PromptPassage:
    """A retrieved hit as a prompt passage: the title line is shown apart from the body."""
    body = hit.contents.split("\n", 1)[1] if "\n" in hit.contents else hit.contents
    return PromptPassage(hit.id, hit.title, body)


def ctx_to_passage(ctx: dict, index: int) -> PromptPassage:
    """A DPR results ``ctxs`` entry as a prompt passage."""
    return PromptPassage(str(ctx.get("id", index)), str(ctx.get("title", "")), ctx["text"])


class PassageSource:
    """Searches an index and reranks its candidates; counts searches for the results file.

    `input_length`: the LM input length zero-shot scoring fits in, used as given (the command's
    ``LMOptions.input_length``; default: that rule with the default options). `threads`: threads for each
    batched search (a batch of questions, or FLARE's explicit questions). `passage_form`: each hit as
    retrieved or as its continuation (the module's docstring)."""

    def __init__(
        self,
        retriever: Any,
        lm: LanguageModel | None = None,
        rerank: str = "none",
        candidates: int = 16,
        input_length: int | None = None,
        max_passage_tokens: int = 256,
        threads: int = 1,
        passage_form: PassageForm = RETRIEVED,
    ):
        self.retriever = retriever
        self.lm = lm
        self.rerank = rerank
        self.candidates = candidates
        self.input_length = input_length_for(lm, input_length) if lm is not None else input_length
        self.max_passage_tokens = max_passage_tokens
        self.threads = threads
        self.searches = 0
        self._store = passage_store(retriever) if passage_form == CONTINUATION else None
        self._following: dict[str, str | None] = {}  # each passage's successor, read once
        self._reranker = None
        if rerank not in ("none", ZERO_SHOT):
            if not Path(rerank).is_dir():
                raise RalmInputError(
                    f"--reranker: expected none, zero-shot or a reranker folder, got '{rerank}'"
                )
            from ralm.rerank.inference import PredictiveReranker

            self._reranker = PredictiveReranker.from_pretrained(rerank)

    def search(self, queries: Sequence[str], k: int) -> list[list[PromptPassage]]:
        """The top `k` passages per query, reranked (when asked) against the query itself."""
        self.searches += len(queries)
        if self._reranker is not None and self._reranker.decision == NO_RETRIEVAL:
            return [[] for _ in queries]  # validation preferred no passage to every pick
        fetch = k if self.rerank == "none" else max(k, self.candidates)
        hits = self.retriever.search(list(queries), fetch, threads=self.threads)
        if self._store is not None:
            hits = [
                continued(row, q, self._store, self._following) for q, row in zip(queries, hits, strict=True)
            ]
        if self.rerank == "none":
            return [[hit_to_passage(h) for h in row[:k]] for row in hits]
        if self.rerank == ZERO_SHOT:
            orders = [best_first(s) for s in self._zero_shot_scores(queries, hits)]
        else:
            orders = self._reranker.order(
                list(queries),
                [[h.contents for h in row] for row in hits],
                [[h.score for h in row] for row in hits],
            )
        # None is the empty passage of a reranker that abstains: it only leaves a slot empty.
        return [
            [hit_to_passage(row[i]) for i in order[:k] if i is not None]
            for row, order in zip(hits, orders, strict=True)
        ]

    def _zero_shot_scores(self, queries: Sequence[str], hits: list[list[Hit]]) -> list[list[float]]:
        from ralm.lm.scoring import ScoreRequest, ScoringSettings, score_continuations

        requests, shape = [], []
        for query, row in zip(queries, hits, strict=True):
            # The query keeps its last quarter-context of tokens; each passage is cut to the room left.
            target = self.lm.encode(" " + query.strip())[-(self.input_length // 4) :]
            room = min(self.max_passage_tokens, self.input_length - len(target))
            requests += [
                ScoreRequest(
                    passage=self.lm.encode_passages([h.contents])[0][:room], prefix=[], target=target
                )
                for h in row
            ]
            shape.append(len(row))
        settings = ScoringSettings(input_length=self.input_length, max_passage_tokens=self.max_passage_tokens)
        logprobs = score_continuations(self.lm, requests, settings)
        flat = [float(t.sum()) for t in logprobs]
        out, start = [], 0
        for n in shape:
            out.append(flat[start : start + n])
            start += n
        return out


# Former option names of `ralm eval qa|flare`: the same option is --reranker and --k in every `ralm eval`
# command (CHANGELOG.md). --k is the retrieval group's k by its leaf, on the command line and in YAML.
RENAMED_OPTIONS = {"rerank": "reranker", "candidates": "k"}


def open_source(
    retrieval: RetrievalOptions,
    lm: LanguageModel | None,
    rerank: str,
    input_length: int | None = None,
    passage_form: PassageForm = RETRIEVED,
) -> PassageSource | None:
    """Open the index of `retrieval` (none: no retrieval) and wrap it with the chosen reranker, which
    fetches `retrieval.k` candidates and scores (zero-shot) within `input_length` tokens; `passage_form`:
    what each hit hands the LM."""
    if retrieval.index is None:
        if rerank != "none":
            raise RalmInputError("--reranker needs --index")
        return None
    return PassageSource(
        retrieval.open(),
        lm=lm,
        rerank=rerank,
        candidates=retrieval.k,
        input_length=input_length,
        threads=retrieval.threads,
        passage_form=passage_form,
    )
