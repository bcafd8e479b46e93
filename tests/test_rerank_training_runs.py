"""Training runs end to end on CPU: resume after a crash, DDP with gloo, abstain, gradient checkpointing,
early stopping."""

# ruff: noqa: F811  (the module fixture `data_dir` is imported from rerank_fixtures and used as an argument)

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from ralm.errors import RalmInputError
from ralm.rerank.checkpoints import read_checkpoint
from ralm.rerank.inference import PredictiveReranker
from ralm.train.fit import fit_reranker
from ralm.train.settings import RunOptions
from ralm.train.train_command import main
from tests.rerank_fixtures import (
    REPO,
    _settings,
    data_dir,  # noqa: F401
)


@pytest.fixture(scope="module")
def quiet_encoder_dir(tmp_path_factory, tiny_encoder_dir) -> Path:
    """The tiny BERT without dropout: runs that split a batch differently can then agree to float
    precision."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    out = tmp_path_factory.mktemp("quiet_encoder")
    config = AutoConfig.from_pretrained(
        tiny_encoder_dir, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    AutoModel.from_pretrained(tiny_encoder_dir, config=config).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(out)
    return out


def _weights(path) -> dict[str, torch.Tensor]:
    return read_checkpoint(str(path))["state_dict"]


class _Crash(RuntimeError):
    pass


class _CrashAt(pl.Callback):
    """Simulates a killed job: dies after `step` optimizer steps, before that step's checkpoint is written."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            raise _Crash(f"simulated crash at step {self.step}")


def test_resume_after_crash_gives_the_same_weights(tmp_path, data_dir, tiny_encoder_dir):
    # dropout is on (the tiny BERT's default), and 2 micro-batches per step: both must resume exactly
    settings = _settings(tiny_encoder_dir, accumulate=2)
    straight = fit_reranker(str(data_dir), str(tmp_path / "a"), **settings, seed=3)
    with pytest.raises(_Crash):
        fit_reranker(str(data_dir), str(tmp_path / "b"), **settings, seed=3, extra_callbacks=[_CrashAt(7)])
    ckpts = tmp_path / "b" / "checkpoints"
    assert read_checkpoint(str(ckpts / "last.ckpt"))["global_step"] == 6
    resumed = fit_reranker(str(data_dir), str(tmp_path / "b"), **settings, seed=3, ckpt_path="last")
    assert resumed["steps"] == straight["steps"] == 10
    a, b = _weights(tmp_path / "a" / "checkpoints" / "last.ckpt"), _weights(ckpts / "last.ckpt")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=key)
    assert os.path.basename(straight["best_checkpoint"]) == os.path.basename(resumed["best_checkpoint"])
    assert straight["best_gain_recovered"] == pytest.approx(resumed["best_gain_recovered"], abs=1e-6)
    # the export is the best checkpoint, and the run really trained: weights moved away from the encoder's
    from transformers import AutoModel

    init = AutoModel.from_pretrained(tiny_encoder_dir).state_dict()
    trained = a["encoder.bert.embeddings.word_embeddings.weight"]
    assert not torch.allclose(init["embeddings.word_embeddings.weight"], trained)


def test_resume_refuses_a_checkpoint_of_another_model(
    tmp_path, data_dir, tiny_encoder_dir, quiet_encoder_dir
):
    fit_reranker(str(data_dir), str(tmp_path / "a"), **_settings(tiny_encoder_dir, max_steps=2), seed=0)
    ckpt = str(tmp_path / "a" / "checkpoints" / "last.ckpt")
    with pytest.raises(RalmInputError, match="encoder_name"):
        fit_reranker(
            str(data_dir), str(tmp_path / "b"), **_settings(quiet_encoder_dir, max_steps=2), ckpt_path=ckpt
        )
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(RalmInputError, match="junk.ckpt"):
        fit_reranker(
            str(data_dir),
            str(tmp_path / "b"),
            **_settings(tiny_encoder_dir),
            ckpt_path=str(tmp_path / "junk.ckpt"),
        )


@pytest.mark.slow  # three fresh Python processes import torch + Lightning: about a minute on 2 shared cores
def test_ddp_on_two_cpu_processes_matches_one_process_with_the_global_batch(
    tmp_path, data_dir, quiet_encoder_dir
):
    """2 processes x 2 prefixes (gloo all-reduce) take the same steps as 1 process x 4 prefixes."""
    common = [
        "--data",
        str(data_dir),
        "--name",
        str(quiet_encoder_dir),
        "--max-pair-tokens",
        "48",
        "--max-prefix-tokens",
        "24",
        "--val-fraction",
        "0.25",
        "--lr",
        "1e-3",
        "--warmup-steps",
        "1",
        "--max-steps",
        "4",
        "--val-every",
        "4",
        "--accelerator",
        "cpu",
        "--wandb",
        "off",
        "--enable-progress-bar",
        "false",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ralm",
            "train",
            *common,
            "--output",
            str(tmp_path / "ddp"),
            "--strategy",
            "ddp",
            "--devices",
            "2",
            "--batch-size",
            "2",
            "--val-batch-size",
            "3",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert ddp["world_size"] == 2
    main([*common, "--output", str(tmp_path / "one"), "--devices", "1", "--batch-size", "4"])
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    a, b = (
        _weights(tmp_path / "ddp" / "checkpoints" / "last.ckpt"),
        _weights(tmp_path / "one" / "checkpoints" / "last.ckpt"),
    )
    for key in a:
        if key == "encoder.classifier.bias":
            # Its true gradient is 0 (a softmax over candidates ignores a shared shift), so Adam turns
            # float noise from the different reduction order into lr-sized steps; scores ignore it too.
            continue
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=5e-5, msg=key)
    # validation sums over both processes: the same metrics as one process over the whole split
    for key in ("val/top1_agreement", "val/pick_logprob", "val/oracle_logprob"):
        assert ddp["last_validation"][key] == pytest.approx(one["last_validation"][key], abs=1e-4)
    PredictiveReranker.from_pretrained(tmp_path / "ddp" / "reranker")


def test_abstain_learns_when_the_lm_is_better_alone(tmp_path, real_documents, tiny_encoder_dir):
    """Key-word candidates help (-3) but none of them does when the prefix has no key word (no retrieval:
    -6)."""
    from tests.rerank_fixtures import keyword_rows, save_rows

    rows = keyword_rows(real_documents, 80, k=3, seed=11)
    for row in rows[::2]:  # half the prefixes: every passage hurts, the LM is best alone
        row["lm_logprobs"] = [-9.0] * len(row["lm_logprobs"])
        row["prefix"] = row["prefix"] + " nothing"
    data = save_rows(rows, tmp_path / "d")
    summary = fit_reranker(
        str(data), str(tmp_path / "o"), **_settings(tiny_encoder_dir, max_steps=4), abstain=True
    )
    reranker = PredictiveReranker.from_pretrained(summary["reranker"])
    assert reranker.abstain is True
    info = json.loads((Path(summary["reranker"]) / "ralm_reranker.json").read_text())
    assert info["abstain"] is True and info["max_length"] == 48
    # the oracle includes the empty passage: on the "hurting" half it is the no-retrieval log-prob
    val = summary["last_validation"]
    assert val["val/oracle_logprob"] > val["val/bm25_logprob"]
    assert 0.0 <= val["val/retrieval_rate"] <= 1.0


def test_gradient_checkpointing_gives_the_same_gradients(data_dir, quiet_encoder_dir):
    """Recomputing activations in the backward pass trades time for memory, never the math."""
    from ralm.rerank.model import load_tokenizer
    from ralm.train.batch import GroupCollator
    from ralm.train.dataset import GroupDataset, load_rerank_data
    from ralm.train.lit_module import RerankerModule

    data = load_rerank_data(str(data_dir), abstain=False, val_fraction=0.25, seed=0)
    groups = GroupDataset(str(data_dir), data.train_rows[:3], abstain=False)
    batch = GroupCollator(load_tokenizer(str(quiet_encoder_dir)), max_length=48, max_prefix_tokens=24)(
        [groups[i] for i in range(3)]
    )
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)  # the same fresh classifier head in both
        module = RerankerModule(str(quiet_encoder_dir), gradient_checkpointing=checkpointing)
        assert module.encoder.is_gradient_checkpointing == checkpointing
        module._loss(module(batch), batch).backward()
        grads.append({n: p.grad.clone() for n, p in module.encoder.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-5, atol=1e-7, msg=name)


def _validation_curve(output: Path) -> list[tuple[int, float]]:
    """(step, gain recovered) of every validation, as the CSV logger wrote them."""
    import csv

    rows = csv.DictReader(open(output / "logs" / "csv" / "version_0" / "metrics.csv"))
    return [(int(r["step"]), float(r["val/gain_recovered"])) for r in rows if r.get("val/gain_recovered")]


def _stop_index(values: list[float], patience: int) -> int:
    """Reference: the index of the validation after which `patience` in a row have not beaten the best."""
    best, wait = float("-inf"), 0
    for i, value in enumerate(values):
        best, wait = (value, 0) if value > best else (best, wait + 1)
        if wait >= patience:
            return i
    return len(values) - 1


def test_patience_stops_where_the_full_curve_says_and_takes_the_full_runs_steps(
    tmp_path, data_dir, tiny_encoder_dir
):
    settings = _settings(tiny_encoder_dir, max_steps=24, warmup_steps=2)
    settings["run"] = RunOptions(val_every=2, save_every=2, wandb="off")
    full = fit_reranker(str(data_dir), str(tmp_path / "full"), **settings, seed=5)
    settings["run"] = RunOptions(val_every=2, save_every=2, wandb="off", patience=1)
    early = fit_reranker(str(data_dir), str(tmp_path / "early"), **settings, seed=5)
    curve = _validation_curve(tmp_path / "full")
    stop = _stop_index([v for _, v in curve], patience=1)
    assert stop < len(curve) - 1, f"the full run's curve never stalled: {curve}"  # else this tests nothing
    early_curve = _validation_curve(tmp_path / "early")
    # the same steps as the full run up to the stop, and not one validation more
    assert [s for s, _ in early_curve] == [s for s, _ in curve[: stop + 1]]
    assert [v for _, v in early_curve] == pytest.approx([v for _, v in curve[: stop + 1]], abs=1e-6)
    assert early["steps"] == curve[stop][0] + 1 < full["steps"] == 24
    assert early["stopped_early"] and not full["stopped_early"]
    best_before_stop = max(range(stop + 1), key=lambda i: (curve[i][1], -i))  # the first of equal bests
    sel = early["decision_evidence"]["selection"]
    assert sel["step"] == curve[best_before_stop][0] + 1
