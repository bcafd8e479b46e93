"""Validation lives in the types: one annotation gives --help its type, checks the command line and YAML,
and checks a group built in Python, each time naming the option and the bad value."""

from __future__ import annotations

import pytest

from ralm.cli.command_args import call_with_args, normalize_argv
from ralm.data_gen.options import SamplingOptions, ShardingOptions
from ralm.errors import RalmInputError
from ralm.eval.ppl.ppl_command import BatchOptions, RerankingOptions
from ralm.eval.qa.flare_options import FlareOptions
from ralm.lm.options import LMOptions, WindowOptions
from ralm.pipeline.scale import ScaleOptions
from ralm.retrieval.options import RetrievalOptions


def _parser(command: str):
    from ralm.cli.main import load_command

    return load_command(command).build_parser()


REQUIRED = {
    "eval ppl": ["--text", "t.txt", "--lm", "gpt2", "--output", "out"],
    "data-gen": ["--documents", "d.jsonl", "--index", "idx", "--lm", "gpt2", "--output", "out"],
    "eval flare": ["--data", "q.jsonl", "--output", "out", "--lm", "gpt2"],
    "eval qa": ["--data", "q.jsonl", "--output", "out", "--lm", "gpt2"],
    "demo": [],
}

# (command, option, bad value, the Python group and field that refuse the same value)
BAD = [
    ("eval ppl", "--stride", "0", WindowOptions, "stride"),
    ("eval ppl", "--max-length", "1", LMOptions, "max_length"),
    ("eval ppl", "--k", "0", RetrievalOptions, "k"),
    ("eval ppl", "--threads", "0", RetrievalOptions, "threads"),
    ("eval ppl", "--rank-tokens", "-2", RerankingOptions, "rank_tokens"),
    ("eval ppl", "--batch-size", "0", BatchOptions, "batch_size"),
    ("eval ppl", "--max-batch-tokens", "0", BatchOptions, "max_batch_tokens"),
    ("data-gen", "--num-prefixes", "0", SamplingOptions, "num_prefixes"),
    ("data-gen", "--min-prefix-tokens", "-1", SamplingOptions, "min_prefix_tokens"),
    ("data-gen", "--k", "0", RetrievalOptions, "k"),
    ("data-gen", "--threads", "0", RetrievalOptions, "threads"),
    ("data-gen", "--stride", "0", WindowOptions, "stride"),
    ("data-gen", "--max-length", "1", LMOptions, "max_length"),
    ("data-gen", "--max-passage-tokens", "-1", WindowOptions, "max_passage_tokens"),
    ("data-gen", "--prefixes-per-shard", "0", ShardingOptions, "prefixes_per_shard"),
    ("data-gen", "--shard-id", "-1", ShardingOptions, "shard_id"),
    ("eval flare", "--theta", "1.5", FlareOptions, "theta"),
    ("eval flare", "--lookahead-tokens", "0", FlareOptions, "lookahead_tokens"),
    ("eval flare", "--k", "0", RetrievalOptions, "k"),
    ("eval qa", "--max-length", "1", LMOptions, "max_length"),
    ("eval qa", "--threads", "0", RetrievalOptions, "threads"),
    ("demo", "--scale.k", "0", ScaleOptions, "k"),
    ("demo", "--scale.val-fraction", "1.0", ScaleOptions, "val_fraction"),
]


@pytest.mark.parametrize(("command", "option", "value", "group", "field"), BAD, ids=lambda x: str(x))
def test_a_bad_value_fails_on_the_command_line_and_in_python(command, option, value, group, field):
    parser = _parser(command)
    with pytest.raises(RalmInputError) as cli_error:
        parser.parse_args(normalize_argv(parser, [*REQUIRED[command], option, value]))
    leaf = option.rpartition(".")[2] if option.startswith("--scale.") else option
    assert str(cli_error.value).startswith(f"{'--' + leaf.lstrip('-')}: must be ")
    assert str(cli_error.value).endswith(f"got {value}")
    with pytest.raises(RalmInputError) as python_error:
        group(**{field: float(value) if "." in value else int(value)})
    assert str(python_error.value).startswith(
        f"--{field.replace('_', '-')} ({group.__name__}.{field}): must be "
    )
    assert str(python_error.value).endswith(f"got {value}")
    # The same rule in the same words, whichever way the value came.
    assert str(cli_error.value).split(": ", 1)[1] == str(python_error.value).split(": ", 1)[1]


def test_a_bad_value_in_a_yaml_file_is_refused_too(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("window:\n  stride: 0\n")
    parser = _parser("eval ppl")
    with pytest.raises(RalmInputError, match=r"^--stride: must be > 0, got 0$"):
        parser.parse_args(normalize_argv(parser, [*REQUIRED["eval ppl"], "--config", str(config)]))


def test_the_command_prints_one_error_line_and_exits_2(capsys):
    from ralm.eval.ppl.ppl_command import eval_ppl

    with pytest.raises(SystemExit) as exit_info:
        call_with_args(eval_ppl, _parser("eval ppl"), [*REQUIRED["eval ppl"], "--bootstrap-resamples", "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --bootstrap-resamples: must be > 0, got 0"
    ]


def test_cross_field_rules_of_a_group():
    with pytest.raises(RalmInputError, match="--rerank-lm: only used with --reranker zero-shot"):
        RerankingOptions(reranker="oracle", rerank_lm="distilgpt2")
    RerankingOptions(reranker="zero-shot", rerank_lm="distilgpt2")
    assert BatchOptions(batch_size=None).batch_size is None  # None: the default, not a value to check


def test_top_level_numbers_are_checked_for_python_callers_before_any_work(tmp_path):
    from ralm.eval.ppl.ppl_command import eval_ppl
    from ralm.eval.qa.flare_command import eval_flare
    from ralm.eval.qa.qa_command import eval_qa

    out = tmp_path / "out"
    groups = {"lm": LMOptions("/no/such/lm"), "output": str(out)}
    with pytest.raises(RalmInputError, match=r"^--bootstrap-resamples: must be > 0, got 0$"):
        eval_ppl(text="t.txt", bootstrap_resamples=0, **groups)
    with pytest.raises(RalmInputError, match=r"^--max-tokens: must be >= 2, got 1$"):
        eval_ppl(text="t.txt", max_tokens=1, **groups)
    with pytest.raises(RalmInputError, match=r"^--docs: must be >= 0, got -1$"):
        eval_qa(data="q.jsonl", docs=-1, **groups)
    with pytest.raises(RalmInputError, match=r"^--batch-size: must be > 0, got 0$"):
        eval_flare(data="q.jsonl", batch_size=0, **groups)
    with pytest.raises(RalmInputError, match=r"^--k \(RetrievalOptions.k\): must be > 0, got 0$"):
        RetrievalOptions(k=0)  # a group checks its own fields when it is built
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("eval ppl", ["--stride STRIDE", "type: PositiveInt", "type: AtLeastTwoInt | null"]),
        ("data-gen", ["type: PositiveInt", "type: NonNegativeInt"]),
        ("eval flare", ["type: ClosedUnitInterval", "type: PositiveInt"]),
        ("demo", ["type: OpenUnitInterval | null", "type: PositiveFloat | null"]),
    ],
)
def test_help_shows_the_constrained_types(command, shown):
    text = " ".join(_parser(command).format_help().split())  # help wraps its lines
    for part in shown:
        assert part in text, part


@pytest.mark.parametrize("command", ["eval flare", "eval qa"])
@pytest.mark.parametrize(("old", "new"), [("--rerank", "--reranker"), ("--candidates", "--k")])
def test_renamed_options_answer_with_their_new_name(command, old, new, capsys):
    from ralm.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main([*command.split(), *REQUIRED[command], old, "4"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {old}: renamed {new} (CHANGELOG.md)"]
    parser = _parser(command)
    cfg = parser.parse_args(normalize_argv(parser, [*REQUIRED[command], new, "4"]))
    name = new.lstrip("-")
    assert cfg[parser.ralm_option_names.leaves.get(name, name)] in ("4", 4)  # --k: the retrieval group's k


def test_data_gen_records_each_setting_once_under_its_documented_name():
    from ralm.data_gen.metadata import run_config
    from ralm.data_gen.options import GenerationSettings

    settings = GenerationSettings(
        stride=4,
        query_tokens=16,
        k=3,
        min_prefix_tokens=32,
        input_length=64,
        max_passage_tokens=16,
        seed=1,
        num_prefixes=8,
        rank_tokens=8,
        num_examples=6,
        num_shards=2,
        exclude_same_doc=True,
        num_passages=100,
        retrieval_threads=2,
    )
    index_meta = {"format": "ralm-index/1", "backend": "bm25s", "num_passages": 100, "passages_sha256": "ab"}
    config = run_config(
        lm="gpt2",
        tokenizer="gpt2",
        dtype="float32",
        documents_sha256="d",
        index_meta=index_meta,
        **settings.recorded(),
    )
    # The fingerprinted keys (a resume compares them; rank_tokens since format /2): the index size and
    # threads are not.
    assert list(config) == [
        "lm",
        "tokenizer",
        "dtype",
        "documents_sha256",
        "index_hash",
        "s",
        "l",
        "k",
        "min_prefix_tokens",
        "max_length",
        "max_passage_tokens",
        "seed",
        "num_prefixes",
        "rank_tokens",
        "num_examples",
        "num_shards",
        "exclude_same_doc",
    ]
    assert (config["s"], config["l"], config["k"], config["exclude_same_doc"]) == (4, 16, 3, True)
