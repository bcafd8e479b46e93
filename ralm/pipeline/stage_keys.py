"""A pipeline stage's identity: the fingerprint of its typed arguments, with every path replaced by what it
names. What decides whether a finished stage folder is reused, and the 8 digits in the folder's name.

- an input file or folder (a text, a local LM or encoder) is named by its contents (`content_identity`), so
  the same file under another spelling (relative or absolute) or in another place is the same input and an
  edited one is another;
- the work of an earlier stage (an index, the data-gen rows, a reranker) is named by that stage's
  fingerprint (`StagePlan.produced`): it does not exist yet when the plan is made, and its folder may move
  with the run folder;
- what the stage writes (``--output``, a cache) is not part of its identity;
- options are keyed by their Python names and values (the function's parameters and option groups'
  fields, defaults included), never by how a command line spells them; a list of conditions (eval's
  ``compare``) by its ``--compare`` text (``conditions_spec``), each trained reranker's folder replaced by
  its identity: the form keys had when the list was passed as that text, so finished eval folders stay.

Nothing here renders or parses a command line: ``commands.sh`` is written for the user and never read back.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ralm.config_types import left_at_default
from ralm.eval.ppl.conditions import Condition, conditions_spec
from ralm.fingerprints import fingerprint, path_fingerprint

Identities = Mapping[str, str]
"""A path as the plan spells it in a stage's arguments -> what it names (contents or an earlier stage)."""


def stage_fingerprint(
    words: tuple[str, ...], arguments: Mapping[str, Any], written: Collection[str], identities: Identities
) -> str:
    """64 hex digits: the command's words and its arguments but those it writes (`written`), every path
    replaced by its identity."""
    return fingerprint({"command": list(words), "arguments": keyed_arguments(arguments, written, identities)})


def keyed_arguments(arguments: Mapping[str, Any], written: Collection[str], identities: Identities) -> dict:
    """The arguments as the key sees them: option groups as their fields, paths as their identities."""
    return {name: _keyed(value, identities) for name, value in arguments.items() if name not in written}


def _keyed(value: Any, identities: Identities) -> Any:
    if isinstance(value, list | tuple) and value and all(isinstance(v, Condition) for v in value):
        return _keyed_conditions(value, identities)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _keyed(getattr(value, f.name), identities)
            for f in dataclasses.fields(value)
            if not left_at_default(value, f)
        }
    if isinstance(value, Mapping):
        return {str(k): _keyed(v, identities) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_keyed(v, identities) for v in value]
    if isinstance(value, str | Path):
        return identities.get(str(value), str(value))
    return value


def _keyed_conditions(conditions: Sequence[Condition], identities: Identities) -> str:
    """Conditions as their ``--compare`` text with each reranker folder (``NAME=FOLDER``) as its identity: a
    condition's spec says all it is (``check_conditions``), and the key stays what it was for that text."""
    named = [
        dataclasses.replace(c, model=identities.get(str(c.model), c.model))
        if c.declared.value == "folder"
        else c
        for c in conditions
    ]
    return conditions_spec(named)


def strings(value: Any) -> Iterator[str]:
    """Every string in a keyed value (to check that none of them still names a place)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


def content_identity(path: str | os.PathLike) -> str | None:
    """``sha256:<digits>`` of a local file or folder's contents (``ralm.fingerprints.path_fingerprint``), or
    None when `path` is no local path (a Hugging Face hub id, named by itself). Hashed once per process
    while the files' sizes and modification times stay the same (a model folder is read once)."""
    if not os.path.exists(path):
        return None
    resolved = Path(path).resolve()
    return _content(resolved, _stat_signature(resolved))


def identities_of(paths: Collection[str | os.PathLike | None], known: Identities) -> dict[str, str]:
    """Each path's identity: an earlier stage's (`known`) or, for a local file or folder, its contents.
    A path neither names (a hub id, or None) is left out: the key names it as it is spelled."""
    out = {}
    for path in paths:
        if path is None:
            continue
        text = str(path)
        identity = known.get(text) or content_identity(text)
        if identity is not None:
            out[text] = identity
    return out


def _stat_signature(path: Path) -> tuple:
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


@functools.lru_cache(maxsize=64)
def _content(path: Path, signature: tuple) -> str:
    return f"sha256:{path_fingerprint(path)}"
