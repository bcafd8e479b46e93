"""Run the demo's stages as the user would type them, record their times, and skip finished ones.

Each stage is a `ralm` command line run in this process through the command's own `main(argv)`, so the
demo is a thin script over the stages and `commands.sh` in the run folder reproduces every step exactly
(through the interpreter that ran the demo, `.../python -m ralm`, so it works where the venv is not
active). A stage's output folder name carries a short hash of its command line: the same settings find
(and reuse, or resume) the same folder, other settings get a fresh one, and a half-finished output is
never mistaken for a finished one because each stage is only marked done after its command returns.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ralm.atomic_files import write_json_atomic, write_text_atomic
from ralm.errors import RalmInputError
from ralm.fingerprints import fingerprint

RALM = f"{shlex.quote(sys.executable)} -m ralm"
"""How ``commands.sh`` calls ralm: this interpreter, so the script runs outside the venv too (a bare
``ralm`` is on PATH only while the venv is active)."""


def short_hash(parts: list[str]) -> str:
    """A stage folder's name suffix: 8 digits of the fingerprint of its inputs and options. Only a name:
    whether a stage is done is decided by the whole command line recorded in ``stages.json``."""
    return fingerprint(parts)[:8]


@dataclass
class Stage:
    key: str
    """Name in the report ("index", "data-gen", "train", "eval bm25", ...)."""
    command: list[str]
    """Command words and options, without the leading `ralm` ("eval", "ppl", "--text", ...)."""
    output: Path
    """The folder or file whose existence (with the done mark) means the stage is complete."""
    resume_options: list[str] = field(default_factory=list)
    """Options added only when a killed run left partial work (`--ckpt-path last`); not part of the key."""


class StageRunner:
    """Runs stages in order, writing ``commands.sh`` and ``stages.json`` (status and seconds per stage)."""

    def __init__(self, run_dir: Path, dispatch: Callable[[list[str]], None] | None = None) -> None:
        self.run_dir = run_dir
        self.state_path = run_dir / "stages.json"
        self.state: dict = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        self.commands: list[str] = []
        self._dispatch = dispatch or _run_in_process

    def is_done(self, stage: Stage) -> bool:
        entry = self.state.get(stage.key)
        return bool(entry and entry.get("command") == stage.command and stage.output.exists())

    def run(self, stage: Stage) -> float:
        """Run `stage` unless done; returns its seconds (this run's, or the recorded ones when reused)."""
        self.commands.append(f"{RALM} {shlex.join(stage.command)}")
        self._write_commands()
        if self.is_done(stage):
            seconds = float(self.state[stage.key]["seconds"])
            print(f"[demo] {stage.key}: done earlier ({seconds:.0f} s), reusing {stage.output}", flush=True)
            self.state[stage.key]["reused"] = True
            write_json_atomic(self.state_path, self.state, indent=1)
            return seconds
        argv = stage.command + (stage.resume_options if stage.output.exists() else [])
        before = self.state.get(stage.key)
        if before and before.get("command") != stage.command:
            # Output folders are keyed by the inputs' contents and the settings: a new folder means one changed.
            print(
                f"[demo] {stage.key}: its inputs or settings changed since the last run; running it again",
                flush=True,
            )
        print(f"[demo] {stage.key}: {'ralm ' + shlex.join(argv)}", flush=True)
        started = time.perf_counter()
        self._dispatch(argv)
        seconds = time.perf_counter() - started
        self.state[stage.key] = {"command": stage.command, "seconds": seconds, "reused": False}
        write_json_atomic(self.state_path, self.state, indent=1)
        return seconds

    def _write_commands(self) -> None:
        header = [
            "#!/usr/bin/env bash",
            "# The exact stage commands of this demo run; each skips or resumes work that is already done.",
            "set -euo pipefail",
            f"cd {shlex.quote(os.getcwd())}",
        ]
        write_text_atomic(self.run_dir / "commands.sh", "\n".join(header + self.commands) + "\n")


def _run_in_process(argv: list[str]) -> None:
    """`ralm ARGV` through the CLI's own dispatcher; a failing stage stops the demo with its message."""
    from ralm.cli import load_command, resolve

    name, rest = resolve(list(argv))
    try:
        load_command(name).main(rest)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            raise RalmInputError(
                f"stage `ralm {name}` failed (exit {exit_.code}); its message is above"
            ) from None
    sys.stdout.flush()
