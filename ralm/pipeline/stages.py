"""Run a pipeline's stages, record their times, and skip finished ones.

A stage is a `StagePlan`: the stage's command words and its function's typed arguments (the stage's own
option groups, `LMOptions`, `RetrievalOptions`, ...), called through its Python API in this process. Its
command line is rendered from those objects (``ralm.command_args.command_line``) for ``commands.sh`` (through
the interpreter that ran the pipeline, `.../python -m ralm`, so it works where the venv is not active) and
as the stage's identity; a test parses every rendered line back to the same objects, so a renamed option
fails there, never mid-run. A stage's output folder name carries a short hash of its command line: the same
settings find (and reuse, or resume) the same folder, other settings get a fresh one, and a half-finished
output is never mistaken for a finished one because a stage is only marked done after its call returns.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralm.atomic_files import write_json_atomic, write_text_atomic
from ralm.fingerprints import fingerprint

RALM = f"{shlex.quote(sys.executable)} -m ralm"
"""How ``commands.sh`` calls ralm: this interpreter, so the script runs outside the venv too (a bare
``ralm`` is on PATH only while the venv is active)."""


def short_hash(parts: list[str]) -> str:
    """A stage folder's name suffix: 8 digits of the fingerprint of its inputs and options. Only a name:
    whether a stage is done is decided by the whole command line recorded in ``stages.json``."""
    return fingerprint(parts)[:8]


@dataclass(frozen=True)
class StagePlan:
    key: str
    """Name in the report ("index", "data-gen", "train", "eval related", ...)."""
    words: tuple[str, ...]
    """The command's words (``("eval", "ppl")``): its module in ``ralm.cli.COMMANDS``."""
    arguments: Mapping[str, Any]
    """The stage function's arguments, typed: its option groups as their dataclasses."""
    output: Path
    """The folder or file whose existence (with the done mark) means the stage is complete."""
    resume: Mapping[str, Any] = field(default_factory=dict)
    """Arguments added only when a killed run left partial work (``ckpt_path="last"``); not part of the
    key."""

    @property
    def command(self) -> list[str]:
        """The command line that makes the same call: words, then the options rendered from `arguments`."""
        from ralm.command_render import command_line

        return [*self.words, *command_line(self.function, self.arguments, _option_names(self.words))]

    @property
    def function(self) -> Callable[..., Any]:
        return stage_function(self.words)

    def call(self, resuming: bool) -> Any:
        return self.function(**self.arguments, **(self.resume if resuming else {}))


STAGE_FUNCTIONS = {
    ("index",): ("ralm.retrieval.index_command", "make_index"),
    ("data-gen",): ("ralm.data_gen.data_gen_command", "data_gen"),
    ("train",): ("ralm.rerank.train_command", "train"),
    ("eval", "ppl"): ("ralm.eval.ppl.ppl_command", "eval_ppl"),
}
"""Each pipeline stage's command words -> the module and typed function that do its work."""


def stage_function(words: tuple[str, ...]) -> Callable[..., Any]:
    import importlib

    module, name = STAGE_FUNCTIONS[tuple(words)]
    return getattr(importlib.import_module(module), name)


@functools.cache
def _option_names(words: tuple[str, ...]):
    from ralm.cli import load_command

    return load_command(" ".join(words)).build_parser().ralm_option_names


class StageRunner:
    """Runs stages in order, writing ``commands.sh`` and ``stages.json`` (status and seconds per stage)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.state_path = run_dir / "stages.json"
        self.state: dict = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        self.commands: list[str] = []

    def is_done(self, stage: StagePlan, command: list[str]) -> bool:
        """Finished earlier with this command line (`stage.command`, rendered once by the caller)."""
        entry = self.state.get(stage.key)
        return bool(entry and entry.get("command") == command and stage.output.exists())

    def run(self, stage: StagePlan) -> float:
        """Run `stage` unless done; returns its seconds (this run's, or the recorded ones when reused)."""
        command = stage.command
        self.commands.append(f"{RALM} {shlex.join(command)}")
        self._write_commands()
        if self.is_done(stage, command):
            seconds = float(self.state[stage.key]["seconds"])
            print(f"[demo] {stage.key}: done earlier ({seconds:.0f} s), reusing {stage.output}", flush=True)
            self.state[stage.key]["reused"] = True
            write_json_atomic(self.state_path, self.state, indent=1)
            return seconds
        resuming = stage.output.exists()
        before = self.state.get(stage.key)
        if before and before.get("command") != command:
            # Output folders are keyed by the inputs' contents and the settings: a new folder means one
            # changed.
            print(
                f"[demo] {stage.key}: its inputs or settings changed since the last run; running it again",
                flush=True,
            )
        print(
            f"[demo] {stage.key}: ralm {shlex.join(command)}{' (resuming)' if resuming else ''}", flush=True
        )
        started = time.perf_counter()
        stage.call(resuming)
        sys.stdout.flush()
        seconds = time.perf_counter() - started
        self.state[stage.key] = {"command": command, "seconds": seconds, "reused": False}
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
