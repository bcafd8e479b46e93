"""A DeepSpeed ZeRO-2 checkpoint (made for real, on CPU) exports to the same folder as a DDP one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ralm.errors import RalmInputError
from ralm.rerank.checkpoints import read_checkpoint
from ralm.rerank.export import export_reranker

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a fresh DeepSpeed process (~20 s; its first run on a machine builds a CPU op)
def test_a_zero2_checkpoint_exports_with_the_weights_deepspeed_trained(tmp_path, tiny_encoder_dir):
    pytest.importorskip("deepspeed")
    folder, reference = tmp_path / "best-step2.ckpt", tmp_path / "reference.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_PORT": "29547"}
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "zero_checkpoint.py"),
            str(tiny_encoder_dir),
            str(folder),
            str(reference),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (folder / "latest").read_text().strip() == "checkpoint"  # ZeRO shards, not one state_dict file
    expected = torch.load(reference, weights_only=True)

    checkpoint = read_checkpoint(str(folder))
    assert checkpoint["hyper_parameters"]["bm25_prior"] is True
    for name, value in expected.items():
        torch.testing.assert_close(checkpoint["state_dict"][name].float(), value, rtol=0, atol=0)

    hparams = checkpoint["hyper_parameters"]
    out = export_reranker(str(folder), str(tmp_path / "reranker"), hyper_parameters=hparams, trained_on={})
    from transformers import AutoModelForSequenceClassification

    exported = AutoModelForSequenceClassification.from_pretrained(out).state_dict()
    for name, value in exported.items():
        torch.testing.assert_close(value.float(), expected[f"encoder.{name}"], rtol=0, atol=0)
    info = json.loads((Path(out) / "ralm_reranker.json").read_text())
    assert info["bm25_prior"]["weight"] == pytest.approx(float(expected["prior_weight"]))
    assert info["bm25_prior"]["abstain_bias"] == pytest.approx(float(expected["abstain_bias"]))


def test_a_folder_that_is_no_deepspeed_checkpoint_is_named(tmp_path):
    (tmp_path / "x.ckpt").mkdir()
    with pytest.raises(
        RalmInputError, match=r"x.ckpt: a folder but not a DeepSpeed checkpoint \(no 'latest'"
    ):
        read_checkpoint(str(tmp_path / "x.ckpt"))
