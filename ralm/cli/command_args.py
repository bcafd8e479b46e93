"""Build a command's parser from a typed function: the signature (dataclass groups included) is the schema.

jsonargparse turns parameters and dataclass attribute docstrings into ``--help``, reads ``--config FILE.yaml``
and lets later command-line options override it, as litgpt's entry points do. Conveniences on top: every
option has one spelling, which ``--help``, errors and ``commands.sh`` show (`OptionNames.spelling`:
``--max-length``; ``--max_length``, as older scripts wrote it, still parses); a group's option is given by its
leaf name when no other option shares it (``--stride 8`` for ``--window.stride 8``), on the command line and
as a top-level YAML key; a group whose dataclass names a ``shorthand`` field takes a plain value for it
(``--lm gpt2`` and YAML ``lm: gpt2`` for ``--lm.model gpt2``); a boolean option given bare (``--quick``) means
``--quick true``. A parameter may also be a group made from a class's own signature (`ClassGroup`, as
LightningCLI adds ``pl.Trainer``'s): its values reach the function as a dict; one given as text (`TextForm`:
``--compare no-retrieval,bm25``) reaches it typed (a list of conditions). The reverse, a typed call as its
command line, is ``ralm.cli.command_render``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docstring_parser
import yaml
from jsonargparse import SUPPRESS, ActionConfigFile, ArgumentParser, Namespace, set_parsing_settings
from jsonargparse._actions import _ActionConfigLoad  # a group's own loader: hidden in help

from ralm.config_types import constraints, violation
from ralm.errors import RalmInputError

# Attribute docstrings of dataclass fields become --help text and YAML comments.
set_parsing_settings(docstring_parse_attribute_docstrings=True)


@dataclass(frozen=True)
class TextForm:
    """A parameter typed in Python (a list of conditions, a sweep) that the command line and YAML give as one
    string: the option takes the text, `parse` turns it into the value the function gets (its errors are
    the command's input errors), `text` spells a value back (``commands.sh``)."""

    parse: Callable[[str], Any]
    text: Callable[[Any], str]


@dataclass(frozen=True)
class OptionNames:
    """The option names of a command, read off its function's signature (not the parser's internals)."""

    keys: frozenset[str]
    """Every option's key: top-level names (groups included) and dotted group fields (``window.stride``)."""
    leaves: dict[str, str]
    """Each unambiguous leaf of a group option (``stride``) -> its full key (``window.stride``)."""
    booleans: frozenset[str]
    """Keys typed ``bool`` or ``bool | None``: given bare (``--quick``) they mean true."""
    renamed: dict[str, str]
    """Former option names -> their new names: giving one is an error that names the new one."""
    constrained: dict[str, tuple[type, ...]] = field(default_factory=dict)
    """Keys typed with a constrained number type (``PositiveInt | None``) -> those types."""
    shorthands: dict[str, str] = field(default_factory=dict)
    """Group keys a value may be given to directly -> the field it sets (``--lm X`` is ``--lm.model X``:
    the group's dataclass names that field in its ``shorthand`` attribute)."""
    text_forms: Mapping[str, TextForm] = field(default_factory=dict)
    """Top-level keys given as text and typed before the call (`TextForm`)."""

    def spelling(self, key: str) -> str:
        """How a user writes `key`, the one spelling of ``--help``, errors and ``commands.sh``: a shorthand
        group's field by the group (``--lm``), else its leaf when that is unambiguous (``--stride``), else
        the whole key (``--window.query-tokens``); always with hyphens."""
        group, _, field = key.partition(".")
        if field and self.shorthands.get(group) == field:
            return f"--{group}"
        leaf = key.rpartition(".")[2]
        return "--" + (leaf if self.leaves.get(leaf) == key or leaf == key else key).replace("_", "-")

    def key_of(self, written: str) -> str | None:
        """The key an option name as written names (``max-length``, ``window.stride``, ``stride``), or None
        when it names none of the function's options."""
        name = written.replace("-", "_")
        name = self.leaves.get(name, name)
        return name if name in self.keys else None


@dataclass(frozen=True)
class ClassGroup:
    """A function parameter (typed ``dict``) whose options are `cls`'s keyword arguments, read off its
    signature: every one of them is an option (``--print_config`` shows them all) except `skip`."""

    cls: type
    skip: frozenset[str] = frozenset()
    """Arguments the command sets itself: not options."""
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The command's values where they differ from the class's defaults."""
    links: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Argument -> the option it is copied from (one source for a value the command also uses)."""
    widened: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Argument -> a type the command accepts beside the class's own (``Literal["auto"]``: its own rule)."""

    def options(self) -> dict[str, Any]:
        """Each option's name -> its type hint (widened where the command accepts more)."""
        hints = typing.get_type_hints(self.cls.__init__)
        names = inspect.signature(self.cls.__init__).parameters
        hidden = {"self", *self.skip, *self.links}
        found = {name: hints.get(name, Any) for name in names if name not in hidden}
        return {
            name: self.widened[name] | hint if name in self.widened else hint for name, hint in found.items()
        }

    def add_to(self, parser: ArgumentParser, key: str) -> None:
        """Its options as the group `key` of `parser`, with the command's defaults and links."""
        parser.add_class_arguments(self.cls, key, skip={*self.skip, *self.widened}, instantiate=False)
        hints = self.options()
        for name in self.widened:
            parser.add_argument(
                f"--{key}.{name}",
                type=hints[name],
                default=None,
                help=f"{self.cls.__name__}'s {name} (or {self.widened[name]})",
            )
        parser.set_defaults({f"{key}.{name}": value for name, value in self.defaults.items()})
        for target, source in self.links.items():
            parser.link_arguments(source, f"{key}.{target}")


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass of a group's hint (``Windowing`` or ``Windowing | None``), if it is one."""
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
            return candidate
    return None


def _is_boolean(hint: Any) -> bool:
    return hint is bool or set(typing.get_args(hint)) == {bool, type(None)}


def option_names(
    function: Callable[..., Any],
    renamed: Mapping[str, str] | None = None,
    class_groups: Mapping[str, ClassGroup] | None = None,
    text_forms: Mapping[str, TextForm] | None = None,
) -> OptionNames:
    """`function`'s top-level options, its groups' dotted options and its boolean switches."""
    top, dotted, hints, shorthands = set(), {}, {}, {}
    for name, hint in typing.get_type_hints(function).items():
        if name == "return":
            continue
        top.add(name)
        group = None if name in (text_forms or {}) else _dataclass_of(hint)
        if name in (class_groups or {}):
            fields = class_groups[name].options()
        elif group is not None:
            fields = typing.get_type_hints(group)
            if getattr(group, "shorthand", None) in fields:
                shorthands[name] = group.shorthand
        else:
            hints[name] = hint
            continue
        for leaf, leaf_hint in fields.items():
            dotted.setdefault(leaf, []).append(f"{name}.{leaf}")
            hints[f"{name}.{leaf}"] = leaf_hint
    leaves = {leaf: keys[0] for leaf, keys in dotted.items() if len(keys) == 1 and leaf not in top}
    keys = top | {key for group_keys in dotted.values() for key in group_keys}
    booleans = frozenset(key for key, hint in hints.items() if _is_boolean(hint))
    constrained = {key: kinds for key, hint in hints.items() if (kinds := constraints(hint))}
    return OptionNames(
        frozenset(keys),
        leaves,
        booleans,
        _with_leaf_forms(renamed or {}, keys, leaves),
        constrained,
        shorthands,
        dict(text_forms or {}),
    )


def _with_leaf_forms(renamed: Mapping[str, str], keys: set[str], leaves: dict[str, str]) -> dict[str, str]:
    """A former group option was also given by its leaf (``--accumulate`` for ``--optim.accumulate``): that
    spelling is former too, renamed to the new option's leaf, unless it still names an option."""
    found = dict(renamed)
    for former, new in renamed.items():
        leaf = former.rpartition(".")[2]
        if "." in former and leaf not in found and leaf not in keys and leaf not in leaves:
            found[leaf] = new.rpartition(".")[2]
    return found


# jsonargparse's words for a value its constrained type refuses: "... 0 does not conform to restriction
# v>0" for `PositiveInt`, and a union's report ending in "Given value: 0" for `PositiveInt | None`.
_KEY = re.compile(r'^Parser key "([^"]+)":')
_VALUE = re.compile(r"Given value: (.*)$|: (\S+) does not conform to restriction", re.M)


def constraint_error(names: OptionNames, message: str) -> str | None:
    """jsonargparse's multi-line report of a constrained value as one line in `violation`'s words (the
    same as a Python caller gets), or None for any other parse error."""
    key, value = _KEY.match(message), _VALUE.search(message)
    if key is None or value is None or key[1] not in names.constrained:
        return None
    if "does not conform to restriction" not in message:
        return None
    raw = value[1] if value[1] is not None else value[2]
    return violation(names.spelling(key[1]), names.constrained[key[1]], raw)


# An option as written in help text and jsonargparse's messages (``--window.query_tokens``, ``--lm``).
_OPTION = re.compile(r"(?<![\w-])--([A-Za-z](?:[\w.-]*\w)?)")
_PARSER_KEY = re.compile(r'Parser key "([^"]+)"')
_REQUIRED = re.compile(r"(the following arguments are required: )(.+)")


def respelled(names: OptionNames, text: str) -> str:
    """`text` (help, a usage line, an error) with every option in its one spelling (`OptionNames.spelling`):
    jsonargparse registers and reports options by their keys (``--window.query_tokens``, ``Parser key
    "retrieval.index"``), while users write and the README shows ``--query-tokens`` and ``--index``."""
    text = _PARSER_KEY.sub(lambda m: _spelled_key(names, m[1]), text)
    text = _REQUIRED.sub(lambda m: m[1] + ", ".join(_spelled_key(names, k) for k in m[2].split(", ")), text)
    text = _OPTION.sub(lambda m: _spelled_key(names, m[1]), text)
    # A shorthand group's field is shown as the group itself (``--lm``), so a note that one is short for
    # the other (in the stages' docstrings) would read "--lm is short for --lm": dropped from the display.
    for group in names.shorthands:
        text = re.sub(rf" ?\(``--{group}`` (?:for short|is short for ``--{group}``)\)", "", text)
    return text


def _spelled_key(names: OptionNames, written: str) -> str:
    key = names.key_of(written)
    return names.spelling(key) if key is not None else "--" + written.replace("_", "-")


class _Parser(ArgumentParser):
    """jsonargparse's parser, showing each option in its one spelling (`respelled`) in ``--help``, usage and
    errors; a value that breaks its constrained type is a one-line RalmInputError."""

    def error(self, message: str, ex: Exception | None = None) -> typing.NoReturn:
        names = getattr(self, "ralm_option_names", None)
        line = constraint_error(names, message) if names is not None else None
        if line is not None:
            raise RalmInputError(line)
        super().error(respelled(names, message) if names is not None else message, ex)

    def format_help(self, *args: Any, **kwargs: Any) -> str:
        with self._spelled_options() as names:
            text = super().format_help(*args, **kwargs)
        return respelled(names, text) if names is not None else text

    def format_usage(self) -> str:
        with self._spelled_options() as names:
            text = super().format_usage()
        return respelled(names, text) if names is not None else text

    @contextlib.contextmanager
    def _spelled_options(self) -> Iterator[OptionNames | None]:
        """Within the block the actions carry their shown spellings, so argparse lays out usage and help
        with them (their widths, their metavars beside them); parsing keeps the registered keys."""
        names = getattr(self, "ralm_option_names", None)
        registered = [(action, action.option_strings) for action in self._actions]
        if names is not None:
            for action, strings in registered:
                # A list option's appending twin (``--exclude+``) is jsonargparse's, still accepted.
                shown = [s for s in strings if not s.endswith("+")] or strings
                action.option_strings = [_spelled_key(names, o[2:]) if o[:2] == "--" else o for o in shown]
        try:
            yield names
        finally:
            for action, strings in registered:
                action.option_strings = strings


def parser_for(
    function: Callable[..., Any],
    description: str | None = None,
    prog: str | None = None,
    renamed: Mapping[str, str] | None = None,
    class_groups: Mapping[str, ClassGroup] | None = None,
    text_forms: Mapping[str, TextForm] | None = None,
) -> ArgumentParser:
    """A parser whose options are `function`'s parameters, plus ``--config``.

    `renamed`: former option names of this command and their new names (CHANGELOG.md).
    `class_groups`: parameters whose options come from a class's signature (`ClassGroup`).
    `text_forms`: parameters given as text (`TextForm`), typed by `parse` before the call."""
    parser = _Parser(
        prog=prog,
        description=description or (function.__doc__ or "").strip().split("\n")[0],
        default_env=False,
        exit_on_error=True,
        allow_abbrev=False,  # one spelling per option: `--doc` is no second name of `--docs`
    )
    parser.add_argument("--config", action=ActionConfigFile, help="YAML file with option values.")
    class_groups, text_forms = dict(class_groups or {}), dict(text_forms or {})
    parser.add_function_arguments(function, as_group=False, skip={*class_groups, *text_forms})
    for key, group in class_groups.items():
        group.add_to(parser, key)
    documented = {p.arg_name: p.description for p in docstring_parser.parse(function.__doc__ or "").params}
    for key, form in text_forms.items():
        default = inspect.signature(function).parameters[key].default
        text = None if default is None else form.text(default)
        parser.add_argument(f"--{key}", type=str | None, default=text, help=documented.get(key))
    parser.ralm_option_names = option_names(function, renamed, class_groups, text_forms)
    _show_one_spelling(parser, function)
    return parser


def _show_one_spelling(parser: ArgumentParser, function: Callable[..., Any]) -> None:
    """Help that shows each option once, in its one spelling (`respelled`, here where argparse still wraps
    the text): a group's own ``--window FILE`` loader (jsonargparse's "Path to a configuration file",
    which beside ``--lm`` read as if the LM were one) is hidden, still accepted, as ``--config`` takes the
    same YAML; a group titled by its dataclass's generated signature or by the first line of a wrapped
    docstring gets a whole title."""
    names: OptionNames = parser.ralm_option_names
    for action in parser._actions:
        if isinstance(action, _ActionConfigLoad):
            action.help = SUPPRESS
        elif isinstance(action.help, str) and action.help != SUPPRESS:
            action.help = respelled(names, action.help)
    hints = typing.get_type_hints(function)
    for key, group in getattr(parser, "groups", {}).items():
        cls = _dataclass_of(hints.get(key))
        doc = inspect.getdoc(cls) if cls is not None else None
        if doc and group.title and group.title.startswith(f"{cls.__name__}("):
            group.title = f"{key.replace('_', ' ')} options"  # no docstring: dataclass wrote its signature
        elif doc and group.title == doc.splitlines()[0]:
            group.title = doc.split("\n\n")[0].rstrip(".")
        if group.title:
            group.title = respelled(names, " ".join(group.title.split()))
    if parser.description:
        parser.description = respelled(names, parser.description)


def normalize_argv(parser: ArgumentParser, argv: list[str]) -> list[str]:
    """Accept hyphenated option names, leaf aliases and bare boolean switches; leave values and names that
    name no option (jsonargparse refuses them as written) untouched.

    A former option name (``renamed``) is a RalmInputError naming its new name."""
    names: OptionNames = getattr(parser, "ralm_option_names", OptionNames(frozenset(), {}, frozenset(), {}))
    out = []
    argv = list(argv)
    for i, arg in enumerate(argv):
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            name = name.replace("-", "_")
            if name in names.renamed:
                new = names.renamed[name].replace("_", "-")
                raise RalmInputError(f"--{name.replace('_', '-')}: renamed --{new} (CHANGELOG.md)")
            if f"--{name}" not in parser._option_string_actions and names.key_of(name) is None:
                out.append(arg)  # no such option: jsonargparse's error names it as it was written
                continue
            if name == "config":
                given = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
                expanded = _config_argument(given, names)
                if eq:
                    value = expanded
                elif i + 1 < len(argv):
                    argv[i + 1] = expanded
            following = argv[i + 1] if i + 1 < len(argv) else None
            if name in names.shorthands and not (eq and value.startswith("{")):
                if eq or (following is not None and not following.startswith(("--", "{"))):
                    name = f"{name}.{names.shorthands[name]}"
            name = names.leaves.get(name, name)
            out.append(f"--{name}{eq}{value}")
            if name in names.booleans and not eq and (following is None or following.startswith("--")):
                out.append("true")
            continue
        out.append(arg)
    return out


def _config_argument(config_file: str, names: OptionNames) -> str:
    """``--config``'s value after reading the file once: a former option name in it fails naming the file,
    the key and its new name; values written as the command line may write them are nested
    (`_nested_config`). A missing, unreadable or malformed file is left for jsonargparse to report."""
    if not Path(config_file).is_file():
        return config_file
    try:
        values = yaml.safe_load(Path(config_file).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return config_file
    for key in _dotted_keys(values):
        if key in names.renamed:
            raise RalmInputError(
                f"{config_file}: key {key!r} was renamed {names.renamed[key]!r} (CHANGELOG.md)"
            )
    if not isinstance(values, dict):
        return config_file
    nested = _nested_config(values, names)
    return yaml.safe_dump(nested, sort_keys=False) if nested != values else config_file


def _nested_config(values: dict, names: OptionNames) -> dict:
    """A YAML mapping with a group's field written by its leaf (``index: idx``) or a shorthand group's plain
    value (``lm: gpt2``) nested as jsonargparse reads them (``retrieval: {index: idx}``, ``lm: {model:
    gpt2}``), which ``--config`` also takes as a YAML string."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        if key in names.shorthands and not isinstance(value, dict | None):
            key = f"{key}.{names.shorthands[key]}"
        elif key not in names.keys and key in names.leaves:
            key = names.leaves[key]
        group, dot, leaf = key.partition(".")
        if dot:
            present = nested.setdefault(group, {})
            nested[group] = {**present, leaf: value} if isinstance(present, dict) else present
        elif isinstance(value, dict) and isinstance(nested.get(key), dict):
            nested[key] = {**value, **nested[key]}
        else:
            nested[key] = value
    return nested


def _dotted_keys(values: Any, prefix: str = "") -> list[str]:
    """Every key of a YAML mapping, nested ones dotted (``optim: {accumulate: 2}`` ->
    ``optim.accumulate``)."""
    if not isinstance(values, dict):
        return []
    keys = []
    for key, value in values.items():
        keys += [f"{prefix}{key}", *_dotted_keys(value, f"{prefix}{key}.")]
    return keys


def parse(parser: ArgumentParser, argv: list[str] | None) -> tuple[Namespace, Namespace]:
    """Parse argv (after normalising): ``(cfg, init)``, the parsed namespace and the same with its dataclass
    groups instantiated and its text forms typed (`TextForm`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg = parser.parse_args(normalize_argv(parser, argv))
    init = parser.instantiate_classes(cfg)
    for key, form in getattr(getattr(parser, "ralm_option_names", None), "text_forms", {}).items():
        if getattr(init, key, None) is not None:
            setattr(init, key, form.parse(getattr(init, key)))
    return cfg, init


def call_with_args(function: Callable[..., Any], parser: ArgumentParser, argv: list[str] | None) -> Any:
    """Parse argv, build dataclass groups, call `function`; bad input becomes a one-line error and exit 2."""
    try:  # a dataclass group's __post_init__ checks run while the groups are built
        _, init = parse(parser, argv)
        kwargs = {k: v for k, v in vars(init).items() if k != "config" and not k.startswith("__")}
        # a ClassGroup stays a namespace (not instantiated): the function takes its keyword arguments
        kwargs = {k: v.as_dict() if isinstance(v, Namespace) else v for k, v in kwargs.items()}
        return function(**kwargs)
    except RalmInputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
