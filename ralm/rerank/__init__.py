"""The predictive reranker (In-Context RALM §6.2): a cross-encoder trained on `ralm data-gen` output.

``ralm.rerank.inference`` (what ``ralm.eval`` uses) imports no Lightning; training lives in
``lit_module``, ``datamodule`` and ``fit``, the losses and metrics are pure functions.
"""
