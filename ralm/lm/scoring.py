"""Per-token log-probabilities of target tokens given [passage; prefix], for a frozen causal LM.

``compose`` is the one rule every stage uses to build an In-Context RALM input (Ram et al. 2023, §3):
the passage is cut to ``max_passage_tokens``, prepended with no separator, and prefix tokens are dropped
from the start until passage + prefix + target fit in ``input_length``.

``score_continuations`` is the fast path: requests are sorted by length and batched (right padding, so
every real token keeps positions 0..n-1 and, under the causal mask, never sees a pad: no attention mask or
position ids are needed and SDPA takes its causal fast path); the LM is asked for logits only at the positions
that predict target tokens (``LanguageModel.logits``: the Hugging Face LM applies its head only there,
``ralm.lm.hf_forward``), which at stride 4 skips >99% of the vocabulary projection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ralm.lm.interface import LanguageModel


@dataclass(frozen=True)
class ScoringSettings:
    """How a stage has its LM score requests: the input each is composed into (``compose``), the span y'
    that ranks a passage (zero-shot reranking), and the batch limits. A stage builds it once from its
    options and passes it whole, down to ``score_continuations``."""

    input_length: int
    """Tokens of one composed input (passage + prefix + target), already capped at the LM's context."""
    max_passage_tokens: int = 256
    rank_tokens: int = 16
    """y': the last tokens before the targets whose log-prob after a passage ranks it."""
    batch_size: int | None = None
    """Rows per forward; None: ``default_batch_size`` (2 on CPU, 32 on GPU)."""
    max_batch_tokens: int | None = None
    """Padded tokens per forward; None: batch_size x input_length."""


@dataclass(frozen=True)
class ScoreRequest:
    """Token ids of one scoring input; ``target`` is what gets log-probabilities. ``lead`` goes first and is
    never cut: an input without a passage starts with the LM's lead (``LanguageModel.lead``, its BOS) in
    the passage's place, while a passage carries the same prefix in its own first tokens."""

    passage: Sequence[int]
    prefix: Sequence[int]
    target: Sequence[int]
    lead: Sequence[int] = ()


def compose(
    passage: Sequence[int],
    prefix: Sequence[int],
    target: Sequence[int],
    input_length: int,
    max_passage_tokens: int = 256,
    lead: Sequence[int] = (),
) -> list[int]:
    """``lead + passage[:max_passage_tokens] + prefix[drop:] + target``, dropping the fewest prefix tokens
    to fit (`lead`: ``ScoreRequest.lead``, never cut).

    Raises ValueError when the cut passage plus the target alone exceed `input_length` (callers validate
    their options up front so users see a ``RalmInputError`` instead), or when the first target token
    would have no context at all to be predicted from.
    """
    passage = [*lead, *passage[:max_passage_tokens]]
    target = list(target)
    room = input_length - len(passage) - len(target)
    if room < 0:
        raise ValueError(
            f"a {len(passage)}-token passage and {len(target)} target tokens do not fit "
            f"in input_length {input_length}"
        )
    prefix = list(prefix)
    kept = prefix[len(prefix) - room :] if room < len(prefix) else prefix
    if target and not passage and not kept:
        raise ValueError("the first target token has no context to be predicted from")
    return passage + kept + target


def _batches(
    lengths: list[int], keeps: list[int], batch_size: int, max_batch_tokens: int, max_batch_scored: int
) -> list[list[int]]:
    """Indices grouped so each batch pads little and stays within its token and scored-position budgets.

    Rows are ordered by scored positions, then length (both descending): a batch computes the LM head at
    its widest row's number of positions for every row, so one long-target row (window 0 scores a whole
    window) must not share a batch with the many short-target ones.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-keeps[i], -lengths[i]))
    batches: list[list[int]] = []
    for i in order:
        if batches:
            last = batches[-1]
            # The first row of a batch is its widest and has the most scored positions.
            width, keep = lengths[last[0]], keeps[last[0]]
            if (
                len(last) < batch_size
                and (len(last) + 1) * width <= max_batch_tokens
                and (len(last) + 1) * keep <= max_batch_scored
            ):
                last.append(i)
                continue
        batches.append([i])
    return batches


def default_batch_size(device: torch.device) -> int:
    """Rows per forward when the caller does not say: 2 on a CPU, 32 on a GPU.

    Measured on a 2-core CPU with a GPT-2-small-sized model at 1023 tokens: 2 rows per forward were ~5%
    faster per row than 1, and 4 or 8 rows slower (cache misses outweigh the larger matrix products).
    """
    return 32 if torch.device(device).type == "cuda" else 2


def score_continuations(
    lm: LanguageModel,
    requests: Sequence[ScoreRequest],
    settings: ScoringSettings,
    *,
    max_batch_scored: int = 1024,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[torch.Tensor]:
    """Float32 log p(target_t | passage, prefix, target_<t) for each request, in request order.

    Each request is composed as `settings` say (its ``input_length`` and ``max_passage_tokens``) and batched
    within its ``batch_size`` and ``max_batch_tokens``. `max_batch_scored` bounds batch rows x scored
    positions (the (rows, positions, vocabulary) logits tensor). `on_batch(num_requests,
    num_target_tokens)` is called after each batch (progress bars).
    """
    batch_size = settings.batch_size or default_batch_size(lm.device)
    max_batch_tokens = settings.max_batch_tokens or batch_size * settings.input_length
    inputs: list[list[int]] = []
    n_targets: list[int] = []
    for request in requests:
        ids = compose(
            request.passage,
            request.prefix,
            request.target,
            settings.input_length,
            settings.max_passage_tokens,
            request.lead,
        )
        n_targets.append(len(request.target))
        inputs.append(ids[:-1])  # the last target token predicts nothing that is scored
    results: list[torch.Tensor] = [torch.zeros(0, dtype=torch.float32) for _ in requests]
    todo = [i for i, n in enumerate(n_targets) if n > 0]
    lengths = [len(inputs[i]) for i in todo]
    keeps = [n_targets[i] for i in todo]
    pad_id = 0  # any valid id: right padding sits after every real token, so the causal mask hides it
    with torch.inference_mode():
        for group in _batches(lengths, keeps, batch_size, max_batch_tokens, max_batch_scored):
            rows = [todo[g] for g in group]
            width = max(len(inputs[r]) for r in rows)
            keep = max(n_targets[r] for r in rows)
            input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
            positions = torch.empty((len(rows), keep), dtype=torch.long)
            labels = torch.zeros((len(rows), keep), dtype=torch.long)
            for b, r in enumerate(rows):
                seq, n = inputs[r], n_targets[r]
                input_ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
                # Position p predicts token p + 1, so the n targets are predicted by the last n inputs.
                positions[b, :n] = torch.arange(len(seq) - n, len(seq))
                positions[b, n:] = len(seq) - 1  # filler columns, discarded below
                labels[b, :n] = torch.tensor(requests[r].target, dtype=torch.long)
            logits = lm.logits(input_ids.to(lm.device), positions.to(lm.device))
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            picked = torch.gather(logprobs, -1, labels.to(lm.device)[..., None])[..., 0].cpu()
            for b, r in enumerate(rows):
                results[r] = picked[b, : n_targets[r]].clone()
            if on_batch is not None:
                on_batch(len(rows), sum(n_targets[r] for r in rows))
    return results
