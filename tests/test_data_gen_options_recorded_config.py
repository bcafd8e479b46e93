"""`ralm data-gen`'s options: the recorded config is the one datasets made before the shared option groups."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from data_gen_fixtures import REQUIRED, _parsed

from ralm.data_gen.metadata import describe_run
from ralm.data_gen.options import SamplingOptions, resolve_settings
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

# ------------------------------------------------------------------ the recorded config, before and after

# `ralm_data_gen.json` as the command wrote it before the shared option groups (commit ec25360's
# `_settings` and `_describe_run`, with the fakes of `_recorded` below and ralm_version left out): the
# defaults (an LM with a 2,048-token context), and every option set (`--num-prefixes 500 --stride 8
# --query-tokens 24 --min-prefix-tokens 8 --seed 3 --limit 100 --k 5 --allow-same-doc --retrieval-threads
# 4 --max-length 512 --max-passage-tokens 64`, a tokenizer with a BOS). A folder holding these resumes.
_INDEX_META = {
    "backend": "bm25s",
    "created": "t",
    "format": "ralm-index/1",
    "num_passages": 1000,
    "passages_path": "/p",
    "passages_sha256": "ab" * 32,
}
_INDEX_HASH = "6b03daba96f78a644d14408dfc2f5e21345dc29402b8a46f41260331e5bacc8b"
BEFORE = {
    "defaults": {
        "documents_sha256": "cd" * 32,
        "dtype": "bfloat16",
        "exclude_same_doc": True,
        "index_hash": _INDEX_HASH,
        "k": 16,
        "l": 32,
        "lm": "gpt2",
        "max_length": 1024,
        "max_passage_tokens": 256,
        "min_prefix_tokens": 32,
        "num_examples": 300,
        "num_prefixes": 300000,
        "num_shards": 3,
        "rank_tokens": 16,
        "s": 4,
        "seed": 0,
        "tokenizer": "gpt2-tok",
    },
    "custom": {
        "documents_sha256": "cd" * 32,
        "dtype": "bfloat16",
        "exclude_same_doc": False,
        "index_hash": _INDEX_HASH,
        "k": 5,
        "l": 24,
        "lm": "gpt2",
        "max_length": 512,
        "max_passage_tokens": 64,
        "min_prefix_tokens": 24,
        "num_examples": 100,
        "num_prefixes": 500,
        "num_shards": 3,
        "rank_tokens": 12,
        "special_prefix": [50256],
        "special_tokens": "eval-lm",
        "s": 8,
        "seed": 3,
        "tokenizer": "gpt2-tok",
    },
}
# The rest of the metadata file (informational) for the defaults; "custom" differs only in what `config` holds
# and in "limit": 100.
BEFORE_META = {
    "complete": False,
    "documents": "docs.jsonl",
    "documents_available_prefixes": 900,
    "documents_skipped_too_short": 1,
    "documents_total": 3,
    "excluded": {"rules": []},
    "format": "ralm-rerank-data/2",
    "index": _INDEX_META,
    "limit": None,
    "lm": "gpt2",
}
_TOP_LEVEL = (
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


def _recorded(
    lm: LMOptions,
    retrieval: RetrievalOptions,
    sampling: SamplingOptions,
    window: WindowOptions,
    allow_same_doc: bool,
    special_prefix: tuple[int, ...],
) -> tuple[dict, dict]:
    """(config, meta) as `data_gen` builds them, for an LM with a 2,048-token context and fakes of the index,
    the documents and the sample."""
    model = SimpleNamespace(
        name="gpt2",
        tokenizer_name="gpt2-tok",
        dtype=torch.bfloat16,
        special_prefix=special_prefix,
        special_tokens=lm.special_tokens,
        context_length=2048,
    )
    sampled = SimpleNamespace(
        corpus=SimpleNamespace(texts_sha256="cd" * 32, doc_ids=["a", "b", "c"]),
        sample=SimpleNamespace(available=900, skipped_docs=1),
    )
    settings = resolve_settings(
        sampling,
        window,
        retrieval,
        allow_same_doc=allow_same_doc,
        input_length=lm.input_length(model.context_length),
        num_passages=_INDEX_META["num_passages"],
        num_examples=min(300, sampling.limit or 300),
        num_shards=3,
    )
    config, meta = describe_run(
        "docs.jsonl",
        model,
        dict(_INDEX_META),
        sampled,
        settings,
        limit=sampling.limit,
        excluded={"rules": []},
    )
    meta.pop("ralm_version")
    return config, meta


def test_the_recorded_config_with_the_defaults_is_the_one_recorded_before():
    config, meta = _recorded(
        LMOptions(model="gpt2"),
        RetrievalOptions(index="idx"),
        SamplingOptions(),
        WindowOptions(),
        allow_same_doc=False,
        special_prefix=(),
    )
    assert config == BEFORE["defaults"]
    assert meta == {**BEFORE_META, "config": config, **{key: config[key] for key in _TOP_LEVEL}}


def test_the_recorded_config_with_every_option_set_is_the_one_recorded_before():
    argv = [
        *REQUIRED,
        "--num-prefixes",
        "500",
        "--stride",
        "8",
        "--query-tokens",
        "24",
        "--min-prefix-tokens",
        "8",
        "--seed",
        "3",
        "--limit",
        "100",
        "--k",
        "5",
        "--allow-same-doc",
        "--threads",
        "4",
        "--max-length",
        "512",
        "--max-passage-tokens",
        "64",
        "--rank-tokens",
        "12",
        "--special-tokens",
        "eval-lm",
    ]
    found = _parsed(argv)
    config, meta = _recorded(
        found["lm"],
        found["retrieval"],
        found["sampling"],
        found["window"],
        found["allow_same_doc"],
        special_prefix=(50256,),
    )
    assert config == BEFORE["custom"]
    assert meta == {**BEFORE_META, "config": config, "limit": 100, **{key: config[key] for key in _TOP_LEVEL}}


@pytest.mark.parametrize(
    ("max_length", "context", "recorded"),
    [(None, 256, 256), (None, 2048, 1024), (512, 256, 256), (2048, 4096, 2048)],
)
def test_the_recorded_input_length_is_capped_at_the_lms_context(max_length, context, recorded):
    settings = resolve_settings(
        SamplingOptions(),
        WindowOptions(),
        RetrievalOptions(),
        allow_same_doc=False,
        input_length=LMOptions(max_length=max_length).input_length(context),
        num_passages=10,
        num_examples=5,
        num_shards=1,
    )
    assert settings.recorded()["input_length"] == recorded  # ralm_data_gen.json's max_length
