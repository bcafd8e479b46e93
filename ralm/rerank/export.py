"""Export a training checkpoint as a Hugging Face folder that loads without Lightning.

The folder (format ``ralm-reranker/1``, docs/formats.md §5) holds ``save_pretrained`` weights with
one output label, the encoder's tokenizer, and ``ralm_reranker.json`` with the input rule's lengths.
It is written under a temporary name and renamed, so a crash never leaves a half-written reranker.
"""

from __future__ import annotations

import os

from ralm import __version__
from ralm.atomic_files import atomic_path
from ralm.errors import RalmInputError
from ralm.passage_rules import TRAINED
from ralm.progress import save_pretrained_quietly
from ralm.rerank.checkpoints import read_checkpoint
from ralm.rerank.cross_encoder_files import write_cross_encoder_files
from ralm.rerank.export_record import BM25Prior, RerankerExport, ZeroShotPrior
from ralm.rerank.inputs import PRIOR_RULE
from ralm.rerank.model import load_cross_encoder, load_tokenizer
from ralm.rerank.model_card import write_model_card


def export_reranker(
    checkpoint_path: str | None,
    out_dir: str,
    *,
    hyper_parameters: dict,
    trained_on: dict,
    metrics: dict | None = None,
    decision: str = TRAINED,
    decision_evidence: dict | None = None,
    threshold: float | None = None,
    rank_tokens: int | None = None,
) -> str:
    """Write the folder ``out_dir`` from a checkpoint; returns ``out_dir``.

    `decision` (``ralm.train.selection``) is recorded, and every ralm caller applies it: ``bm25`` takes
    BM25's order, ``no-retrieval`` declines to retrieve, whatever the model's scores; ``zero-shot`` (the
    LM ranks by y', the last `rank_tokens` of the prefix) is played by ``ralm eval ppl``. `checkpoint_path`
    None (only under a decision other than ``trained``): the folder holds no weights, only the record,
    the model card and the sentence-transformers files, whose input module refuses to load.
    """
    if checkpoint_path is None and decision == TRAINED:
        raise ValueError("a trained export needs its checkpoint")
    checkpoint = read_checkpoint(checkpoint_path) if checkpoint_path is not None else {}
    hp = {**hyper_parameters, **checkpoint.get("hyper_parameters", {})}
    record = RerankerExport(  # a field the format does not allow (no rank_tokens for zero-shot) fails here
        base_model=hp["encoder_name"],
        max_length=hp["max_length"],
        max_prefix_tokens=hp["max_prefix_tokens"],
        abstain=bool(hp["abstain"]),
        bm25_prior=_prior_of(checkpoint_path, checkpoint, hp) if checkpoint_path is not None else None,
        zero_shot_prior=_zero_shot_prior_of(checkpoint_path, checkpoint, hp, rank_tokens)
        if checkpoint_path is not None
        else None,
        decision=decision,
        threshold=threshold,
        rank_tokens=rank_tokens,
        decision_evidence=decision_evidence or {},
        loss=hp["loss"],
        trained_on=trained_on,
        checkpoint=os.path.basename(checkpoint_path) if checkpoint_path is not None else None,
        metrics=metrics or {},
        ralm_version=__version__,
    )
    model = _model_of(checkpoint_path, checkpoint, hp) if checkpoint_path is not None else None
    with atomic_path(out_dir) as tmp:  # an older export is replaced only by a complete one
        tmp.mkdir()
        if model is not None:
            save_pretrained_quietly(model, tmp)  # no bar in a log, no DeepSpeed import (and banner)
            tokenizer = load_tokenizer(hp["encoder_name"])
            tokenizer.model_max_length = hp["max_length"]
            tokenizer.save_pretrained(tmp)
        record.write(tmp)
        write_model_card(tmp, record.to_dict())  # README.md with hub metadata, from the same fields
        # modules.json and its input module: a sentence-transformers CrossEncoder that cuts as ralm does
        # (and refuses to load, saying why, when the decision is not to use the model's scores)
        write_cross_encoder_files(
            tmp, max_length=hp["max_length"], max_prefix_tokens=hp["max_prefix_tokens"], decision=decision
        )
    return out_dir


def _model_of(checkpoint_path: str, checkpoint: dict, hp: dict):
    """The checkpoint's encoder as a plain sequence classifier (its ``encoder.`` weights)."""
    model = load_cross_encoder(hp["encoder_name"])
    prefix = "encoder."
    state = {k[len(prefix) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(prefix)}
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Tied or buffer-only keys may be absent from a checkpoint; real weights may not.
    if unexpected or [k for k in missing if "position_ids" not in k]:
        raise RalmInputError(
            f"{checkpoint_path}: weights do not match encoder {hp['encoder_name']} "
            f"(missing {len(missing)}, unexpected {len(unexpected)})"
        )
    return model


def _prior_of(checkpoint_path: str, checkpoint: dict, hp: dict) -> BM25Prior | None:
    """The ``bm25_prior`` record: the prior's weight (and the abstention terms) from the checkpoint."""
    if not hp.get("bm25_prior", False):
        return None
    state = checkpoint["state_dict"]
    weight = state.get("prior_weight")
    if weight is None:
        raise RalmInputError(f"{checkpoint_path}: trained with bm25_prior but holds no prior_weight")
    if not hp.get("abstain", False):
        return BM25Prior(rule=PRIOR_RULE, weight=float(weight.detach()))
    if "abstain_bias" not in state or "abstain_weight" not in state:
        raise RalmInputError(
            f"{checkpoint_path}: trained with bm25_prior and abstain but holds no abstain_bias/abstain_weight"
        )
    return BM25Prior(
        rule=PRIOR_RULE,
        weight=float(weight.detach()),
        abstain_bias=float(state["abstain_bias"].detach()),
        abstain_weight=float(state["abstain_weight"].detach()),
        bm25_top_mean=float(hp["bm25_top_mean"]),
        bm25_top_std=float(hp["bm25_top_std"]),
        anchor=hp.get("abstain_anchor", "zero"),
    )


def _zero_shot_prior_of(
    checkpoint_path: str, checkpoint: dict, hp: dict, rank_tokens: int | None
) -> ZeroShotPrior | None:
    """The ``zero_shot_prior`` record: a and b from the checkpoint, y''s length from the data."""
    if not hp.get("zero_shot_prior", False):
        return None
    state = checkpoint["state_dict"]
    if "zero_shot_weight" not in state or (hp.get("abstain", False) and "zero_shot_bias" not in state):
        raise RalmInputError(
            f"{checkpoint_path}: trained with zero_shot_prior but holds no zero_shot_weight/bias"
        )
    if rank_tokens is None:
        raise RalmInputError(
            f"{checkpoint_path}: trained with zero_shot_prior on data that records no rank_tokens"
        )
    bias = state.get("zero_shot_bias")
    return ZeroShotPrior(
        weight=float(state["zero_shot_weight"].detach()),
        rank_tokens=int(rank_tokens),
        abstain_bias=float(bias.detach()) if bias is not None else None,
    )
