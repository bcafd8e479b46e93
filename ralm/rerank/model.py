"""The cross-encoder: any Hugging Face encoder with a one-logit sequence-classification head.

``roberta-base`` (the paper's choice) loads by name where the hub is reachable; a local folder (the
offline all-MiniLM-L6-v2 of docs/assets.md, or a tiny test BERT) loads the same way. A folder holding a bare
encoder (``BertModel``) gets a freshly initialised head, which is what fine-tuning wants.
"""

from __future__ import annotations

import os
import sys

import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as transformers_logging

from ralm.errors import RalmInputError
from ralm.progress import library_bars_quiet_in_logs

_SAID_FRESH: set[str] = set()
"""Encoders whose fresh head was announced (once per process)."""

ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attention_dropout")
"""Where an encoder's config keeps the dropout on its attention probabilities: BERT, RoBERTa, MiniLM,
ELECTRA and the like use the first, DistilBERT and ModernBERT the second."""


def load_cross_encoder(
    name_or_path: str, *, gradient_checkpointing: bool = False, attention_dropout: float | None = None
) -> PreTrainedModel:
    """A float32 sequence classifier with ``num_labels=1``: one relevance score per (prefix, passage).
    `attention_dropout` replaces the config's dropout on attention probabilities (None: keep it)."""
    looks_local = os.path.sep in name_or_path or name_or_path.startswith(".") or os.path.exists(name_or_path)
    if looks_local and not os.path.isdir(name_or_path):
        raise RalmInputError(f"encoder {name_or_path}: no such folder")
    verbosity = transformers_logging.get_verbosity()
    # its "newly initialized ... TRAIN this model" reads like an error
    transformers_logging.set_verbosity_error()
    try:
        overrides = _attention_dropout_overrides(name_or_path, attention_dropout)
        with library_bars_quiet_in_logs():
            model, info = AutoModelForSequenceClassification.from_pretrained(
                name_or_path, num_labels=1, dtype=torch.float32, output_loading_info=True, **overrides
            )
    except OSError as err:
        raise RalmInputError(f"encoder {name_or_path}: cannot load ({str(err).splitlines()[0]})") from None
    finally:
        transformers_logging.set_verbosity(verbosity)
    fresh = [k for k in info.get("missing_keys", []) if "position_ids" not in k]
    if fresh and name_or_path not in _SAID_FRESH:
        _SAID_FRESH.add(name_or_path)
        print(
            f"encoder {name_or_path}: no ranking head saved, starting from a fresh one "
            f"({len(fresh)} weights; expected before training)",
            file=sys.stderr,
        )
    if gradient_checkpointing:
        if not model.supports_gradient_checkpointing:
            raise RalmInputError(
                f"encoder {name_or_path}: gradient checkpointing is not supported by this model"
            )
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _attention_dropout_overrides(name_or_path: str, attention_dropout: float | None) -> dict[str, float]:
    """The config fields that set `attention_dropout` for this encoder ({} for None); an encoder whose config
    has none of ``ATTENTION_DROPOUT_KEYS`` is an error naming them (a silent no-op would train otherwise
    than asked)."""
    if attention_dropout is None:
        return {}
    config = AutoConfig.from_pretrained(name_or_path)
    keys = [key for key in ATTENTION_DROPOUT_KEYS if hasattr(config, key)]
    if not keys:
        raise RalmInputError(
            f"encoder {name_or_path}: --attention-dropout given, but its config "
            f"({type(config).__name__}) has none of {', '.join(ATTENTION_DROPOUT_KEYS)}"
        )
    return dict.fromkeys(keys, attention_dropout)


def output_head(model: PreTrainedModel) -> torch.nn.Linear:
    """The one-logit output layer: the last ``Linear`` with one output (BERT's ``classifier``, RoBERTa's
    ``classifier.out_proj``)."""
    heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 1]
    if not heads:
        raise RalmInputError(f"{type(model).__name__}: no one-output Linear layer")
    return heads[-1]


def zero_output_head(model: PreTrainedModel) -> None:
    """Zero the weights and bias of the one-logit output layer, so the model scores every pair 0.

    With the BM25 prior this makes the untrained reranker rank exactly like BM25; training then only
    learns corrections. The output layer is the last ``Linear`` with one output (BERT's ``classifier``,
    RoBERTa's ``classifier.out_proj``).
    """
    head = output_head(model)
    with torch.no_grad():
        head.weight.zero_()
        if head.bias is not None:
            head.bias.zero_()


def load_tokenizer(name_or_path: str) -> PreTrainedTokenizerBase:
    """The encoder's tokenizer; it must be a fast one (character offsets cut the prefix)."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    except OSError as err:
        raise RalmInputError(
            f"encoder {name_or_path}: cannot load tokenizer ({str(err).splitlines()[0]})"
        ) from None
    if not tokenizer.is_fast:
        raise RalmInputError(f"encoder {name_or_path}: needs a fast tokenizer (tokenizer.json)")
    return tokenizer
