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
  takes; ``Condition``, ``parse_conditions``, ``Sweep``: ``evaluate_perplexity``'s conditions (read from
  ``--compare`` text) and sweep.
"""

from __future__ import annotations

import importlib

from ralm.cli.commands import api_names

__version__ = "0.2.0"

_API = api_names()
"""``ralm.<name>`` -> (module, attribute), read off the one command table (``ralm.cli.commands``)."""
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
