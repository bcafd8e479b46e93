"""The retrieval backends are classes behind one protocol, looked up in one table: every registered class has
the protocol's members and signatures, the table's names are spelled in one module, and no other module
chooses what to do by comparing a backend's name."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import get_args

import pytest
from retrieval_fixtures import real_passages_file

from ralm.errors import RalmInputError
from ralm.retrieval import backends
from ralm.retrieval.backends import BACKENDS, BUILT, BuiltBackend, backend_class
from ralm.retrieval.index import build_index, open_index
from ralm.retrieval.types import IndexBackend

PACKAGE = Path(__file__).resolve().parents[1] / "ralm"
TABLE = "ralm/retrieval/backends.py"
ALSO_SPELLED = {
    backends.BM25S: {"ralm/retrieval/bm25s_backend.py"},
    backends.PYSERINI: {"ralm/retrieval/java_runtime.py"},
}
"""Where a backend's name is also a literal with another meaning: the folder of bm25s's files inside an
index, and the Python module ``pyserini`` whose presence is checked."""
NAME_CONSTANTS = {"BM25S", "PYSERINI", "FAISS", "PYSERINI_PREBUILT", "DEFAULT"}


def _registered(name: str) -> type:
    try:
        return backend_class(name, "backend")
    except RalmInputError as err:  # an optional engine (FAISS) not installed here
        pytest.skip(str(err))


def _parameters(function) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)


def _check_signature(implementation, protocol, options: frozenset[str]) -> None:
    """The protocol's parameters by name and kind (its ``**options`` excepted), then each option as a
    keyword with a default, and nothing else required."""
    want, got = _parameters(protocol), _parameters(implementation)
    for name, parameter in want.items():
        if name in ("cls", "self") or parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        assert name in got and got[name].kind == parameter.kind, (implementation, name)
        empty = inspect.Parameter.empty
        assert (got[name].default is empty) == (parameter.default is empty), (implementation, name)
    for name in options:
        assert name in got and got[name].default is not inspect.Parameter.empty, (implementation, name)
    extra = set(got) - set(want) - options
    assert not extra, (implementation, extra)


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_registered_backend_satisfies_the_protocol(name):
    cls = _registered(name)
    assert isinstance(cls.build_options, frozenset) and isinstance(cls.open_options, frozenset)
    assert set(cls.recorded_as) <= cls.build_options  # only an option it takes is recorded under a key
    _check_signature(cls.build, IndexBackend.build, cls.build_options)
    _check_signature(cls.open, IndexBackend.open, cls.open_options)
    _check_signature(cls.resumable, IndexBackend.resumable, frozenset())
    _check_signature(cls.search, IndexBackend.search, frozenset())
    for method in ("build", "open", "resumable"):
        assert inspect.ismethod(getattr(cls, method)), (name, method)  # a classmethod: bound to the class


def test_the_tables_agree():
    assert get_args(BuiltBackend) == tuple(BUILT)  # `ralm index --backend`'s choices
    assert BUILT.items() <= BACKENDS.items() and backends.DEFAULT in BUILT


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent).as_posix(), ast.parse(path.read_text(), filename=str(path))


def test_each_backend_name_is_a_string_literal_in_the_table_only():
    where: dict[str, set[str]] = {name: set() for name in BACKENDS}
    for module, tree in _modules():
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in where and id(node) not in skip:
                where[node.value].add(module)
    for name, modules in where.items():
        assert modules - ALSO_SPELLED.get(name, set()) == {TABLE}, (name, modules)


def _names_a_backend(node: ast.AST) -> bool:
    """A backend's name as a literal, or one of the table module's constants for it."""
    if isinstance(node, ast.Constant):
        return node.value in BACKENDS
    if isinstance(node, ast.Name):
        return node.id in NAME_CONSTANTS
    return isinstance(node, ast.Attribute) and node.attr in NAME_CONSTANTS


def test_no_module_dispatches_on_a_backend_name():
    """A comparison with a backend's name, or a dict keyed by one, outside the table is a second table."""
    found = []
    for module, tree in _modules():
        if module == TABLE:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.Dict):
                operands = [key for key in node.keys if key is not None]
            else:
                continue
            found += [(module, node.lineno) for operand in operands if _names_a_backend(operand)]
    assert found == []


def test_bad_backend_names_name_their_field(tmp_path, real_documents):
    passages = real_passages_file(tmp_path, real_documents[:2])
    with pytest.raises(RalmInputError, match=r"^backend: 'pyserini-prebuilt' is not one of bm25s, pyserini"):
        build_index(passages, tmp_path / "linked", backend=backends.PYSERINI_PREBUILT)
    build_index(passages, tmp_path / "idx", backend=backends.BM25S)
    with pytest.raises(RalmInputError, match=r"idx: backend 'bm25s' takes no open option\(s\) device"):
        open_index(tmp_path / "idx", device="cpu")
    meta_path = tmp_path / "idx" / "ralm_index.json"
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "backend": "elastic"}))
    with pytest.raises(RalmInputError, match=r"ralm_index\.json: field 'backend': 'elastic' is not one of"):
        open_index(tmp_path / "idx")
