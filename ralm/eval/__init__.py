"""Evaluation: strided RALM perplexity, FLARE, open-domain QA, metrics.

Kept free of imports so ``import ralm.eval`` stays cheap; import the submodules by full path.
"""
