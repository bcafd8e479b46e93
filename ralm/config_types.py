"""Option constraints that live in the types: one annotation serves ``--help``, the CLI and the Python API.

A dataclass field annotated with a constrained number type (``PositiveInt``, ``NonNegativeInt``,
``AtLeastTwoInt``, ``ClosedUnitInterval``, ...) shows its type in ``--help``; jsonargparse checks it when
the command line or a YAML file is parsed; and a dataclass built in Python checks it in ``__post_init__``
through `check_fields`, with the type's own validator, so the rule is written once. Rules between fields
(one option only with another) are written in ``__post_init__`` after `check_fields`. A command's
top-level parameters carry the same types (jsonargparse checks them on the command line); the function
calls `check_arguments` with its ``locals()`` on entry for Python callers. Every path words a bad value
alike (`violation`): ``--stride: must be > 0, got 0`` (``ralm.cli.command_args`` turns jsonargparse's report
into that one line).

    @dataclass
    class Windowing:
        stride: PositiveInt = 4

        def __post_init__(self) -> None:
            check_fields(self)
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from jsonargparse.typing import (
    ClosedUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    OpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    restricted_number_type,
)

from ralm.errors import RalmInputError

AtLeastTwoInt = restricted_number_type("AtLeastTwoInt", int, (">=", 2), docstring="An int >= 2.")
HalfOpenUnitInterval = restricted_number_type(
    "HalfOpenUnitInterval", float, [(">=", 0.0), ("<", 1.0)], docstring="A float in [0, 1)."
)

Dtype = Literal["auto", "fastest", "config", "fp32", "bf16", "fp16", "float32", "bfloat16", "float16"]
"""The one vocabulary of an LM's dtype (``LMOptions.dtype``: ``--dtype`` of every LM stage, `ralm run`'s
and `ralm demo`'s, ``ralm.devices.DTYPES``): auto and fastest (``ralm.devices``' rules), config (the model
config's dtype, as the authors' eval_lm.py loads it: fp16 for OPT), or a precision by name."""

ADDED_LATER = "ralm: added after run folders were keyed"
"""Field metadata of a field that a stage's key holds only when it is not the default (`added_later`)."""


def added_later(default: Any) -> Any:
    """A field added after run folders were keyed, of a stage's arguments or of an option group inside
    them: ``ralm.pipeline.stage_keys`` keys it only when it is set to something other than `default`
    (`left_at_default`), so the folders of runs that never set it keep their keys and are reused. A default
    that is a mutable option group (a dataclass instance) is copied for each record."""
    if dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: copy.copy(default), metadata={ADDED_LATER: True})
    return dataclasses.field(default=default, metadata={ADDED_LATER: True})


def left_at_default(record: Any, field: dataclasses.Field) -> bool:
    """`field` of the dataclass `record` is `added_later` and holds its default: no key sees it."""
    if not field.metadata.get(ADDED_LATER):
        return False
    default = field.default_factory() if field.default is dataclasses.MISSING else field.default
    return getattr(record, field.name) == default


__all__ = [
    "ADDED_LATER",
    "AtLeastTwoInt",
    "Dtype",
    "ClosedUnitInterval",
    "HalfOpenUnitInterval",
    "NonNegativeFloat",
    "NonNegativeInt",
    "OpenUnitInterval",
    "PositiveFloat",
    "PositiveInt",
    "added_later",
    "check_arguments",
    "check_fields",
    "constraints",
    "left_at_default",
    "option_name",
    "violation",
]


def option_name(field: str) -> str:
    """The command-line spelling of a field: ``max_length`` -> ``--max-length``."""
    return "--" + field.replace("_", "-")


def _is_constrained(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "_restrictions") and hasattr(hint, "_expression")


def constraints(hint: Any) -> tuple[type, ...]:
    """The constrained number types of a hint (``PositiveInt`` or ``PositiveInt | None``)."""
    if _is_constrained(hint):
        return (hint,)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(arg for arg in typing.get_args(hint) if _is_constrained(arg))
    return ()


@functools.cache
def _field_constraints(cls: type) -> tuple[tuple[str, tuple[type, ...]], ...]:
    hints = typing.get_type_hints(cls)
    found = ((f.name, constraints(hints[f.name])) for f in dataclasses.fields(cls))
    return tuple((name, kinds) for name, kinds in found if kinds)


def violation(option: str, kinds: tuple[type, ...], value: Any) -> str:
    """The one-line message for `value` breaking `kinds`' rule, e.g. ``--stride: must be > 0, got 0``
    (the same words on the command line, in a YAML file and from Python)."""
    rule = re.sub(r"\bv\s*([<>=!]+)\s*", r"\1 ", kinds[0]._expression)  # "v>=0 and v<1" -> ">= 0 and < 1"
    return f"{option}: must be {rule}, got {value}"


def check_fields(obj: Any) -> None:
    """Check every constrained field of dataclass `obj` against its type; a bad value is a RalmInputError
    naming the option and the rule (None passes where the annotation allows it)."""
    for name, kinds in _field_constraints(type(obj)):
        value = getattr(obj, name)
        if not _allowed(kinds, value):
            raise RalmInputError(
                violation(f"{option_name(name)} ({type(obj).__name__}.{name})", kinds, value)
            )


@functools.cache
def _argument_constraints(function: Callable[..., Any]) -> tuple[tuple[str, tuple[type, ...]], ...]:
    hints = typing.get_type_hints(function)
    found = ((name, constraints(hint)) for name, hint in hints.items() if name != "return")
    return tuple((name, kinds) for name, kinds in found if kinds)


def check_arguments(function: Callable[..., Any], values: Mapping[str, Any]) -> None:
    """Check `function`'s constrained top-level parameters in `values` (its ``locals()`` on entry).

    The command line checks them already (jsonargparse reads the same annotations); this is the check
    for Python callers, so the rule stays written once, in the signature."""
    for name, kinds in _argument_constraints(function):
        if name in values and not _allowed(kinds, values[name]):
            raise RalmInputError(violation(option_name(name), kinds, values[name]))


def _allowed(kinds: tuple[type, ...], value: Any) -> bool:
    return value is None or any(_conforms(kind, value) for kind in kinds)


def _conforms(kind: type, value: Any) -> bool:
    if isinstance(value, bool):  # True is an int to Python, not a count to a user
        return False
    try:
        kind(value)
    except (TypeError, ValueError):
        return False
    return True
