"""Every ralm module imports with the core dependencies only: the optional ones (wandb, DeepSpeed, FAISS,
Pyserini, sentence-transformers, TensorBoard) are imported where they are used, so a plain
`pip install ralm` never fails at import time."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import ralm

OPTIONAL = ("wandb", "deepspeed", "faiss", "pyserini", "jnius", "sentence_transformers", "tensorboard")
# Loaded by sentence-transformers itself from an export folder (it subclasses sentence-transformers' module).
NEEDS_OPTIONAL = {"ralm.rerank.cross_encoder_input": "sentence_transformers"}

# None in sys.modules is how Python spells "not installed" to both `import` and `find_spec`.
BLOCKER = """
import importlib, json, sys
for name in {blocked!r}:
    sys.modules[name] = None
from ralm.errors import RalmInputError
outcome = {{}}
for module in {modules!r}:
    try:
        importlib.import_module(module)
        outcome[module] = "ok"
    except RalmInputError as err:  # an adapter of an optional library, saying which extra to install
        outcome[module] = "input error: " + str(err)
print(json.dumps(outcome))
"""
# Adapters whose whole job is one optional library: they refuse to import with the extra to install.
ADAPTERS = {"ralm.retrieval.faiss_backend": "pip install 'ralm[faiss]'"}


def ralm_modules() -> list[str]:
    # (ralm.__main__ runs the CLI when imported: `python -m ralm`)
    skip = {*NEEDS_OPTIONAL, "ralm.__main__"}
    return sorted(m.name for m in pkgutil.walk_packages(ralm.__path__, "ralm.") if m.name not in skip)


def test_every_module_imports_without_optional_dependencies():
    modules = ralm_modules()
    assert "ralm.eval.qa.flare" in modules and "ralm.train.fit" in modules  # the walk found the package
    code = BLOCKER.format(blocked=list(OPTIONAL), modules=modules)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # any other failure is a crash at import time
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(outcome) == modules
    refused = {m: r for m, r in outcome.items() if r != "ok"}
    assert sorted(refused) == sorted(ADAPTERS)
    for module, hint in ADAPTERS.items():
        assert hint in refused[module]


def _module_imports(path: Path, known: set[str]) -> set[str]:
    """The ralm modules a file imports at its top level, those under ``if TYPE_CHECKING:`` included (an
    annotation's import is still a dependency); imports inside functions are deliberate and left out."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)

    visit(ast.parse(path.read_text()).body)
    return found & known


def _import_graph() -> dict[str, set[str]]:
    root = Path(ralm.__file__).parent
    paths = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {name: _module_imports(path, set(paths)) for name, path in paths.items()}


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), list(graph[start])
    while todo:
        name = todo.pop()
        if name == goal:
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    return False


def test_data_gen_modules_import_without_a_circle():
    """A type imported only for annotations still ties two modules: each lives where its concept does."""
    graph = _import_graph()
    circles = [name for name in graph if name.startswith("ralm.data_gen") and _reaches(graph, name, name)]
    assert circles == []
