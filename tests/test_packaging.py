"""The install extras: every combination a user can ask for installs, FAISS's two builds never together."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAISS_BUILDS = {"faiss-cpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss-gpu"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_no_combination_of_extras_installs_two_faiss_builds():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    extras = {name: _names(reqs) for name, reqs in project["optional-dependencies"].items()}
    assert not core & FAISS_BUILDS, "core must not pin a FAISS build: the gpu extra could not co-install"
    assert extras["faiss"] & FAISS_BUILDS == {"faiss-cpu"} and extras["gpu"] & FAISS_BUILDS == {
        "faiss-gpu-cu12"
    }
    others = [name for name in extras if name not in ("faiss", "gpu")]
    for r in range(len(others) + 1):
        for chosen in itertools.combinations(others, r):
            for build in ("faiss", "gpu"):
                packages = core.union(*(extras[e] for e in (*chosen, build)))
                assert len(packages & FAISS_BUILDS) == 1, (chosen, build)
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "extras=dev,faiss" in setup and "extras=dev,gpu" in setup  # one build, by what the machine has


def test_without_faiss_the_dense_backend_names_the_extras():
    code = (
        "import sys; sys.modules['faiss'] = None\n"
        "from ralm.errors import RalmInputError\n"
        "try:\n    import ralm.retrieval.faiss_backend\nexcept RalmInputError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert "pip install 'ralm[faiss]' (CPU) or 'ralm[gpu]'" in out.stdout
