"""Frozen causal LMs: what the stages may use of one (``ralm.lm.interface.LanguageModel``), the Hugging Face
implementation (``ralm.lm.loading``), continuation scoring (``ralm.lm.scoring``), generation.

Kept free of imports so ``import ralm.lm`` stays cheap; import the submodules by full path.
"""
