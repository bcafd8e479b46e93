"""The one command table: every ``ralm`` command, the module and typed function that do its work, its line
in ``ralm --help`` and its name in the Python API. The CLI (``ralm.cli.main``), the package's lazy API
(``ralm.__init__``) and the pipeline's stages (``ralm.pipeline.stages``) all read it.

Modules are named by their import path and imported only when used, so reading this table (``ralm --help``,
``import ralm``) imports nothing but the standard library.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    """What the user types after ``ralm`` (``("eval", "ppl")``)."""
    module: str
    """The command module: ``build_parser()`` and ``main(argv)`` (docs/architecture.md, "Command modules")."""
    function: str
    """The typed function in `module` that does the work; its signature is the command's schema."""
    description: str
    """Its line in ``ralm --help``."""
    api: str | None = None
    """Its name in the Python API (``ralm.<api>``), or None where the API offers another entry point."""

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def load_module(self) -> ModuleType:
        return importlib.import_module(self.module)

    def load_function(self) -> Callable[..., Any]:
        return getattr(self.load_module(), self.function)


COMMANDS: tuple[Command, ...] = (
    Command(
        ("prepare", "wikitext103"),
        "ralm.corpora.wikitext103_command",
        "prepare_wikitext103",
        "WikiText-103 (hub or a saved copy) as articles JSONL and eval_lm.py's test text.",
        api="prepare_wikitext103",
    ),
    Command(
        ("passages",),
        "ralm.retrieval.passages_command",
        "make_passages",
        "Split raw documents into 100-word passages (JSONL).",
        api="make_passages",
    ),
    Command(
        ("index",),
        "ralm.retrieval.index_command",
        "make_index",
        "Build a BM25 (bm25s, pyserini) or dense (faiss) index.",
    ),
    Command(
        ("retrieve",),
        "ralm.retrieval.retrieve_command",
        "retrieve",
        "Batch-search an index; write a TREC run and JSONL.",
    ),
    Command(
        ("data-gen",),
        "ralm.data_gen.data_gen_command",
        "data_gen",
        "Score BM25 candidates with a frozen LM: reranker training data.",
        api="generate_reranking_data",
    ),
    Command(
        ("train",),
        "ralm.train.train_command",
        "train",
        "Train the predictive reranker (Lightning) and export it.",
        api="train_reranker",
    ),
    Command(
        ("eval", "ppl"),
        "ralm.eval.ppl.ppl_command",
        "eval_ppl",
        "Strided In-Context RALM perplexity (none/BM25/zero-shot/trained/oracle).",
        api="evaluate_perplexity",
    ),
    Command(
        ("eval", "flare"),
        "ralm.eval.qa.flare_command",
        "eval_flare",
        "FLARE active retrieval and its baselines on QA data.",
        api="evaluate_flare",
    ),
    Command(
        ("eval", "qa"),
        "ralm.eval.qa.qa_command",
        "eval_qa",
        "Open-domain QA, closed-book and open-book, exact match.",
        api="evaluate_qa",
    ),
    Command(
        ("run",),
        "ralm.pipeline.run_command",
        "run",
        "The whole pipeline on your own corpus and eval text, with a report.",
        api="run_pipeline",
    ),
    Command(
        ("demo",),
        "ralm.demo.demo_command",
        "demo",
        "`ralm run` on real offline assets (the Bibles, or the Python docs).",
    ),
)

API_ONLY: dict[str, tuple[str, str]] = {
    "build_index": ("ralm.retrieval.index", "build_index"),
    "open_index": ("ralm.retrieval.index", "open_index"),
    "load_lm": ("ralm.lm.loading", "load_lm"),
    "Reranker": ("ralm.rerank.inference", "PredictiveReranker"),
    "LMOptions": ("ralm.lm.options", "LMOptions"),
    "RetrievalOptions": ("ralm.retrieval.options", "RetrievalOptions"),
    "WindowOptions": ("ralm.lm.options", "WindowOptions"),
    "Condition": ("ralm.eval.ppl.conditions", "Condition"),
    "parse_conditions": ("ralm.eval.ppl.conditions", "parse_conditions"),
    "Sweep": ("ralm.eval.ppl.sweep", "Sweep"),
}
"""The Python API's names that are no command: lower-level entry points, the shared option groups and the
typed values of ``evaluate_perplexity`` (its conditions, read from ``--compare`` text, and its sweep)."""

PIPELINE_STAGES: tuple[tuple[str, ...], ...] = (
    ("index",),
    ("data-gen",),
    ("train",),
    ("eval", "ppl"),
    ("eval", "flare"),
)
"""The commands a pipeline run (``ralm run``, ``ralm demo``; ``eval flare``: ``ralm demo --flare``) calls, in
order, through their functions."""

_BY_WORDS = {command.words: command for command in COMMANDS}


def command(words: str | tuple[str, ...]) -> Command:
    """The table's entry for `words` (``"eval ppl"`` or ``("eval", "ppl")``); KeyError if none."""
    return _BY_WORDS[tuple(words.split()) if isinstance(words, str) else tuple(words)]


def api_names() -> dict[str, tuple[str, str]]:
    """``ralm.<name>`` -> (module, attribute): the commands' functions under their API names, then
    `API_ONLY`, in the order ``ralm.__all__`` lists them."""
    return {c.api: (c.module, c.function) for c in COMMANDS if c.api} | API_ONLY
