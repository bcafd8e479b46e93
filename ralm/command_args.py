"""Build a command's parser from a typed function: the signature (dataclass groups included) is the schema.

jsonargparse turns parameters and dataclass attribute docstrings into ``--help``, reads ``--config FILE.yaml``
and lets later command-line options override it, as litgpt's entry points do. Two conveniences on top:
``--max-length`` and ``--max_length`` are the same option, and a group's option may be given by its leaf
name when no other option shares it (``--stride 8`` for ``--window.stride 8``), and a boolean option given
bare (``--quick``) means ``--quick true``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from jsonargparse import ActionConfigFile, ArgumentParser, set_parsing_settings

from ralm.errors import RalmInputError

# Attribute docstrings of dataclass fields become --help text and YAML comments.
set_parsing_settings(docstring_parse_attribute_docstrings=True)


def parser_for(
    function: Callable[..., Any], description: str | None = None, prog: str | None = None
) -> ArgumentParser:
    """A parser whose options are `function`'s parameters, plus ``--config``."""
    parser = ArgumentParser(
        prog=prog,
        description=description or (function.__doc__ or "").strip().split("\n")[0],
        default_env=False,
        exit_on_error=True,
    )
    parser.add_argument("--config", action=ActionConfigFile, help="YAML file with option values.")
    parser.add_function_arguments(function, as_group=False)
    return parser


def _leaf_aliases(parser: ArgumentParser) -> dict[str, str]:
    """Map each unambiguous leaf name of a dotted option (``stride``) to its full key (``window.stride``)."""
    top, leaves = set(), {}
    for action in parser._actions:
        dest = action.dest
        if "." not in dest:
            top.add(dest)
            continue
        leaf = dest.rsplit(".", 1)[1]
        leaves.setdefault(leaf, []).append(dest)
    return {leaf: dests[0] for leaf, dests in leaves.items() if len(dests) == 1 and leaf not in top}


def _boolean_options(parser: ArgumentParser) -> set[str]:
    """Dests of options typed ``bool`` or ``bool | None``."""
    found = set()
    for action in parser._actions:
        hint = getattr(action, "_typehint", None)
        if hint is bool or (hint is not None and set(getattr(hint, "__args__", ())) == {bool, type(None)}):
            found.add(action.dest)
    return found


def normalize_argv(parser: ArgumentParser, argv: list[str]) -> list[str]:
    """Accept hyphenated option names, leaf aliases and bare boolean switches; leave values untouched."""
    aliases = _leaf_aliases(parser)
    booleans = _boolean_options(parser)
    out = []
    for i, arg in enumerate(argv):
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            name = name.replace("-", "_")
            name = aliases.get(name, name)
            out.append(f"--{name}{eq}{value}")
            following = argv[i + 1] if i + 1 < len(argv) else None
            if name in booleans and not eq and (following is None or following.startswith("--")):
                out.append("true")
            continue
        out.append(arg)
    return out


def parse(parser: ArgumentParser, argv: list[str] | None) -> Any:
    """Parse argv (after normalising) and return the namespace with dataclass groups instantiated."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parser.parse_args(normalize_argv(parser, argv))
    return cfg, parser.instantiate_classes(cfg)


def call_with_args(function: Callable[..., Any], parser: ArgumentParser, argv: list[str] | None) -> Any:
    """Parse argv, build dataclass groups, call `function`; bad input becomes a one-line error and exit 2."""
    _, init = parse(parser, argv)
    kwargs = {k: v for k, v in vars(init).items() if k != "config" and not k.startswith("__")}
    try:
        return function(**kwargs)
    except RalmInputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
