"""Question answering under a frozen LM: `ralm eval qa` (the RALM paper's §7) and `ralm eval flare` (FLARE).

Modules: ``qa_command`` and ``flare_command`` (the commands), ``odqa`` (closed- and open-book answering),
``flare`` (FLARE's loop: look-ahead, confidence test, retrieval), ``flare_options`` (its options),
``lookahead`` (sentence ends and queries, pure), ``flare_sweep`` (θ against the retrieval rate), ``data``
(QA inputs in the formats users download), ``quiz`` (a real offline QA set), ``prompts`` (the papers'
prompts and fitting passages into the context), ``retrieval`` (passages for a question, optionally
reranked), ``metrics`` (EM and F1), ``predictions`` (resumable predictions, results).
"""
