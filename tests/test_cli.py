"""The `ralm` entry point lists every command, and every command answers --help."""

import re
import subprocess
import sys

import pytest

from ralm.cli.main import COMMANDS


def _ralm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ralm", *args], capture_output=True, text=True, timeout=120)


def test_top_level_help_lists_every_command():
    out = _ralm("--help")
    assert out.returncode == 0
    for name, (_, description) in COMMANDS.items():
        assert name in out.stdout and description in out.stdout


def test_unknown_command_is_an_error():
    out = _ralm("no-such-command")
    assert out.returncode == 2 and "commands:" in out.stderr


def test_a_two_word_command_answers_help_through_the_console_script():
    out = _ralm("eval", "ppl", "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage: ralm eval ppl" in out.stdout and "--config" in out.stdout


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_help_and_config(name, capsys):
    # In process: one fresh interpreter per command would cost the fast tier ~45 s of imports.
    from ralm.cli.main import load_command

    with pytest.raises(SystemExit) as stop:
        load_command(name).main(["--help"])
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    assert f"usage: ralm {name}" in help_text and "--config" in help_text


def test_options_accept_hyphens_leaf_names_and_bare_switches():
    from dataclasses import dataclass

    from ralm.cli.command_args import normalize_argv, parser_for

    @dataclass
    class Window:
        stride: int = 4
        keep: bool = False

    def run(window: Window = Window(), max_length: int = 1024, quick: bool = False):  # noqa: B008
        """Test command."""

    parser = parser_for(run)
    argv = normalize_argv(parser, ["--quick", "--max-length", "8", "--stride=2", "--keep"])
    assert argv == ["--quick", "true", "--max_length", "8", "--window.stride=2", "--window.keep", "true"]
    cfg = parser.parse_args(argv)
    assert (cfg.quick, cfg.max_length, cfg.window.stride, cfg.window.keep) == (True, 8, 2, True)


# Each name has one meaning across commands (CHANGELOG.md): the output folder or file is --output; the
# retrieval stride s (tokens between retrievals, the targets' length) is --stride; passages are split by
# --passage-words and --passage-stride; BM25 candidates per query are --k; the reranker is --reranker.
FORMER_NAMES = {"out", "out_dir", "run_dir", "index_dir", "jsonl_out", "rerank", "words"}
RETRIEVAL_STRIDE_KEYS = {"window.stride", "sampling.stride", "scale.stride"}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_one_meaning_per_option_name(name):
    from ralm.cli.main import load_command

    keys = load_command(name).build_parser().ralm_option_names.keys
    leaves = {key.rsplit(".", 1)[-1]: key for key in keys}
    assert not FORMER_NAMES & set(leaves), f"ralm {name}: former names {FORMER_NAMES & set(leaves)}"
    assert {k for k in keys if k.rsplit(".", 1)[-1] == "stride"} <= RETRIEVAL_STRIDE_KEYS
    assert "candidates" not in keys or name == "data-gen"  # data-gen's group of candidate settings (k, ...)
    writes = {"output"} & keys
    assert writes, f"ralm {name} has no --output"


@pytest.mark.parametrize(
    ("name", "former", "new"),
    [
        ("passages", "--words", "--passage-words"),
        ("index", "--index-dir", "--output"),
        ("retrieve", "--out", "--output"),
        ("prepare wikitext103", "--out", "--output"),
        ("run", "--run-dir", "--output"),
    ],
)
def test_a_former_option_name_is_refused_with_its_new_name(name, former, new, capsys):
    from ralm.cli.main import load_command

    with pytest.raises(SystemExit) as stop:
        load_command(name).main([former, "x"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {former}: renamed {new} (CHANGELOG.md)"


def test_a_config_file_with_a_former_key_is_refused_naming_file_key_and_new_name(tmp_path, capsys):
    from ralm.retrieval import passages_command

    config = tmp_path / "old.yaml"
    config.write_text("input: docs.jsonl\nout: passages.jsonl\n")
    with pytest.raises(SystemExit):
        passages_command.main(["--config", str(config)])
    assert (
        capsys.readouterr().err.strip() == f"error: {config}: key 'out' was renamed 'output' (CHANGELOG.md)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.yaml"]


def test_a_nested_former_key_in_a_config_file_is_refused_with_its_new_name(tmp_path, capsys):
    from ralm.train import train_command

    config = tmp_path / "old.yaml"
    config.write_text("data: d\noutput: o\noptim:\n  accumulate: 2\n")
    with pytest.raises(SystemExit):
        train_command.main(["--config", str(config)])
    expected = (
        f"error: {config}: key 'optim.accumulate' was renamed 'trainer.accumulate_grad_batches' "
        "(CHANGELOG.md)"
    )
    assert capsys.readouterr().err.strip() == expected


def test_the_cli_the_api_and_the_pipeline_read_one_command_table():
    """Each command is written once, in ralm.cli.commands: the CLI dispatches to its module, the Python API
    exports its function, the pipeline calls it; no other module spells a command module's path."""
    from pathlib import Path

    import ralm
    from ralm.cli import commands
    from ralm.cli.main import load_command, resolve
    from ralm.pipeline.stages import STAGE_FUNCTIONS, stage_function

    assert COMMANDS == {c.name: (c.module, c.description) for c in commands.COMMANDS}
    for command in commands.COMMANDS:
        assert resolve([*command.words, "--x"]) == (command.name, ["--x"])
        assert load_command(command.name) is command.load_module()
        if command.api:
            assert getattr(ralm, command.api) is command.load_function()
    assert set(STAGE_FUNCTIONS) == set(commands.PIPELINE_STAGES)
    for words in commands.PIPELINE_STAGES:
        assert stage_function(words) is commands.command(words).load_function()
    assert {name: ralm._API[name] for name in commands.API_ONLY} == commands.API_ONLY
    package = Path(ralm.__file__).parent
    for reader in (
        "cli/main.py",
        "__init__.py",
        "pipeline/stages.py",
        "pipeline/plan.py",
        "pipeline/runner.py",
    ):
        source = (package / reader).read_text()
        assert not [c.module for c in commands.COMMANDS if c.module in source], reader


_SHOWN = re.compile(r"(?<![\w-])--[A-Za-z](?:[\w.-]*\w)?")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_shows_every_option_once_in_its_one_spelling(name):
    """--help shows the spelling users type and the README uses (``--eval-text``, ``--index`` for
    ``--retrieval.index``, ``--lm`` for ``--lm.model``), the one commands.sh writes; never a group's own
    "Path to a configuration file" loader."""
    from ralm.cli.main import load_command

    parser = load_command(name).build_parser()
    names, text = parser.ralm_option_names, parser.format_help()
    shown = set(_SHOWN.findall(text))
    assert not {option for option in shown if "_" in option}, text
    for option in shown:
        key = names.key_of(option[2:])
        assert key is None or option == names.spelling(key), option
    groups = {key.partition(".")[0] for key in names.keys if "." in key}
    assert {names.spelling(key) for key in names.keys - groups} <= shown
    assert "Path to a configuration file" not in text


def test_lm_is_described_as_the_lm_it_takes():
    from ralm.eval.ppl.ppl_command import build_parser

    text = " ".join(build_parser().format_help().split())
    assert "--lm MODEL Hugging Face id, model folder, or .gguf file of the frozen LM." in text
    assert "short for" not in text  # "--lm is short for --lm.model" once both were shown


def test_the_former_spellings_still_parse():
    from ralm.cli.command_args import parse
    from ralm.eval.ppl.ppl_command import build_parser

    argv = ["--text", "t", "--output", "o", "--text_field", "body", "--retrieval.index", "idx"]
    cfg, _ = parse(build_parser(), [*argv, "--window.query_tokens", "8", "--lm.model", "gpt2"])
    assert (cfg.text_field, cfg.retrieval.index, cfg.window.query_tokens, cfg.lm.model) == (
        "body",
        "idx",
        8,
        "gpt2",
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--corpus", "c"], "error: the following arguments are required: --eval-text"),
        (["--corpus", "c", "--eval-text", "e", "--query_tokens", "x"], "error: --query-tokens:"),
        (
            ["--corpus", "c", "--eval-text", "e", "--eval-txt", "e"],
            "error: unrecognized arguments: --eval-txt e",
        ),
        (["--corpus", "c", "--eval-text", "e", "--eval"], "error: unrecognized arguments: --eval"),
    ],
    ids=["required", "bad-value", "unknown-as-written", "no-abbreviation"],
)
def test_errors_name_options_in_their_one_spelling(argv, error, capsys):
    from ralm.pipeline import run_command

    with pytest.raises(SystemExit) as stop:
        run_command.main(argv)
    assert stop.value.code == 2
    assert error in capsys.readouterr().err
