"""The shared option groups (`LMOptions`, `RetrievalOptions`, `WindowOptions`) on the command line and in
YAML: the leaves and the ``--lm`` shorthand keep the former spellings working, the input-length cap is one
rule, and `command_line` renders a typed call that parses back to itself."""

from __future__ import annotations

import pytest

from ralm.cli.command_args import parse, parser_for
from ralm.cli.command_render import command_line
from ralm.errors import RalmInputError
from ralm.lm.options import PAPER_INPUT_LENGTH, LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions


def stage(
    output: str,
    lm: LMOptions = LMOptions(),  # noqa: B008 - a default instance is the schema
    retrieval: RetrievalOptions = RetrievalOptions(),  # noqa: B008
    window: WindowOptions = WindowOptions(),  # noqa: B008
    exclude: list[str] | None = None,
    quick: bool = False,
) -> None:
    """A stage taking the shared groups."""


@pytest.fixture
def parser():
    return parser_for(stage, renamed={"window.max_length": "lm.max_length"})


def test_leaves_and_the_lm_shorthand_fill_the_groups(parser):
    _, init = parse(
        parser, ["--output", "o", "--lm", "gpt2", "--max-length", "512", "--k", "4", "--dtype=bf16"]
    )
    assert init.lm == LMOptions(model="gpt2", dtype="bf16", max_length=512)
    assert init.retrieval == RetrievalOptions(k=4)
    _, init = parse(parser, ["--output", "o", "--lm=x.gguf", "--gguf-file", "f.gguf", "--stride", "8"])
    assert init.lm == LMOptions(model="x.gguf", gguf_file="f.gguf") and init.window == WindowOptions(stride=8)


def test_yaml_may_write_leaves_and_the_shorthand_at_the_top(parser, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("output: o\nlm: gpt2\nindex: idx\nk: 4\nmax_length: 300\nwindow:\n  stride: 2\n")
    _, init = parse(parser, ["--config", str(config), "--dtype", "fp32"])
    assert init.lm == LMOptions(model="gpt2", dtype="fp32", max_length=300)
    assert init.retrieval == RetrievalOptions(index="idx", k=4)
    assert init.window == WindowOptions(stride=2)
    nested = tmp_path / "n.yaml"
    nested.write_text("output: o\nlm:\n  model: gpt2\n  max_length: 256\n")
    _, init = parse(parser, ["--config", str(nested), "--lm", "other"])  # the command line wins
    assert init.lm == LMOptions(model="other", max_length=256)


def test_a_former_group_key_is_refused_naming_the_new_one(parser, tmp_path):
    with pytest.raises(RalmInputError, match="--window.max-length: renamed --lm.max-length"):
        parse(parser, ["--output", "o", "--window.max_length", "512"])
    config = tmp_path / "old.yaml"
    config.write_text("output: o\nwindow:\n  max_length: 512\n")
    with pytest.raises(RalmInputError, match="key 'window.max_length' was renamed 'lm.max_length'"):
        parse(parser, ["--config", str(config)])


def test_the_input_length_is_the_papers_within_the_lms_context():
    assert LMOptions().input_length(2048) == PAPER_INPUT_LENGTH == 1024
    assert LMOptions().input_length(512) == 512  # GPT-2-size contexts and smaller: the LM's own
    assert LMOptions(max_length=300).input_length(2048) == 300
    assert LMOptions(max_length=4096).input_length(2048) == 2048


def test_missing_lm_and_index_fail_naming_the_option():
    with pytest.raises(RalmInputError, match="^--lm: required"):
        LMOptions().require()
    with pytest.raises(RalmInputError, match="^--index: required unless --no-retrieval"):
        RetrievalOptions().require("unless --no-retrieval")
    with pytest.raises(RalmInputError, match=r"^--k \(RetrievalOptions.k\): must be > 0, got 0$"):
        RetrievalOptions(k=0)


def test_command_line_renders_a_typed_call_that_parses_back(parser):
    arguments = {
        "output": "runs/x",
        "lm": LMOptions(model="my lm", dtype="bf16", max_length=400),
        "retrieval": RetrievalOptions(index="idx", passages="p.jsonl", k=3, threads=2),
        "window": WindowOptions(stride=16, query_tokens=16, max_passage_tokens=64),
        "exclude": ["a b", "re:held-.*"],
        "quick": True,
    }
    argv = command_line(stage, arguments, parser.ralm_option_names)
    # The shorthand and the leaves a user types; defaults left out.
    assert (
        argv[:4] == ["--output", "runs/x", "--lm", "my lm"] and "--dtype" in argv and "--device" not in argv
    )
    _, init = parse(parser, argv)
    assert {name: getattr(init, name) for name in arguments} == arguments


def test_command_line_refuses_an_argument_the_function_lacks(parser):
    with pytest.raises(TypeError, match=r"stage\(\) has no parameter candidates"):
        command_line(stage, {"output": "o", "candidates": 3}, parser.ralm_option_names)


def test_every_stage_refuses_a_window_by_the_one_fit_rule():
    """data-gen, eval and a reranking LM's check all answer with `window_fits`: a passage and the other
    parts of a window fit exactly when their sum is at most the input length."""
    from ralm.data_gen.inputs import check_input_fits
    from ralm.eval.ppl.ppl_command import _check_lengths
    from ralm.lm.options import window_fits

    assert window_fits(64, 32, 16, 16) and not window_fits(63, 32, 16, 16)
    assert window_fits(4, 0, 4) and not window_fits(3, 0, 4)  # no passage: the targets alone
    window = WindowOptions(stride=16, query_tokens=16, max_passage_tokens=32)
    check_input_fits(64, window)  # passage + query + targets = 64
    with pytest.raises(RalmInputError, match=r"--max-length: the LM holds 63 tokens, less than .* = 64"):
        check_input_fits(63, window)
    _check_lengths(48, 16, 32, retrieval=True, rank_tokens=0)  # passage + targets = 48
    with pytest.raises(RalmInputError, match="--max-length 47: too small to hold a 32-token passage"):
        _check_lengths(47, 16, 32, retrieval=True, rank_tokens=0)
    with pytest.raises(RalmInputError, match="and 8 ranking tokens"):
        _check_lengths(48, 16, 32, retrieval=True, rank_tokens=8)
    _check_lengths(16, 16, 32, retrieval=False, rank_tokens=0)  # no retrieval: the targets alone
    with pytest.raises(RalmInputError, match="--stride 17: larger than --max-length 16"):
        _check_lengths(16, 17, 0, retrieval=False, rank_tokens=0)
