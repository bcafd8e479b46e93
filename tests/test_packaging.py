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


# What pip printed after setup's last install on a fresh venv (scripts/setup.sh, 2026-12-02).
PIP_AFTER_PYSERINI = """\
WARNING: Location 'file:///opt/pypi-more/simple/jiter/' is ignored: it is neither a file nor a directory.
ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. \
This behaviour is the source of the following dependency conflicts.
pyserini 1.6.0 requires Cython, which is not installed.
pyserini 1.6.0 requires fastapi>=0.124, which is not installed.
pyserini 1.6.0 requires fastmcp>=2.14, which is not installed.
pyserini 1.6.0 requires flask, which is not installed.
pyserini 1.6.0 requires sentencepiece>=0.2, which is not installed.
pyserini 1.6.0 requires uvicorn>=0.38, which is not installed.
"""


def test_setup_says_in_one_line_that_pyserinis_missing_requirements_are_expected():
    """The --no-deps install of pyserini is deliberate: pip's 7-line ERROR block becomes one line that says
    so, and every other line of pip's output passes unchanged."""
    setup = (REPO / "scripts" / "setup.sh").read_text()
    function = re.search(r"^quiet_pyserini_conflicts\(\) \{\n.*?^\}\n", setup, re.M | re.S)
    assert function, "setup.sh defines quiet_pyserini_conflicts"
    assert "| quiet_pyserini_conflicts" in setup
    run = subprocess.run(
        ["bash", "-c", function.group(0) + "quiet_pyserini_conflicts"],
        input=PIP_AFTER_PYSERINI,
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.splitlines() == [
        PIP_AFTER_PYSERINI.splitlines()[0],
        "setup: pyserini's unused requirements are left out on purpose (expected, not an error): "
        "Cython fastapi>=0.124 fastmcp>=2.14 flask sentencepiece>=0.2 uvicorn>=0.38",
    ]
    other = "ERROR: Could not find a version that satisfies the requirement scipy\n"
    run = subprocess.run(
        ["bash", "-c", function.group(0) + "quiet_pyserini_conflicts"],
        input=other,
        capture_output=True,
        text=True,
    )
    assert run.stdout == other
