"""A language model that implements ``ralm.lm.interface.LanguageModel`` and nothing else: characters are the
tokens, and the next character's distribution is a bigram table counted from the test's own texts.

No transformers model and no tokenizer object: if any stage reached past the protocol (``.model``,
``.tokenizer``), it would fail on this LM. The next token depends only on the last one, so a test knows every
log-probability in closed form (``logprob``) and every greedy decode (``greedy``) without ralm's code.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

UNKNOWN = "\ufffd"


class CharBigramLM:
    """log p(next | text) = log p(next | last character), counted from `texts` with add-`alpha` smoothing."""

    def __init__(self, texts: Sequence[str], context_length: int = 4096, alpha: float = 0.5):
        chars = sorted(set("".join(texts)) - {UNKNOWN})
        self.chars = ["<eos>", UNKNOWN, *chars]
        self.ids = {c: i for i, c in enumerate(self.chars)}
        size = len(self.chars)
        counts = torch.full((size, size), alpha, dtype=torch.float64)
        for text in texts:
            ids = torch.tensor(self.encode(text))
            counts.index_put_((ids[:-1], ids[1:]), torch.ones(len(ids) - 1, dtype=torch.float64), True)
        self.table = torch.log(counts / counts.sum(-1, keepdim=True))  # float64 log-probs, rows sum to 1
        self.name, self.tokenizer_name = "char-bigram", "characters"
        self.device, self.dtype = torch.device("cpu"), torch.float32
        self.context_length, self.eos_ids = context_length, frozenset({0})
        self.special_prefix, self.lead, self.special_tokens = (), (), "every-input"

    # ---- the protocol
    def encode(self, text: str) -> list[int]:
        return [self.ids.get(c, 1) for c in text]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_passages(self, texts: Sequence[str]) -> list[list[int]]:
        return self.encode_batch(texts)  # no BOS

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        return self.encode(text), list(range(len(text)))

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.table.float()[torch.gather(input_ids, 1, positions)]

    def start_decoding(self) -> BigramDecoding:
        return BigramDecoding(self.table.float())

    # ---- closed forms for the tests
    def logprob(self, text: str) -> float:
        """log p(text[1:] | text[0]) in float64."""
        ids = self.encode(text)
        return float(sum(self.table[a, b] for a, b in zip(ids, ids[1:], strict=False)))

    def greedy(self, last: int, steps: int) -> tuple[list[int], list[float]]:
        """The greedy continuation after token `last` until EOS or `steps` tokens, with each probability."""
        tokens, probs = [], []
        for _ in range(steps):
            nxt = int(torch.argmax(self.table[last]))
            if nxt in self.eos_ids:
                break
            tokens.append(nxt)
            probs.append(float(torch.exp(self.table[last, nxt])))
            last = nxt
        return tokens, probs


class BigramDecoding:
    """The decoding state of a bigram LM: the logits need only the last token fed, so it holds a count."""

    def __init__(self, table: torch.Tensor):
        self.table, self.length = table, 0

    def __len__(self) -> int:
        return self.length

    def crop(self, length: int) -> None:
        self.length = length  # the next feed brings at least one token: its last is all the LM reads

    def feed(self, input_ids, attention_mask=None, position_ids=None) -> torch.Tensor:
        self.length += input_ids.shape[1]
        return self.table[input_ids[:, -1]]
