"""The README's and docs/*.md's command lines are ones ralm accepts.

Every ``ralm ...`` line of a fenced code block (also ``.venv/bin/ralm``, ``python -m ralm``, ``torchrun ...
-m ralm``; ``\\`` continuations joined, ``#`` comments dropped) is parsed by its command's real parser, as
`ralm.cli.command_args.call_with_args` parses before it calls the stage: option names, values' types, required
options, a config file's keys. No stage runs. A placeholder (``MODEL``, ``PATH``, ``<dir>``) is an ordinary
string, which every path option takes; ``...`` in a line stands for the options of the block's previous line
of the same command (``ralm eval flare ... --sweep ...``), or, with none, for options not shown: then only
the required options may be missing (the options shown are still checked). Each ``pip install '.[extras]'``
names extras that pyproject.toml defines.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^\s*(```|~~~)\s*(\S*)")
_PROSE_BLOCKS = {"python", "py", "pycon", "json", "yaml", "toml", "text"}


@dataclass(frozen=True)
class DocLine:
    where: str
    """``README.md:393``: the file and the line the command starts on."""
    text: str
    """The command as written, continuations joined."""
    elides: bool = False
    """Its ``...`` stands for options no earlier line shows: required ones may be among them."""


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def code_lines(path: Path) -> list[DocLine]:
    """The shell lines of `path`'s fenced code blocks (not Python, YAML, ... blocks), continuations joined."""
    lines, fence, language, pending, start = [], None, "", "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        opened = _FENCE.match(line)
        if opened and (fence is None or opened[1] == fence):
            fence, language = (opened[1], opened[2].lower()) if fence is None else (None, "")
            continue
        if fence is None or language in _PROSE_BLOCKS:
            continue
        start = start or number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(DocLine(f"{shown(path)}:{start}", pending + line.strip()))
        pending, start = "", 0
    return lines


def words(line: str) -> list[str]:
    """The line's shell words, its comment dropped (an unparseable line is no command: [])."""
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return []


def ralm_argv(tokens: list[str]) -> list[str] | None:
    """What follows ``ralm`` (or ``.venv/bin/ralm``, ``-m ralm``) in a command's words, or None."""
    for i, token in enumerate(tokens):
        if token.rpartition("/")[2] == "ralm" and (
            i == 0 or "=" in tokens[i - 1] or tokens[i - 1] in ("time", "$")
        ):
            return tokens[i + 1 :]
        if token == "-m" and tokens[i + 1 : i + 2] == ["ralm"]:
            return tokens[i + 2 :]
    return None


def ralm_commands(path: Path) -> list[tuple[DocLine, list[str]]]:
    """Each ralm command of `path` with its argv, ``...`` replaced by the options of the previous line of
    the same command (empty when there is none, so the line is checked as written without them)."""
    found, previous = [], {}
    for line in code_lines(path):
        argv = ralm_argv(words(line.text))
        if argv is None:
            continue
        head = [w for w in argv[:2] if not w.startswith("-") and w != "..."]
        if "..." in argv:
            before, i = previous.get(tuple(head)), argv.index("...")
            shown = [word for word in argv[i + 1 :] if word != "..."]
            argv = argv[:i] + (before or head)[len(head) :] + shown
            line = replace(line, elides=before is None)
        previous[tuple(head)] = argv
        found.append((line, argv))
    return found


def parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str | None:
    """None when ralm's parser for `argv`'s command accepts it (help included), else its error."""
    from ralm.cli.command_args import parse
    from ralm.cli.main import load_command, resolve
    from ralm.errors import RalmInputError

    try:
        name, rest = resolve(argv)
        module = load_command(name)
        if name == "data-gen" and rest[:1] == ["merge"]:  # data-gen's own subcommand
            parser, rest = module.build_merge_parser(), rest[1:]
        else:
            parser = module.build_parser()
        parse(parser, rest)  # what call_with_args does before it calls the stage
    except SystemExit as stop:
        out = capsys.readouterr()
        return None if stop.code == 0 else (out.err.strip().splitlines() or [f"exit {stop.code}"])[-1]
    except RalmInputError as err:
        return f"error: {err}"
    return None


def documented_error(line: DocLine, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str | None:
    """`parse_error`, except that a line whose ``...`` stands for unshown options may leave out required
    ones."""
    error = parse_error(argv, capsys)
    if line.elides and error and error.startswith("error: the following arguments are required"):
        return None  # they are among the options its "..." stands for
    return error


COMMANDS = [item for path in DOCS for item in ralm_commands(path)]


def test_the_docs_show_ralm_commands():
    # The extraction itself: the README's Usage block alone has a dozen; none found means it broke.
    assert len(COMMANDS) >= 12, [line.where for line, _ in COMMANDS]


@pytest.mark.parametrize(("line", "argv"), COMMANDS, ids=[line.where for line, _ in COMMANDS])
def test_a_documented_command_parses(line: DocLine, argv: list[str], monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # config files are named from the repository root
    error = documented_error(line, argv, capsys)
    assert error is None, f"{line.where}: {line.text}\n  {error}"


@pytest.mark.parametrize(
    "text",
    [
        "ralm passages --input docs.jsonl --output p.jsonl --exclude-fil held_out.txt",
        "ralm eval ppl --text t.txt --lm MODEL --index idx/ --window.strides 8 --output runs/ppl",
        "ralm retrieve --index idx/ --queries q.tsv --k many --output run.trec",
        "ralm run --corpus docs.jsonl --output runs/mine",
        "ralm eval qa --data q.jsonl --lm MODEL --index idx/ --doc 2 --output runs/qa",
        "ralm eval ppl --sweep max_length=512,1024 --kk 4 ...",
    ],
    ids=["misspelled", "misspelled-group-field", "bad-value", "missing-required", "abbreviated", "elided"],
)
def test_the_check_refuses_a_line_ralm_refuses(text, tmp_path, monkeypatch, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"```bash\n{text}\n```\n")
    monkeypatch.chdir(tmp_path)
    [(line, argv)] = ralm_commands(doc)
    assert documented_error(line, argv, capsys) is not None


def test_an_elision_with_no_earlier_line_may_leave_out_the_required_options(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text("```\nralm eval ppl --sweep max_length=512,1024 --k 4 ...\n```\n")
    [(line, argv)] = ralm_commands(doc)
    assert line.elides and parse_error(argv, capsys) is not None
    assert documented_error(line, argv, capsys) is None


def test_continuations_comments_and_elisions_are_read_as_the_shell_and_the_reader_do(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```bash\n"
        ".venv/bin/ralm eval flare --data dev.json --lm MODEL \\\n    --index idx/  # a comment\n"
        "ralm eval flare ... --output runs/theta\n"
        "```\n```python\nralm --not-a-command\n```\n"
    )
    (first, argv), (second, elided) = ralm_commands(doc)
    assert first.text.startswith(".venv/bin/ralm eval flare") and second.where.endswith(":4")
    assert argv == ["eval", "flare", "--data", "dev.json", "--lm", "MODEL", "--index", "idx/"]
    assert elided == [*argv, "--output", "runs/theta"]


_EXTRAS = re.compile(r"\.\[([^\]]*)\]")


def pip_extras() -> list[tuple[str, str]]:
    """(where, extra) for each extra a ``pip install`` of the docs names: in code blocks (comments too,
    which offer alternatives) and in inline code."""
    found = []
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for command in re.findall(r"pip install[^`\n]*", line):
                for extras in _EXTRAS.findall(command):
                    found += [(f"{shown(path)}:{number}", e.strip()) for e in extras.split(",")]
    return [(where, extra) for where, extra in found if extra not in ("", "...")]


@pytest.mark.parametrize(("where", "extra"), pip_extras(), ids=[f"{w}-{e}" for w, e in pip_extras()])
def test_a_documented_pip_extra_exists(where, extra):
    defined = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extra in defined, f"{where}: extra {extra!r} is not in pyproject.toml ({', '.join(defined)})"
