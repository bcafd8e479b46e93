"""sentence-transformers' input module for a ralm reranker export: ralm's pair rule inside CrossEncoder.

Copied into every export (with ``pair_rule.py``) and named in its ``modules.json``, so that
``CrossEncoder(folder, trust_remote_code=True).predict([(prefix, passage)])`` gives ralm's model score
for whole prefixes: the prefix cut to its last ``max_prefix_tokens`` tokens, then the passage cut from
its end so the pair fits (``truncation="only_second"``, saved in ``sentence_bert_config.json``).
A stock ``Transformer`` cannot do this: a tokenizer truncates both members of a pair from one side.
An export whose decision is not ``trained`` (BM25's order, or no retrieval) writes ``refusal`` into the
settings: loading then fails with that note before any weight is read, as the folder is no reranker.
Needs sentence-transformers >= 6 (its modular CrossEncoder); keep it standalone: no ``ralm`` imports.
"""

from __future__ import annotations

from sentence_transformers.base.modules import Transformer

from .pair_rule import prefix_tails


class RalmCrossEncoderInput(Transformer):
    """A ``Transformer`` module whose pairs are (prefix, passage), the prefix cut to its tail first."""

    config_keys = [*Transformer.config_keys, "max_prefix_tokens", "decision", "refusal"]

    def __init__(
        self, *args, max_prefix_tokens: int, decision: str | None = None, refusal: str | None = None, **kwargs
    ) -> None:
        if refusal:
            raise ValueError(refusal)
        super().__init__(*args, **kwargs)
        self.max_prefix_tokens, self.decision, self.refusal = max_prefix_tokens, decision, refusal

    def preprocess(self, inputs, prompt=None, processing_kwargs=None, **kwargs):
        pairs = [tuple(pair) for pair in inputs]
        if any(len(pair) != 2 or not all(isinstance(part, str) for part in pair) for pair in pairs):
            raise ValueError("a ralm reranker scores (prefix, passage) pairs of strings")
        tails = prefix_tails(self.tokenizer, [prefix for prefix, _ in pairs], self.max_prefix_tokens)
        cut = [[tail, passage] for tail, (_, passage) in zip(tails, pairs, strict=True)]
        return super().preprocess(cut, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
