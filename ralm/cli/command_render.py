"""A typed call as the command line that makes it (`command_line`): how `ralm run` writes each stage to
``commands.sh`` from the stage's own option groups, so a user can replay it; parsing the line with the
command's parser (``ralm.cli.command_args``) gives the same arguments back (tests/test_pipeline_plan.py)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ralm.cli.command_args import OptionNames


def command_line(function: Callable[..., Any], arguments: Mapping[str, Any], names: OptionNames) -> list[str]:
    """The options that make `function`'s parser give `arguments` back: a typed Python call (dataclass
    groups, a `ClassGroup`'s dict) as the command line a user types to replay it. Values equal to the
    parameter's (or the group's) default are left out; a group field by its leaf where unambiguous; a value
    the command takes as text (`TextForm`: a list of conditions) as that text."""
    parameters = inspect.signature(function).parameters
    unknown = sorted(set(arguments) - set(parameters))
    if unknown:
        raise TypeError(f"{function.__name__}() has no parameter {', '.join(unknown)}")
    argv: list[str] = []
    for name, value in arguments.items():
        default = parameters[name].default
        if name in names.text_forms:
            argv += [] if value == default else [names.spelling(name), names.text_forms[name].text(value)]
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            base = default if type(default) is type(value) else type(value)()
            for f in dataclasses.fields(value):
                if getattr(value, f.name) != getattr(base, f.name):
                    argv += [names.spelling(f"{name}.{f.name}"), _as_text(getattr(value, f.name))]
        elif isinstance(value, Mapping):  # a ClassGroup's keyword arguments
            for key, item in value.items():
                argv += [f"--{name}.{key}", _as_text(item)]
        elif value != default:
            argv += [names.spelling(name), _as_text(value)]
    return argv


def _as_text(value: Any) -> str:
    """A value as jsonargparse reads it back: booleans and None as YAML words, sequences as JSON."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return json.dumps([str(v) if isinstance(v, Path) else v for v in value])
    return str(value)
