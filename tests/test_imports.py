"""Every ralm module imports with the core dependencies only: the optional ones (wandb, DeepSpeed, FAISS,
Pyserini, sentence-transformers, TensorBoard) are imported where they are used, so a plain
`pip install ralm` never fails at import time."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

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
    assert "ralm.eval.qa.flare" in modules and "ralm.rerank.fit" in modules  # the walk found the package
    code = BLOCKER.format(blocked=list(OPTIONAL), modules=modules)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # any other failure is a crash at import time
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(outcome) == modules
    refused = {m: r for m, r in outcome.items() if r != "ok"}
    assert sorted(refused) == sorted(ADAPTERS)
    for module, hint in ADAPTERS.items():
        assert hint in refused[module]
