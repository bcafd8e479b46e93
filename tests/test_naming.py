"""The naming rule of docs/architecture.md ("Names of option groups, settings and records"): a command's
option groups are `<Thing>Options`; no other dataclass takes that suffix's place (`*Args`, `*Config`)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

from ralm.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[1] / "ralm"


def _group_types(function) -> list[type]:
    """The dataclass groups a command function takes (each has a default instance: the command's values)."""
    parameters = inspect.signature(function).parameters.values()
    return [type(p.default) for p in parameters if dataclasses.is_dataclass(p.default)]


def test_every_command_option_group_is_named_options():
    seen = set()
    for module_name, _ in COMMANDS.values():
        module = importlib.import_module(module_name)
        for function in vars(module).values():
            if inspect.isfunction(function) and function.__module__ == module.__name__:
                seen.update(_group_types(function))
    assert len(seen) >= 15  # the groups of data-gen, train, eval, index, run and demo
    assert sorted(cls.__name__ for cls in seen if not cls.__name__.endswith("Options")) == []


def test_no_dataclass_is_named_with_a_retired_suffix():
    retired = []
    for path in ROOT.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("class ") and line.split("(")[0].split(":")[0].endswith(("Args", "Config")):
                retired.append(f"{path.relative_to(ROOT)}: {line}")
    assert retired == []
