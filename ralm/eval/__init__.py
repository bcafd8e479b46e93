"""Evaluation, two sub-stages that share nothing but the retrieval and LM layers below them:

- ``ralm.eval.ppl``: strided In-Context RALM perplexity (`ralm eval ppl`): windows, the condition engine
  (no retrieval, BM25, random, zero-shot, oracle, trained, with abstention), comparisons and sweeps;
- ``ralm.eval.qa``: question answering (`ralm eval qa`, `ralm eval flare`): QA data, prompts, passages,
  answer metrics, and FLARE.

Kept free of imports so ``import ralm.eval`` stays cheap; import the submodules by full path.
"""
