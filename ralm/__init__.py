"""ralm: retrieval-augmented language modeling with frozen LMs (In-Context RALM and FLARE).

Stages live in subpackages: ``ralm.retrieval``, ``ralm.lm``, ``ralm.data_gen``, ``ralm.rerank``,
``ralm.eval``. The Python API of every stage is importable from here, the CLI being a thin layer over it
(README, "Python API"); each name is imported on first use, so ``import ralm`` stays instant:

- ``make_passages``, ``build_index``, ``open_index``: passages and retrieval (``ralm passages``/``index``);
- ``load_lm``: a frozen causal LM (HF id, folder, or .gguf);
- ``generate_reranking_data``: ``ralm data-gen``; ``train_reranker``: ``ralm train``;
- ``Reranker``: an exported reranker (``Reranker.from_pretrained(path).rank(prefix, passages)``);
- ``evaluate_perplexity``, ``evaluate_flare``, ``evaluate_qa``: ``ralm eval ppl|flare|qa``;
- ``run_pipeline``: ``ralm run`` (the whole pipeline on your own data); ``prepare_wikitext103``;
- ``LMOptions``, ``RetrievalOptions``, ``WindowOptions``: the option groups every LM and retrieval stage
  takes.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_API = {
    "make_passages": ("ralm.retrieval.passages_command", "make_passages"),
    "build_index": ("ralm.retrieval.index", "build_index"),
    "open_index": ("ralm.retrieval.index", "open_index"),
    "load_lm": ("ralm.lm.loading", "load_lm"),
    "generate_reranking_data": ("ralm.data_gen.data_gen_command", "data_gen"),
    "train_reranker": ("ralm.rerank.train_command", "train"),
    "Reranker": ("ralm.rerank.inference", "PredictiveReranker"),
    "evaluate_perplexity": ("ralm.eval.ppl.ppl_command", "eval_ppl"),
    "evaluate_flare": ("ralm.eval.qa.flare_command", "eval_flare"),
    "evaluate_qa": ("ralm.eval.qa.qa_command", "eval_qa"),
    "run_pipeline": ("ralm.pipeline.run_command", "run"),
    "prepare_wikitext103": ("ralm.corpora.wikitext103_command", "prepare_wikitext103"),
    "LMOptions": ("ralm.lm.options", "LMOptions"),
    "RetrievalOptions": ("ralm.retrieval.options", "RetrievalOptions"),
    "WindowOptions": ("ralm.lm.options", "WindowOptions"),
}
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        module, attribute = _API[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'ralm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
