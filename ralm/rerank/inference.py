"""Scoring with an exported reranker (``ralm train`` output); what ``ralm eval ppl --reranker`` uses.

No Lightning here: the folder is a plain Hugging Face model plus ``ralm_reranker.json``, and the input
rule is the one training used (``ralm.rerank.inputs``). Reranking k passages costs k encoder passes,
batched, and no LM pass; a stacked reranker (``zero_shot_prior``) also needs the frozen LM's y' log-prob
under each passage, which its caller computes (``ralm eval ppl`` scores them with the evaluated LM).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ralm.devices import resolve_device, resolve_dtype
from ralm.errors import RalmInputError
from ralm.passage_rules import (
    BM25,
    BM25_ABOVE,
    NO_RETRIEVAL,
    TRAINED,
    ZERO_SHOT,
    ZERO_SHOT_ABOVE,
    stacked_scores,
)
from ralm.progress import library_bars_quiet_in_logs
from ralm.ranking import best_first
from ralm.rerank.export_record import RerankerExport
from ralm.rerank.inputs import bm25_prior, encode_groups
from ralm.rerank.model_card import DECISION_NOTES

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


class PredictiveReranker:
    """A trained cross-encoder: ``score(prefixes, candidates)`` gives one score per candidate passage."""

    def __init__(self, model, tokenizer, export: RerankerExport, device: torch.device, batch_size: int = 64):
        """`model` and `tokenizer` None: an export that holds no weights (a no-retrieval decision without a
        step-0 model); ``rank`` and ``order`` still apply the decision, ``score`` refuses."""
        self.model, self.tokenizer, self.export = model, tokenizer, export
        """`export`: the folder's ``ralm_reranker.json``, which the attributes below mirror."""
        self.device, self.batch_size = device, batch_size
        self.max_length: int = export.max_length
        self.max_prefix_tokens: int = export.max_prefix_tokens
        self.abstain: bool = export.abstain
        """Trained with the empty passage as a candidate: ``rank`` and ``order`` offer it too."""
        prior = export.bm25_prior
        self.prior_weight: float | None = float(prior.weight) if prior else None
        """Trained with ``--bm25-prior``: ``score`` needs the candidates' BM25 scores and adds w * z."""
        self.abstention = prior.abstention if prior and self.abstain else None
        """With the prior and abstention: how the empty passage is scored instead of w * z
        (``ABSTAIN_FIELDS``)."""
        self.anchor: str = (prior.anchor or "zero") if prior else "zero"
        """``top``: the empty passage's score adds BM25's top-1 prior (``ralm.train.lit_module``)."""
        self.threshold: float | None = export.threshold
        """The ``bm25-above`` decision's T: BM25's top-1 when its score is at least T, else no passage (or
        the ``zero-shot-above`` decision's M, which needs the LM)."""
        self.rank_tokens: int | None = export.rank_tokens
        """The y' length of the ``zero-shot`` and ``zero-shot-above`` decisions (the prefix's last tokens the
        LM scores)."""
        self.zero_shot_prior = export.zero_shot_prior
        """Trained with ``--zero-shot-prior`` (the stacked reranker): ``score`` needs the frozen LM's y'
        log-probs and adds ``weight`` times them (``stacked_scores``)."""
        self.decision: str = export.decision
        """``bm25``: ``rank``/``order`` give BM25's order (candidate 0 first); ``no-retrieval``: they always
        decline (the held-out decision prefixes preferred that rule to the trained picks)."""

    @classmethod
    def from_pretrained(
        cls, folder: str | os.PathLike, *, device: str = "auto", dtype: str = "auto", batch_size: int = 64
    ) -> PredictiveReranker:
        """Load an exported folder; cuda + bf16 when available, else cpu + fp32 (or as given)."""
        folder = os.fspath(folder)
        export = RerankerExport.read(folder)
        torch_device = resolve_device(device)
        if export.decision != TRAINED and not any(
            os.path.exists(os.path.join(folder, name)) for name in WEIGHT_FILES
        ):
            return cls(None, None, export, torch_device, batch_size)
        torch_dtype = resolve_dtype(dtype, torch_device)
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder)
            with library_bars_quiet_in_logs():
                model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch_dtype)
        except (OSError, ValueError) as err:
            raise RalmInputError(
                f"{folder}: cannot load the reranker model ({str(err).splitlines()[0]})"
            ) from None
        if model.config.num_labels != 1:
            raise RalmInputError(f"{folder}: model has {model.config.num_labels} labels, a reranker has 1")
        model.to(torch_device).eval()
        return cls(model, tokenizer, export, torch_device, batch_size)

    @torch.inference_mode()
    def score(
        self,
        prefixes: Sequence[str],
        candidates: Sequence[Sequence[str]],
        bm25_scores: Sequence[Sequence[float | None]] | None = None,
        rank_logprobs: Sequence[Sequence[float]] | None = None,
    ) -> list[list[float]]:
        """Scores for each prefix's candidates (higher is better), same nesting as ``candidates``.

        ``bm25_scores`` (same nesting) are required by a reranker trained with the BM25 prior and
        ignored otherwise. The empty string is the empty passage (``--abstain``): with the prior, its
        BM25 value is ignored, the others are standardised without it, and it gets the abstention terms.
        ``rank_logprobs`` (same nesting: the frozen LM's log-prob of the prefix's last ``rank_tokens``
        tokens after each passage, the empty one's with no passage) are required by a stacked reranker
        (``--zero-shot-prior``) and ignored otherwise.
        """
        if self.prior_weight is not None:
            if bm25_scores is None:
                raise ValueError("this reranker was trained with the BM25 prior: pass bm25_scores")
            if [len(g) for g in bm25_scores] != [len(g) for g in candidates]:
                raise ValueError("bm25_scores must have the same nesting as candidates")
            if any(s is None for g in bm25_scores for s in g):
                raise ValueError(
                    "this reranker was trained with the BM25 prior: every passage needs its BM25 score"
                )
        if self.zero_shot_prior is not None:
            _check_rank_logprobs(rank_logprobs, candidates, self.zero_shot_prior.rank_tokens)
        out = self.encoder_scores(prefixes, candidates)
        if self.prior_weight is not None:
            out = [
                self._with_prior(group_f, passages, list(s))
                for group_f, passages, s in zip(out, candidates, bm25_scores, strict=True)
            ]
        if self.zero_shot_prior is not None:
            prior = self.zero_shot_prior
            out = [
                stacked_scores(f, list(r), [p == "" for p in passages], prior.weight, prior.abstain_bias)
                for f, r, passages in zip(out, rank_logprobs, candidates, strict=True)
            ]
        return out

    @torch.inference_mode()
    def encoder_scores(
        self, prefixes: Sequence[str], candidates: Sequence[Sequence[str]]
    ) -> list[list[float]]:
        """The encoder's own score f of each (prefix, passage) pair, before any prior (``score`` adds them);
        same nesting as ``candidates``, the empty string the empty passage."""
        if len(prefixes) != len(candidates):
            raise ValueError(f"{len(prefixes)} prefixes but {len(candidates)} candidate lists")
        if self.model is None:
            raise RalmInputError(
                f"{DECISION_NOTES.get(self.decision, 'this export holds no model')}; "
                "the folder holds no model "
                "weights to score with (rank and order apply the decision)"
            )
        out: list[list[float]] = []
        # Chunk by prefixes so each prefix is cut once and a chunk holds about batch_size pairs.
        i = 0
        while i < len(prefixes):
            j, pairs = i, 0
            while j < len(prefixes) and (pairs == 0 or pairs + len(candidates[j]) <= self.batch_size):
                pairs += len(candidates[j])
                j += 1
            flat = self._score_chunk(prefixes[i:j], candidates[i:j]) if pairs else []
            for group in candidates[i:j]:
                out.append(flat[: len(group)])
                flat = flat[len(group) :]
            i = j
        return out

    def _with_prior(self, f: list[float], passages: Sequence[str], bm25: list[float]) -> list[float]:
        """f + w * z(BM25) for passages; for the empty passage f + b + c * t (ABSTAIN_FIELDS)."""
        real = [i for i, p in enumerate(passages) if p != ""]
        z = dict(zip(real, bm25_prior([bm25[i] for i in real]), strict=True))
        empty = 0.0
        if self.abstention is not None:
            a = self.abstention
            strength = (max((bm25[i] for i in real), default=0.0) - a["bm25_top_mean"]) / a["bm25_top_std"]
            empty = a["abstain_bias"] + a["abstain_weight"] * strength
            if self.anchor == "top" and z:  # abstaining is scored against BM25's top-1 (its largest z)
                empty += self.prior_weight * max(z.values())
        return [v + (self.prior_weight * z[i] if i in z else empty) for i, v in enumerate(f)]

    def rank(
        self,
        prefixes: Sequence[str] | str,
        candidates: Sequence[Sequence[str]] | Sequence[str],
        bm25_scores: Sequence[Sequence[float | None]] | Sequence[float | None] | None = None,
        rank_logprobs: Sequence[Sequence[float]] | Sequence[float] | None = None,
    ) -> list[int | None] | int | None:
        """The chosen candidate per prefix (index into its passages), or None for no passage.

        One prefix (a string) with its passages and scores gives one answer; lists of them give a list.
        The first of ``order``: abstention, the BM25 prior and the export's decision applied here.
        """
        if isinstance(prefixes, str):
            scores = None if bm25_scores is None else [bm25_scores]
            ranks = None if rank_logprobs is None else [rank_logprobs]
            return self.rank([prefixes], [candidates], scores, ranks)[0]
        orders = self.order(prefixes, candidates, bm25_scores, rank_logprobs)
        return [best[0] if best else None for best in orders]

    def order(
        self,
        prefixes: Sequence[str],
        candidates: Sequence[Sequence[str]],
        bm25_scores: Sequence[Sequence[float | None]] | None = None,
        rank_logprobs: Sequence[Sequence[float]] | None = None,
    ) -> list[list[int | None]]:
        """Each prefix's candidates best first (indices into its passages), None standing for no passage.

        Callers pass the passages and their BM25 scores whatever the reranker was trained with: a reranker
        trained with ``--abstain`` also scores the empty passage (None in the order, where it ranks); one
        trained with the BM25 prior reads the scores. The export decision comes first: ``no-retrieval``
        always declines (``[None]``); ``bm25`` gives BM25's order, the passages as given (the empty passage
        last with ``--abstain``), without scoring. Ties go to the earlier candidate (higher in BM25 order),
        the empty passage last.
        """
        if self.decision == NO_RETRIEVAL:
            return [[None] for _ in prefixes]
        if self.decision in (ZERO_SHOT, ZERO_SHOT_ABOVE):
            # --reranker zero-shot ranks as both rules do but never abstains: no stand-in for the second
            instead = (
                "in ralm eval qa|flare, --reranker zero-shot ranks with the LM itself"
                if self.decision == ZERO_SHOT
                else "ralm eval qa|flare cannot play its abstention"
            )
            raise RalmInputError(
                f"{DECISION_NOTES[self.decision]}: this reranker cannot order passages without that LM "
                f"(ralm eval ppl --reranker FOLDER scores y' = the last {self.rank_tokens} tokens with it; "
                f"{instead})"
            )
        if self.decision in (BM25, BM25_ABOVE):
            if len(prefixes) != len(candidates):
                raise ValueError(f"{len(prefixes)} prefixes but {len(candidates)} candidate lists")
            if self.decision == BM25:
                return [list(range(len(c))) + ([None] if self.abstain else []) for c in candidates]
            return self._above_threshold(candidates, bm25_scores)
        if self.zero_shot_prior is not None and rank_logprobs is None:
            raise RalmInputError(
                "this reranker is stacked on the frozen LM's zero-shot score (--zero-shot-prior): ordering "
                "needs the LM's log-prob of y' = the prefix's last "
                f"{self.zero_shot_prior.rank_tokens} tokens after each passage (with abstention, then with "
                "none): pass rank_logprobs "
                "(ralm eval ppl --reranker FOLDER scores them; ralm eval qa|flare cannot)"
            )
        groups = [list(c) + ([""] if self.abstain else []) for c in candidates]
        bm25 = None
        if bm25_scores is not None:
            bm25 = [list(s) + ([0.0] if self.abstain else []) for s in bm25_scores]
        orders: list[list[int | None]] = []
        for real, scores in zip(candidates, self.score(prefixes, groups, bm25, rank_logprobs), strict=True):
            orders.append([i if i < len(real) else None for i in best_first(scores)])
        return orders

    def _above_threshold(
        self, candidates: Sequence[Sequence[str]], bm25_scores: Sequence[Sequence[float | None]] | None
    ) -> list[list[int | None]]:
        """The ``bm25-above`` rule: BM25's order when the best BM25 score is at least T, else no passage."""
        if bm25_scores is None or [len(s) for s in bm25_scores] != [len(c) for c in candidates]:
            raise ValueError("this export's decision is bm25-above: pass bm25_scores, nested as candidates")
        orders: list[list[int | None]] = []
        for group, scores in zip(candidates, bm25_scores, strict=True):
            real = [s for s in scores if s is not None]
            if real and max(real) >= self.threshold:
                orders.append(list(range(len(group))) + [None])
            else:
                orders.append([None])
        return orders

    def _score_chunk(self, prefixes: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[float]:
        encoded = encode_groups(
            self.tokenizer,
            prefixes,
            candidates,
            max_length=self.max_length,
            max_prefix_tokens=self.max_prefix_tokens,
        )
        inputs = {k: v.to(self.device) for k, v in encoded.items()}
        return self.model(**inputs).logits.squeeze(-1).float().cpu().tolist()

    def best(
        self, prefix: str, candidates: Sequence[str], bm25_scores: Sequence[float] | None = None
    ) -> int | None:
        """``rank`` for one prefix: the chosen candidate's index, or None for no passage."""
        return self.rank([prefix], [candidates], None if bm25_scores is None else [bm25_scores])[0]


def _check_rank_logprobs(
    rank_logprobs: Sequence[Sequence[float]] | None, candidates: Sequence[Sequence[str]], rank_tokens: int
) -> None:
    """A stacked reranker's y' log-probs: given, nested as the candidates, every one a finite number."""
    if rank_logprobs is None:
        raise ValueError(
            f"this reranker was trained with the zero-shot prior: pass rank_logprobs, the frozen LM's "
            f"log-prob of the prefix's last {rank_tokens} tokens after each passage"
        )
    if [len(g) for g in rank_logprobs] != [len(g) for g in candidates]:
        raise ValueError("rank_logprobs must have the same nesting as candidates")
    if not all(isinstance(v, int | float) and math.isfinite(v) for g in rank_logprobs for v in g):
        raise ValueError("rank_logprobs must be finite numbers")
