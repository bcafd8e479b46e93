"""The prefix cut of ralm's reranker input, with no dependency beyond transformers' tokenizers.

This file is copied into every exported reranker beside ``cross_encoder_input.py``, so that
sentence-transformers (``CrossEncoder(folder, trust_remote_code=True)``) cuts a whole prefix exactly as
ralm does without ralm installed; ``ralm.rerank.inputs`` imports it from here. Keep it standalone: no
``ralm`` imports.
"""

from __future__ import annotations

from collections.abc import Sequence


def prefix_tails(tokenizer, prefixes: Sequence[str], max_prefix_tokens: int) -> list[str]:
    """Each prefix cut to the text of its last ``max_prefix_tokens`` tokens (cut at a token's start).

    The next tokens depend most on the end of the prefix, and the query BM25 used is that end too.
    Cutting the text (not the ids) keeps one string per prefix, which the tokenizer's own pair template
    then encodes beside the passage.
    """
    if not tokenizer.is_fast:
        raise TypeError("the reranker needs a fast (Rust) tokenizer for character offsets")
    # verbose=False: whole prefixes may exceed the encoder's length; only their tails are ever encoded.
    encoded = tokenizer(list(prefixes), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    tails = []
    for text, offsets in zip(prefixes, encoded["offset_mapping"], strict=True):
        if len(offsets) <= max_prefix_tokens:
            tails.append(text)
        else:
            tails.append(text[offsets[-max_prefix_tokens][0] :])
    return tails
