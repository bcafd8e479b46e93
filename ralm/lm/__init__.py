"""Frozen causal LMs: loading (``ralm.lm.loading``), continuation scoring (``ralm.lm.scoring``), generation.

Kept free of imports so ``import ralm.lm`` stays cheap; import the submodules by full path.
"""
