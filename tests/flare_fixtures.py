"""Test helpers for FLARE and QA: a real torch LM whose next-token probabilities the test writes, a word
tokenizer for it, and a retriever that records the queries it is sent.

The LM is a bigram table: the next token's distribution depends only on the last token, so a test fixes
exactly which answer greedy decoding produces and the probability of each of its tokens. It fills the
transformers KV cache like a real model (one dummy key/value per position), so generation's cache reuse runs
on it too. This is a real model run through the real generation code, not a mock of FLARE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from transformers import PreTrainedTokenizerFast
from transformers.modeling_outputs import CausalLMOutputWithPast

from ralm.lm.loading import FrozenLM
from ralm.retrieval.types import Hit

EOS = "<eos>"
PROMPT_WORDS = ["[UNK]", EOS, "Question", "Answer", ":", "Search", "results", "[", "]", "?", "1", "2", "3"]


class BigramLM(torch.nn.Module):
    """Next-token logits = a row of a (vocab x vocab) table chosen by the last input token."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table, requires_grad=False)
        self.prompts: list[list[int]] = []  # every input_ids row fed, for tests that inspect prompts

    def forward(
        self, input_ids, cache=None, use_cache=True, logits_to_keep=0, attention_mask=None, position_ids=None
    ):
        self.prompts.append(input_ids[0].tolist())
        if cache is not None:
            b, t = input_ids.shape
            dummy = torch.zeros(b, 1, t, 1)
            cache.update(dummy, dummy, 0)
        return CausalLMOutputWithPast(logits=self.table[input_ids])


def word_tokenizer(words: Sequence[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer (whitespace and punctuation split) whose vocabulary is `words`."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(dict.fromkeys(list(PROMPT_WORDS) + list(words)))}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", eos_token=EOS)


def chain_lm(
    chain: Sequence[tuple[str, float]], extra_words: Sequence[str] = (), context_length: int = 4096
) -> FrozenLM:
    """A FrozenLM that, after the prompt's final ":", greedily writes the words of `chain` in order.

    Each (word, p) means: after the previous word (":" for the first) the LM gives `word` probability p and
    spreads 1 - p evenly over the rest of the vocabulary. The word after the last one is EOS (p = 0.99).
    Every other context also predicts EOS, so nothing but the chain is ever written.
    """
    words = [w for w, _ in chain]
    tokenizer = word_tokenizer(list(words) + list(extra_words))
    vocab = tokenizer.get_vocab()
    size = len(vocab)
    eos = vocab[EOS]

    def row(target: int, p: float) -> torch.Tensor:
        rest = (1.0 - p) / (size - 1)
        assert p > rest, "the chain word must be the most likely"
        out = torch.full((size,), math.log(rest), dtype=torch.float32)
        out[target] = math.log(p)
        return out

    table = torch.stack([row(eos, 0.99) for _ in range(size)])
    prev = vocab[":"]
    for word, p in chain:
        table[prev] = row(vocab[word], p)
        prev = vocab[word]
    table[prev] = row(eos, 0.99)
    return FrozenLM(
        model=BigramLM(table),
        tokenizer=tokenizer,
        device=torch.device("cpu"),
        dtype=torch.float32,
        name="bigram",
        context_length=context_length,
    )


class RecordingRetriever:
    """Returns `k` made-up passages per query, with ids naming the query's turn, and records the queries."""

    index_dir = "memory"
    meta: dict = {}

    def __init__(self, texts: Sequence[str] = ()):
        self.queries: list[str] = []
        self.texts = list(texts)

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> list[list[Hit]]:
        out = []
        for query in queries:
            turn = len(self.queries)
            self.queries.append(query)
            hits = []
            for i in range(k):
                body = self.texts[turn % len(self.texts)] if self.texts else f"passage {turn} {i}"
                hits.append(
                    Hit(
                        id=f"q{turn}-{i}",
                        score=float(k - i),
                        contents=f"t{turn}\n{body}",
                        title=f"t{turn}",
                        doc_id=f"d{turn}",
                    )
                )
            out.append(hits)
        return out


def tiny_qa_corpus(out_dir, real_documents) -> dict:
    """Passages and a bm25s index over the shared real documents, and questions whose answers are the
    module names (each question quotes a phrase of its module's docstring, so BM25 finds the module)."""
    import json
    from pathlib import Path

    from ralm.retrieval.index import build_index
    from ralm.retrieval.passages import split_passages, write_passages

    out_dir = Path(out_dir)
    passages = out_dir / "passages.jsonl"
    write_passages(split_passages(real_documents[:20]), passages)
    index = out_dir / "index"
    build_index(passages, index, backend="bm25s")
    questions = out_dir / "questions.jsonl"
    with open(questions, "w", encoding="utf-8") as f:
        for doc in real_documents[:6]:
            phrase = " ".join(doc["text"].split()[5:15])
            record = {"id": doc["id"], "question": f"Which module says: {phrase}", "answers": [doc["title"]]}
            f.write(json.dumps(record) + "\n")
    return {"passages": passages, "index": index, "questions": questions}
