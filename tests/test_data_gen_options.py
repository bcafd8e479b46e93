"""`ralm data-gen`'s options: the shared groups (`LMOptions`, `RetrievalOptions`, `WindowOptions`) and its own
(`SamplingOptions`, `ShardingOptions`); every former spelling that is a leaf still works, former group
names are refused naming the new one, and the recorded config is the one datasets made before record.
"""

from __future__ import annotations

import typing
from types import SimpleNamespace

import pytest
import torch

from ralm.command_args import parse
from ralm.data_gen.data_gen_command import RENAMED, build_parser, data_gen, main
from ralm.data_gen.generate import ShardContext, resolve_settings
from ralm.data_gen.metadata import describe_run
from ralm.data_gen.options import SamplingOptions, ShardingOptions, prefix_floor
from ralm.errors import RalmInputError
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

REQUIRED = ["--documents", "d.jsonl", "--index", "idx", "--lm", "gpt2", "--output", "out"]


def _parsed(argv: list[str]) -> dict:
    _, init = parse(build_parser(), argv)
    return {k: v for k, v in vars(init).items() if k != "config" and not k.startswith("__")}


def test_every_former_leaf_spelling_reaches_its_group():
    """The options of the command before the shared groups, as users and `ralm run` type them."""
    argv = [
        *REQUIRED,
        "--passages",
        "p.jsonl",
        "--gguf-file",
        "m.gguf",
        "--k",
        "3",
        "--stride",
        "8",
        "--query-tokens",
        "12",
        "--min-prefix-tokens",
        "5",
        "--max-length",
        "512",
        "--max-passage-tokens",
        "64",
        "--dtype",
        "fp32",
        "--device",
        "cpu",
        "--num-prefixes",
        "9",
        "--seed",
        "2",
        "--limit",
        "4",
        "--num-shards",
        "3",
        "--shard-id",
        "1",
        "--prefixes-per-shard",
        "3",
        "--keep-shards",
        "--allow-same-doc",
        "--threads",
        "2",
        "--exclude",
        '["held_out"]',
        "--progress",
        "false",
    ]
    assert _parsed(argv) == {
        "documents": "d.jsonl",
        "output": "out",
        "lm": LMOptions(model="gpt2", gguf_file="m.gguf", device="cpu", dtype="fp32", max_length=512),
        "retrieval": RetrievalOptions(index="idx", passages="p.jsonl", k=3, threads=2),
        "exclude": ["held_out"],
        "allow_same_doc": True,
        "sampling": SamplingOptions(num_prefixes=9, min_prefix_tokens=5, seed=2, limit=4),
        "window": WindowOptions(stride=8, query_tokens=12, max_passage_tokens=64),
        "sharding": ShardingOptions(num_shards=3, shard_id=1, prefixes_per_shard=3, keep_shards=True),
        "progress": False,
    }


def test_the_defaults_are_the_papers_and_the_commands_before():
    found = _parsed(REQUIRED)
    assert found["lm"] == LMOptions(model="gpt2") and found["lm"].max_length is None  # 1024, capped
    assert found["retrieval"] == RetrievalOptions(index="idx", k=16, threads=1)
    assert found["window"] == WindowOptions(stride=4, query_tokens=32, max_passage_tokens=256)
    assert found["sampling"] == SamplingOptions(num_prefixes=300_000, min_prefix_tokens=32, seed=0)
    assert found["allow_same_doc"] is False and found["sharding"] == ShardingOptions(prefixes_per_shard=1000)


@pytest.mark.parametrize(
    ("former", "new"),
    [
        ("--sampling.stride", "--window.stride"),
        ("--sampling.query-tokens", "--window.query-tokens"),
        ("--candidates.k", "--retrieval.k"),
        ("--candidates.retrieval-threads", "--retrieval.threads"),
        ("--retrieval-threads", "--threads"),
        ("--candidates.allow-same-doc", "--allow-same-doc"),
        ("--scoring.max-length", "--lm.max-length"),
        ("--scoring.max-passage-tokens", "--window.max-passage-tokens"),
        ("--scoring.device", "--lm.device"),
        ("--scoring.dtype", "--lm.dtype"),
    ],
)
def test_a_former_group_option_is_refused_naming_its_new_name(former, new, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*REQUIRED, former, "2"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {former}: renamed {new} (README, Usage)"


def test_every_renamed_option_names_an_option_of_the_command():
    keys = build_parser().ralm_option_names.keys
    assert set(RENAMED.values()) <= keys and not set(RENAMED) & keys


@pytest.mark.parametrize(
    ("text", "key", "new"),
    [
        ("candidates:\n  k: 4\n", "candidates.k", "retrieval.k"),
        ("sampling:\n  stride: 8\n", "sampling.stride", "window.stride"),
        ("scoring:\n  max_length: 512\n", "scoring.max_length", "lm.max_length"),
    ],
)
def test_a_config_file_with_a_former_key_is_refused_naming_key_and_new_name(tmp_path, capsys, text, key, new):
    config = tmp_path / "old.yaml"
    config.write_text(text)
    with pytest.raises(SystemExit):
        main([*REQUIRED, "--config", str(config)])
    assert capsys.readouterr().err.strip() == (
        f"error: {config}: key {key!r} was renamed {new!r} (README, Usage)"
    )


def test_a_config_file_may_name_the_lm_alone(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("documents: d.jsonl\noutput: out\nlm: gpt2\nretrieval:\n  index: idx\n  k: 4\n")
    found = _parsed(["--config", str(config), "--max-length", "256"])
    assert found["lm"] == LMOptions(model="gpt2", max_length=256) and found["retrieval"].k == 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retrieval": RetrievalOptions(index="idx")}, "--lm: required"),
        ({"lm": LMOptions(model="gpt2")}, "--index: required"),
    ],
)
def test_lm_and_index_are_required_before_anything_is_written(tmp_path, options, message):
    out = tmp_path / "out"
    with pytest.raises(RalmInputError, match=f"^{message}"):
        data_gen("d.jsonl", str(out), **options)
    assert not out.exists()


def test_without_index_the_command_line_names_the_option(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--documents", "d.jsonl", "--lm", "gpt2", "--output", "out"])
    assert stop.value.code == 2 and capsys.readouterr().err.startswith("error: --index: required")


def test_the_prefix_floor_is_the_query_length_or_the_minimum_prefix():
    assert prefix_floor(SamplingOptions(min_prefix_tokens=32), WindowOptions(query_tokens=16)) == 32
    assert prefix_floor(SamplingOptions(min_prefix_tokens=8), WindowOptions(query_tokens=16)) == 16
    assert prefix_floor(SamplingOptions(min_prefix_tokens=0), WindowOptions(query_tokens=1)) == 1


def test_the_shard_context_names_the_types_it_holds():
    hints = typing.get_type_hints(ShardContext)
    assert object not in hints.values()
    assert {name: hint.__name__ for name, hint in hints.items() if name in ("corpus", "sample", "model")} == {
        "corpus": "TokenizedCorpus",
        "sample": "PrefixSample",
        "model": "LanguageModel",
    }


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
        "passage_bos": 50256,
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
    "format": "ralm-rerank-data/1",
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
    bos_id: int | None,
) -> tuple[dict, dict]:
    """(config, meta) as `data_gen` builds them, for an LM with a 2,048-token context and fakes of the index,
    the documents and the sample."""
    model = SimpleNamespace(
        name="gpt2",
        tokenizer_name="gpt2-tok",
        dtype=torch.bfloat16,
        bos_id=bos_id,
        max_length=2048,
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
        max_length=lm.input_length(model.max_length),
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
        bos_id=None,
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
    ]
    found = _parsed(argv)
    config, meta = _recorded(
        found["lm"],
        found["retrieval"],
        found["sampling"],
        found["window"],
        found["allow_same_doc"],
        bos_id=50256,
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
        max_length=LMOptions(max_length=max_length).input_length(context),
        num_passages=10,
        num_examples=5,
        num_shards=1,
    )
    assert settings.recorded()["max_length"] == recorded
