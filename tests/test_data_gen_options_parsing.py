"""`ralm data-gen`'s options: the shared groups (`LMOptions`, `RetrievalOptions`, `WindowOptions`) and its own
(`SamplingOptions`, `ShardingOptions`); every former spelling that is a leaf still works, former group
names are refused naming the new one.
"""

from __future__ import annotations

import typing

import pytest
from data_gen_fixtures import REQUIRED, _parsed

from ralm.data_gen.data_gen_command import RENAMED, build_parser, data_gen, main
from ralm.data_gen.generate import ShardContext
from ralm.data_gen.options import SamplingOptions, ShardingOptions, prefix_floor
from ralm.errors import RalmInputError
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions


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
        "--passage-form",
        "continuation",
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
        "passage_form": "continuation",
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
    assert found["passage_form"] == "retrieved"  # the paper's: the passage as indexed


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
    assert capsys.readouterr().err.strip() == f"error: {former}: renamed {new} (CHANGELOG.md)"


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
        f"error: {config}: key {key!r} was renamed {new!r} (CHANGELOG.md)"
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
