"""Retrieval: passages (100-word DPR-style chunks), BM25 (bm25s, Pyserini/Lucene), dense (FAISS), runs.

Import the parts you need (``ralm.retrieval.passages``, ``ralm.retrieval.index``); this package imports
nothing heavy itself, so ``ralm --help`` and the other stages stay fast.
"""
