"""The `ralm` entry point lists every command, and every command answers --help."""

import subprocess
import sys

import pytest

from ralm.cli import COMMANDS


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


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_help_and_config(name):
    out = _ralm(*name.split(), "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--config" in out.stdout


def test_options_accept_hyphens_leaf_names_and_bare_switches():
    from dataclasses import dataclass

    from ralm.command_args import normalize_argv, parser_for

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
