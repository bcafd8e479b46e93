"""Option constraints that live in the types: one annotation serves ``--help``, the CLI and the Python API.

A dataclass field annotated with a constrained number type (``PositiveInt``, ``NonNegativeInt``,
``AtLeastTwoInt``, ``ClosedUnitInterval``, ...) shows its type in ``--help``; jsonargparse checks it when
the command line or a YAML file is parsed; and a dataclass built in Python checks it in ``__post_init__``
through `check_fields`, with the type's own validator, so the rule is written once. Rules between fields
(one option only with another) are written in ``__post_init__`` after `check_fields`.

    @dataclass
    class Windowing:
        stride: PositiveInt = 4

        def __post_init__(self) -> None:
            check_fields(self)
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

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

__all__ = [
    "AtLeastTwoInt",
    "ClosedUnitInterval",
    "HalfOpenUnitInterval",
    "NonNegativeFloat",
    "NonNegativeInt",
    "OpenUnitInterval",
    "PositiveFloat",
    "PositiveInt",
    "check_fields",
    "option_name",
]


def option_name(field: str) -> str:
    """The command-line spelling of a field: ``max_length`` -> ``--max-length``."""
    return "--" + field.replace("_", "-")


def _is_constrained(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "_restrictions") and hasattr(hint, "_expression")


def _constraints(hint: Any) -> tuple[type, ...]:
    """The constrained number types of a hint (``PositiveInt`` or ``PositiveInt | None``)."""
    if _is_constrained(hint):
        return (hint,)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(arg for arg in typing.get_args(hint) if _is_constrained(arg))
    return ()


@functools.cache
def _field_constraints(cls: type) -> tuple[tuple[str, tuple[type, ...]], ...]:
    hints = typing.get_type_hints(cls)
    found = ((f.name, _constraints(hints[f.name])) for f in dataclasses.fields(cls))
    return tuple((name, kinds) for name, kinds in found if kinds)


def check_fields(obj: Any) -> None:
    """Check every constrained field of dataclass `obj` against its type; a bad value is a RalmInputError
    naming the option and the rule (None passes where the annotation allows it)."""
    for name, kinds in _field_constraints(type(obj)):
        value = getattr(obj, name)
        if value is None or any(_conforms(kind, value) for kind in kinds):
            continue
        rule = kinds[0]._expression.replace("v", "")  # e.g. ">0", ">=0.0 and <1.0"
        raise RalmInputError(
            f"{option_name(name)} ({type(obj).__name__}.{name}): must be {rule}, got {value!r}"
        )


def _conforms(kind: type, value: Any) -> bool:
    try:
        kind(value)
    except (TypeError, ValueError):
        return False
    return True
