"""`ralm eval ppl`'s own option groups: what a window's BM25 query is made of (`QueryOptions`), which model
chooses a window's passage (`RerankingOptions`) and how many inputs go through the LM at once
(`BatchOptions`).

The command takes them (``ralm.eval.ppl.ppl_command``) and the choosers are loaded from them
(``ralm.eval.ppl.chooser_loading``): they live here, below both. The groups it shares with the other LM
stages are `ralm.lm.options.LMOptions`, `ralm.lm.options.WindowOptions` and
`ralm.retrieval.options.RetrievalOptions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ralm.config_types import HalfOpenUnitInterval, PositiveInt, check_fields
from ralm.errors import RalmInputError
from ralm.passage_rules import ZERO_SHOT

QueryForm = Literal["past", "lookahead", "past+lookahead", "future"]
"""What a retrieving window's BM25 query is (``ralm.eval.ppl.queries``): the last ℓ tokens before its targets
(`past`, the paper's), the LM's own greedy guess of its next tokens (`lookahead`, FLARE's query), both
(`past+lookahead`), or the true next tokens (`future`: it reads the targets, a bound on look-ahead
queries, not a method)."""

PAST, LOOKAHEAD, PAST_AND_LOOKAHEAD, FUTURE = "past", "lookahead", "past+lookahead", "future"


@dataclass
class QueryOptions:
    query_form: QueryForm = PAST
    """past (the last --query-tokens tokens, the paper's), lookahead (the LM's greedy guess of the next
    --lookahead-tokens tokens, FLARE's), past+lookahead (both), or future (the true next tokens: a bound,
    it reads the targets)."""
    lookahead_tokens: PositiveInt | None = None
    """Tokens the look-ahead (or the future query) spans; default: the stride."""
    lookahead_mask: HalfOpenUnitInterval = 0.0
    """β: look-ahead tokens the LM gave a probability below β are left out of the query (FLARE's masked
    query; 0 keeps every token)."""
    lookahead_context: Literal["context", "passage"] = "context"
    """What the look-ahead is generated after: the window's context alone (FLARE's temporary sentence), or
    BM25's top-1 passage for the past query and then the context (retrieve, guess what comes next,
    retrieve again)."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.query_form in (PAST, FUTURE) and self.lookahead_mask:
            raise RalmInputError(
                f"--lookahead-mask: only with a look-ahead --query-form, not {self.query_form}"
            )
        if not self.generates and self.lookahead_context != "context":
            raise RalmInputError(
                f"--lookahead-context: only with a look-ahead --query-form, not {self.query_form}"
            )
        if self.query_form == PAST and self.lookahead_tokens is not None:
            raise RalmInputError(
                "--lookahead-tokens: only with --query-form lookahead, past+lookahead or future"
            )

    @property
    def generates(self) -> bool:
        """The query holds the LM's own look-ahead (generated before retrieval)."""
        return self.query_form in (LOOKAHEAD, PAST_AND_LOOKAHEAD)

    @property
    def after_passage(self) -> bool:
        """The look-ahead is generated after BM25's top-1 passage for the past query."""
        return self.generates and self.lookahead_context == "passage"

    def record(self, stride: int) -> dict:
        """results.json ``config`` keys of a query other than the paper's (none for `past`, so the files and
        the resume key of runs without these options stay as they were)."""
        if self.query_form == PAST:
            return {}
        record = {"query_form": self.query_form, "lookahead_tokens": self.lookahead_tokens or stride}
        if self.generates:
            record.update(lookahead_mask=self.lookahead_mask, lookahead_context=self.lookahead_context)
        return record


@dataclass
class RerankingOptions:
    reranker: str = "none"
    """none (BM25 top-1), zero-shot (§6.1), oracle (best candidate on the true targets), or a trained reranker
    folder."""
    rerank_lm: str | None = None
    """Zero-shot reranking LM (id, folder or .gguf), may use another tokenizer; default: the evaluated LM."""
    rank_tokens: PositiveInt = 16
    """s': zero-shot reranking scores the s' prefix tokens just before the targets."""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.rerank_lm and self.reranker != ZERO_SHOT:
            raise RalmInputError("--rerank-lm: only used with --reranker zero-shot")


@dataclass
class BatchOptions:
    batch_size: PositiveInt | None = None
    """Most scoring inputs per LM forward (default: 2 on CPU, 32 on GPU)."""
    max_batch_tokens: PositiveInt | None = None
    """Most padded tokens per LM forward (default: batch size x max length)."""

    def __post_init__(self) -> None:
        check_fields(self)
