"""The run's configuration as recorded in ``ralm_data_gen.json`` and every shard, the metadata file around it
(`describe_run`), and mismatch checks.

``config`` holds exactly the values that decide which rows exist and what they contain (plus the shard
plan); two runs with equal ``config`` produce identical rows, so their shards may be mixed. Everything
else in the metadata (paths, versions, device, counts, summary) is informational.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ralm
from ralm.data_gen.inputs import SampledPrefixes
from ralm.data_gen.options import GenerationSettings
from ralm.data_gen.schema import FORMAT
from ralm.errors import RalmInputError
from ralm.lm.interface import LanguageModel
from ralm.lm.loading import compiled_record
from ralm.lm.special_tokens import special_tokens_record
from ralm.retrieval.index_meta import index_fingerprint


def run_config(
    *,
    lm: str,
    tokenizer: str,
    dtype: str,
    documents_sha256: str,
    index_meta: dict,
    stride: int,
    query_tokens: int,
    k: int,
    min_prefix_tokens: int,
    input_length: int,
    max_passage_tokens: int,
    seed: int,
    num_prefixes: int,
    rank_tokens: int,
    num_examples: int,
    num_shards: int,
    exclude_same_doc: bool,
    passage_form: str | None = None,
) -> dict[str, Any]:
    """The fields that decide the rows (and the shard plan). Kept flat so a difference names one field;
    `passage_form` only when a candidate hands the LM something else than its passage."""
    config = {
        "lm": lm,
        "tokenizer": tokenizer,
        "dtype": dtype,
        "documents_sha256": documents_sha256,
        "index_hash": index_fingerprint(index_meta),
        "s": stride,
        "l": query_tokens,
        "k": k,
        "min_prefix_tokens": min_prefix_tokens,
        "max_length": input_length,  # recorded under the name of --max-length, which it caps
        "max_passage_tokens": max_passage_tokens,
        "seed": seed,
        "num_prefixes": num_prefixes,
        "rank_tokens": rank_tokens,
        "num_examples": num_examples,
        "num_shards": num_shards,
        "exclude_same_doc": exclude_same_doc,
    }
    if passage_form is not None:
        config["passage_form"] = passage_form
    return config


# The metadata repeats these values of ``config`` at its top level, under their documented names
# (docs/formats.md §4).
_META_FROM_CONFIG = (
    "tokenizer",
    "s",
    "l",
    "k",
    "seed",
    "max_length",
    "max_passage_tokens",
    "num_prefixes",
    "rank_tokens",
    "num_examples",
    "exclude_same_doc",
    "index_hash",
)


def describe_run(
    documents: str,
    model: LanguageModel,
    index_meta: dict,
    sampled: SampledPrefixes,
    settings: GenerationSettings,
    *,
    limit: int | None,
    excluded: dict,
) -> tuple[dict, dict]:
    """(config, meta): what the rows depend on (a resume must match it) and the dataset's metadata file."""
    config = run_config(
        lm=model.name,
        tokenizer=model.tokenizer_name,
        dtype=str(model.dtype).removeprefix("torch."),
        documents_sha256=sampled.corpus.texts_sha256,
        index_meta=index_meta,
        **settings.recorded(),
    )
    if model.special_prefix:  # how inputs start is part of every row (recorded, keyed: a resume cannot mix)
        config.update(special_tokens_record(model.special_prefix, model.special_tokens))
    config.update(compiled_record(model))  # compiled kernels move bf16 labels: a resume cannot mix them
    meta = {
        "format": FORMAT,
        "config": config,
        "lm": model.name,
        **{key: config[key] for key in _META_FROM_CONFIG},
        "limit": limit,
        "index": index_meta,
        "documents": str(documents),
        "documents_available_prefixes": sampled.sample.available,
        "documents_skipped_too_short": sampled.sample.skipped_docs,
        "documents_total": len(sampled.corpus.doc_ids),
        "ralm_version": ralm.__version__,
        "complete": False,
        # What --exclude left out before sampling, as <passages>.excluded.json records it for the index
        # (documents_total counts the documents kept).
        "excluded": excluded,
    }
    return config, meta


def config_diff(this_run: dict, found: dict) -> list[str]:
    """``"field: found X, this run Y"`` for every field whose values differ (missing counts as differing)."""
    diffs = []
    for key in sorted(set(this_run) | set(found)):
        mine, theirs = this_run.get(key, "<absent>"), found.get(key, "<absent>")
        if mine != theirs:
            diffs.append(f"{key}: found {_short(theirs)}, this run {_short(mine)}")
    return diffs


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 24 else text[:12] + "…"


def refuse_if_different(path: Path, this_run: dict, found: dict) -> None:
    """Raise naming the differing fields when `path` was written by a run with another config."""
    diffs = config_diff(this_run, found)
    if diffs:
        raise RalmInputError(
            f"{path}: made with a different data-gen config ({'; '.join(diffs)}); "
            "use another --output or remove it"
        )


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RalmInputError(f"{path}: unreadable metadata ({err})") from None
