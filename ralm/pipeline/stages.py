"""Run a pipeline's stages, record their times, and skip finished ones.

A stage is a `StagePlan`: its function's typed arguments (``ralm.pipeline.stage_arguments``: one record
per stage, holding its own option groups, `LMOptions`, `RetrievalOptions`, ...), called through its Python
API in this process (the function named in the one command table, ``ralm.cli.commands``; nothing here imports
the CLI). Its identity is the fingerprint of those objects with every path replaced by what it names
(``ralm.pipeline.stage_keys``): an input by its contents, an earlier stage's work by that stage's
fingerprint, what the stage writes left out. A stage folder's name carries 8 digits of it, so the same
inputs and settings find (and reuse, or resume) the same folder wherever the run folder is and however its
path is spelled, other ones get a fresh folder, and a half-finished output is never mistaken for a
finished one because a stage is only marked done (its whole fingerprint in ``stages.json``) after its call
returns. Each stage's command line is rendered from the same objects
(``ralm.cli.command_render.command_line``) into ``commands.sh``, for the user to read and replay (through
the interpreter that ran the pipeline, `.../python -m ralm`, so it works where the venv is not active); it
is never read back.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralm.atomic_files import write_json_atomic, write_text_atomic
from ralm.cli.commands import PIPELINE_STAGES, command
from ralm.pipeline.stage_arguments import StageArguments
from ralm.pipeline.stage_keys import Identities, keyed_arguments, stage_fingerprint, strings

RALM = f"{shlex.quote(sys.executable)} -m ralm"
"""How ``commands.sh`` calls ralm: this interpreter, so the script runs outside the venv too (a bare
``ralm`` is on PATH only while the venv is active)."""

STAGE_FUNCTIONS = {words: (command(words).module, command(words).function) for words in PIPELINE_STAGES}
"""Each pipeline stage's command words -> the module and typed function that do its work (the command
table's entries for ``ralm.cli.commands.PIPELINE_STAGES``)."""


@dataclass(frozen=True)
class StagePlan:
    key: str
    """Name in the report and in ``stages.json`` ("index", "data-gen", "train", "eval related", ...)."""
    arguments: StageArguments
    """The stage function's arguments, typed: its option groups as their dataclasses."""
    output: Path
    """The folder or file whose existence (with the done mark) means the stage is complete."""
    identities: Identities = field(default_factory=dict)
    """The paths among `arguments` as the plan spells them -> what they name (``ralm.pipeline.stage_keys``):
    an input's contents or an earlier stage's fingerprint."""

    @property
    def words(self) -> tuple[str, ...]:
        """The command's words (``("eval", "ppl")``): its entry in ``ralm.cli.commands.COMMANDS``."""
        return self.arguments.words

    @property
    def written(self) -> frozenset[str]:
        """The arguments naming what the stage writes (its output folder, a cache)."""
        return self.arguments.written()

    @functools.cached_property
    def fingerprint(self) -> str:
        """The stage's identity (64 hex digits); its folder's name carries the first 8."""
        arguments = self.arguments
        return stage_fingerprint(self.words, arguments.keywords(), arguments.unkeyed_now(), self.identities)

    def produced(self) -> dict[str, str]:
        """The paths of this stage's work (what it writes, and `output`) -> their identity in a later
        stage's key: this stage's fingerprint and the argument that names the path."""
        given = self.arguments.keywords()
        paths = {str(given[name]): name for name in sorted(self.written) if given[name] is not None}
        paths.setdefault(str(self.output), "result")
        return {path: f"{' '.join(self.words)} {self.fingerprint} {role}" for path, role in paths.items()}

    def places(self, folder: Path) -> list[str]:
        """The strings of the stage's key that still name a place in `folder` (should be none: a path in
        the run folder is keyed by its contents or its stage, so a moved run folder keeps every key)."""
        keyed = keyed_arguments(self.arguments.keywords(), self.arguments.unkeyed_now(), self.identities)
        root = folder.resolve()
        return [text for text in strings(keyed) if f"{root}{os.sep}" in text or _inside(text, root)]

    @property
    def command(self) -> list[str]:
        """The command line that makes the same call: words, then the options rendered from `arguments`."""
        from ralm.cli.command_render import command_line

        options = command_line(self.function, self.arguments.keywords(), _option_names(self.words))
        return [*self.words, *options]

    @property
    def function(self) -> Callable[..., Any]:
        return stage_function(self.words)

    def call(self, resuming: bool) -> Any:
        """The stage's function on its arguments (those of a resumed call when `resuming`)."""
        arguments = self.arguments.resumed() if resuming else self.arguments
        return self.function(**arguments.keywords())


def _inside(text: str, folder: Path) -> bool:
    """`text` is a path (it has a separator) that exists in `folder`, however it is spelled."""
    try:
        return os.sep in text and os.path.exists(text) and Path(text).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def stage_function(words: tuple[str, ...]) -> Callable[..., Any]:
    return command(words).load_function()


@functools.cache
def _option_names(words: tuple[str, ...]):
    """How the command's parser spells its options (its renames, its leaf forms): for ``commands.sh``."""
    return command(words).load_module().build_parser().ralm_option_names


class StageRunner:
    """Runs stages in order, writing ``commands.sh`` and ``stages.json`` (per stage: its fingerprint, its
    rendered command, its seconds and whether this run reused it)."""

    def __init__(self, run_dir: Path, label: str = "run") -> None:
        self.run_dir = run_dir
        self.label = label  # each line's tag: the command that runs the pipeline ([run], [demo])
        self.state_path = run_dir / "stages.json"
        self.state: dict = json.loads(self.state_path.read_text()) if self.state_path.is_file() else {}
        self.commands: list[str] = []

    def finished(self, stage: StagePlan) -> str | None:
        """The ``stages.json`` entry that finished this very stage (the same fingerprint; its own name
        first, then any other, as "train" for the seed that a one-seed run called "train seed 0"), if its
        output is there."""
        if not stage.output.exists():
            return None
        names = [stage.key, *(name for name in self.state if name != stage.key)]
        return next((n for n in names if self.state.get(n, {}).get("fingerprint") == stage.fingerprint), None)

    def run(self, stage: StagePlan) -> float:
        """Run `stage` unless done; returns its seconds (this run's, or the recorded ones when reused)."""
        tag = f"[{self.label}]"
        placed = stage.places(self.run_dir)
        if placed:
            raise RuntimeError(f"{stage.key}: its key names places in the run folder: {placed}")
        command = stage.command
        self.commands.append(f"{RALM} {shlex.join(command)}")
        self._write_commands()
        done = self.finished(stage)
        if done is not None:
            seconds = float(self.state[done]["seconds"])
            print(f"{tag} {stage.key}: done earlier ({seconds:.0f} s), reusing {stage.output}", flush=True)
            self._record(stage, command, seconds, reused=True)
            return seconds
        resuming = stage.output.exists()
        before = self.state.get(stage.key)
        if before and before.get("fingerprint") != stage.fingerprint:
            # Output folders are keyed by the inputs' contents and the settings: a new folder means one
            # changed.
            print(
                f"{tag} {stage.key}: its inputs or settings changed since the last run; running it again",
                flush=True,
            )
        print(f"{tag} {stage.key}: ralm {shlex.join(command)}{' (resuming)' if resuming else ''}", flush=True)
        started = time.perf_counter()
        stage.call(resuming)
        sys.stdout.flush()
        self._record(stage, command, time.perf_counter() - started, reused=False)
        return float(self.state[stage.key]["seconds"])

    def _record(self, stage: StagePlan, command: list[str], seconds: float, reused: bool) -> None:
        entry = {"fingerprint": stage.fingerprint, "command": command, "seconds": seconds, "reused": reused}
        self.state[stage.key] = entry
        write_json_atomic(self.state_path, self.state, indent=1)

    def _write_commands(self) -> None:
        header = [
            "#!/usr/bin/env bash",
            "# The exact stage commands of this demo run; each skips or resumes work that is already done.",
            "set -euo pipefail",
            f"cd {shlex.quote(os.getcwd())}",
        ]
        write_text_atomic(self.run_dir / "commands.sh", "\n".join(header + self.commands) + "\n")
