"""`ralm eval ppl`'s own option groups: which model chooses a window's passage (`RerankingOptions`) and
how many inputs go through the LM at once (`BatchOptions`).

The command takes them (``ralm.eval.ppl.ppl_command``) and the choosers are loaded from them
(``ralm.eval.ppl.chooser_loading``): they live here, below both. The groups it shares with the other LM
stages are `ralm.lm.options.LMOptions`, `ralm.lm.options.WindowOptions` and
`ralm.retrieval.options.RetrievalOptions`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ralm.config_types import PositiveInt, check_fields
from ralm.errors import RalmInputError
from ralm.passage_rules import ZERO_SHOT


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
