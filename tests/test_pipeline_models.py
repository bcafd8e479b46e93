"""The pipeline's offline default LM is assembled from its part wheels into the cache whole or not at all:
a failed or killed assembly leaves nothing that a later run could take for the model."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

import ralm.pipeline.models as models
from ralm.errors import RalmInputError


def _fake_package(monkeypatch, tmp_path: Path, assemble) -> Path:
    """The Gemma package replaced by one whose `assemble` is given; returns the cache's gguf folder."""
    package = types.ModuleType(models.GEMMA3_PACKAGE)
    package.MODEL_NAME, package.assemble = "model.gguf", assemble
    monkeypatch.setitem(sys.modules, models.GEMMA3_PACKAGE, package)
    monkeypatch.setattr(models, "_package_dir", lambda name: tmp_path)
    monkeypatch.setenv("RALM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gguf"


def test_the_assembled_lm_appears_under_its_name_alone(monkeypatch, tmp_path):
    def assemble(path, overwrite):
        Path(path).write_bytes(b"weights")

    folder = _fake_package(monkeypatch, tmp_path, assemble)
    assert models.gemma3_gguf() == folder / "model.gguf"
    assert [p.name for p in folder.iterdir()] == ["model.gguf"]
    assert (folder / "model.gguf").read_bytes() == b"weights"


def test_a_failed_assembly_leaves_no_file_behind(monkeypatch, tmp_path):
    def assemble(path, overwrite):
        Path(path).write_bytes(b"half")
        raise ValueError("Assembled file sha256 did not match expected value")

    folder = _fake_package(monkeypatch, tmp_path, assemble)
    with pytest.raises(RalmInputError, match="could not be assembled .*sha256 did not match"):
        models.gemma3_gguf()
    assert list(folder.iterdir()) == []
