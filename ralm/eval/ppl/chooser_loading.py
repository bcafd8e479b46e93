"""The models that choose a window's passage before the LM scores it (``ralm.eval.ppl.choosers``), loaded
by condition name: trained rerankers (a folder that is not one fails here) and zero-shot reranking LMs."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ralm.errors import RalmInputError
from ralm.eval.ppl.conditions import Condition
from ralm.lm.options import window_fits
from ralm.passage_rules import TRAINED, ZERO_SHOT, ZERO_SHOT_ABOVE

if TYPE_CHECKING:
    from ralm.eval.ppl.choosers import RerankLM
    from ralm.eval.ppl.options import RerankingOptions
    from ralm.lm.options import LMOptions, WindowOptions


def play_exports(conditions: list[Condition], rank_tokens: int) -> list[Condition]:
    """`conditions` with each trained export whose decision is ``zero-shot`` or ``zero-shot-above`` played by
    the evaluated LM (``Condition.played_as``): its y' log-probs rank the candidates (and, with the export's
    threshold, abstain), as the export decided on data-gen's rows; and each stacked export (a trained
    decision with ``zero_shot_prior``) played as that rule plus its encoder (``Condition.stacked``). Its y'
    must be this run's ``--rank-tokens`` (a folder that is not an export fails here)."""
    from ralm.rerank.export_record import RerankerExport

    played = []
    for c in conditions:
        export = RerankerExport.read(str(c.model)) if c.kind == TRAINED else None
        if export is not None and export.decision in (ZERO_SHOT, ZERO_SHOT_ABOVE):
            _check_rank_tokens(c, export.decision, export.rank_tokens, rank_tokens)
            c = replace(c, played_as=export.decision, played_threshold=export.threshold)
        elif export is not None and export.decision == TRAINED and export.zero_shot_prior is not None:
            prior = export.zero_shot_prior
            _check_rank_tokens(c, "a stacked reranker", prior.rank_tokens, rank_tokens)
            bias = prior.abstain_bias if export.abstain else None
            c = replace(
                c, played_as=ZERO_SHOT_ABOVE if export.abstain else ZERO_SHOT, stacked=(prior.weight, bias)
            )
        played.append(c)
    return played


def _check_rank_tokens(condition: Condition, what: str, exported: int | None, run: int) -> None:
    """An export played on the evaluated LM's y' needs this run's y' to be the one it was decided on."""
    if exported != run:
        raise RalmInputError(
            f"{condition.model}: its export decision is {what} with y' of {exported} tokens; this run ranks "
            f"{run} (pass --rank-tokens {exported})"
        )


def load_rerankers(conditions: list[Condition], device: str) -> dict:
    """The trained rerankers of `conditions` whose encoder scores before the LM (``encoder_first``), by
    condition name (a folder that is not one fails here)."""
    if not any(c.kind == TRAINED and c.encoder_first for c in conditions):
        return {}
    from ralm.rerank.inference import PredictiveReranker

    return {
        c.name: PredictiveReranker.from_pretrained(c.model, device=device)
        for c in conditions
        if c.kind == TRAINED and c.encoder_first
    }


def load_rerank_lms(
    conditions: list[Condition], lm: LMOptions, window: WindowOptions, reranking: RerankingOptions
) -> dict[str, RerankLM]:
    """The zero-shot reranking LMs (``--rerank-lm``) of `conditions` by condition name."""
    from ralm.eval.ppl.choosers import RerankLM
    from ralm.lm.loading import load_lm

    models = {}
    for c in conditions:
        if not (c.kind == ZERO_SHOT and c.chooses_first):
            continue
        rerank_lm = load_lm(c.model, device=lm.device, dtype=lm.dtype, special_tokens=lm.special_tokens)
        input_length = lm.input_length(rerank_lm.context_length)
        if not window_fits(input_length, window.max_passage_tokens, reranking.rank_tokens):
            raise RalmInputError(
                f"--rerank-lm {c.model}: its {input_length} tokens cannot hold a"
                f" {window.max_passage_tokens}-token passage and {reranking.rank_tokens} ranking tokens"
            )
        models[c.name] = RerankLM(rerank_lm, input_length)
    return models
