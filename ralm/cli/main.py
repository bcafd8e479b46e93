"""The `ralm` console script: one entry point that dispatches to each stage's command module.

The commands are the rows of the one command table, ``ralm.cli.commands``. Each command module exposes
``build_parser() -> jsonargparse.ArgumentParser`` and ``main(argv)``.
Modules are imported only when their command runs, so ``ralm --help`` is instant and a missing
optional dependency of one stage never breaks another.
"""

from __future__ import annotations

import os
import sys

from ralm.cli.commands import COMMANDS as TABLE
from ralm.cli.commands import command
from ralm.progress import is_terminal

COMMANDS: dict[str, tuple[str, str]] = {c.name: (c.module, c.description) for c in TABLE}
"""Command words ("eval ppl") -> (module, one-line description), read off the one table
(``ralm.cli.commands``). Two-word commands are nested."""


def _usage() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = ["usage: ralm COMMAND [--config FILE.yaml] [--option value ...]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {desc}" for name, (_, desc) in COMMANDS.items()]
    lines += ["", "`ralm COMMAND --help` lists a command's options; `--print-config` shows its YAML."]
    return "\n".join(lines)


def resolve(argv: list[str]) -> tuple[str, list[str]]:
    """Split argv into (command name, remaining args); raises SystemExit with usage if unknown."""
    if len(argv) >= 2 and f"{argv[0]} {argv[1]}" in COMMANDS:
        return f"{argv[0]} {argv[1]}", argv[2:]
    if argv and argv[0] in COMMANDS:
        return argv[0], argv[1:]
    if argv and argv[0] in ("eval", "prepare"):
        subs = [c.split()[1] for c in COMMANDS if c.startswith(f"{argv[0]} ")]
        print(f"usage: ralm {argv[0]} {{{','.join(subs)}}} ...", file=sys.stderr)
        raise SystemExit(2)
    print(_usage(), file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
    raise SystemExit(0 if argv and argv[0] in ("-h", "--help") else 2)


def load_command(name: str):
    """The command module for `name` (e.g. "eval ppl")."""
    return command(name).load_module()


def quiet_library_bars_in_logs() -> None:
    """Piped to a file, the libraries' own tqdm bars (datasets saving, hub downloads) become carriage-return
    fragments; ralm's stages report in whole lines there (``ralm.progress``). Set before they are imported."""
    if not is_terminal():
        for variable in ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
            os.environ.setdefault(variable, "1")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_library_bars_in_logs()
    name, rest = resolve(argv)
    load_command(name).main(rest)


if __name__ == "__main__":
    main()
