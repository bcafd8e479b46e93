"""Training configs on CPU: bad configs fail before any work, the documented options parse, optional loggers,
the shipped CPU config, the global batch whatever the world size."""

# ruff: noqa: F811  (the module fixture `data_dir` is imported from rerank_fixtures and used as an argument)

from __future__ import annotations

import json

import pytest

from ralm.errors import RalmInputError
from ralm.rerank.inference import PredictiveReranker
from ralm.train.fit import fit_reranker
from ralm.train.train_command import build_parser, main
from tests.rerank_fixtures import (
    REPO,
    _settings,
    data_dir,  # noqa: F401
)


@pytest.mark.parametrize(
    "override, messages",
    [
        (["--strategy", "deepspeed_stage_2", "--accelerator", "cpu"], ["DeepSpeed needs CUDA GPUs"]),
        (["--max-prefix-tokens", "600"], ["encoder.max_prefix_tokens=600"]),
        (["--warmup-steps", "99"], ["warmup_steps=99"]),
        (["--max-epochs", "3"], ["trainer.max_epochs=3", "ralm needs 1"]),
        (["--use-distributed-sampler", "true"], ["trainer.use_distributed_sampler=True"]),
        # a type's constraint (PositiveInt), checked by the parser, in the words Python callers get
        (["--batch-size", "0"], ["--batch-size: must be > 0, got 0"]),
    ],
)
def test_bad_configs_fail_before_any_work(tmp_path, data_dir, override, messages, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "--data",
                str(data_dir),
                "--output",
                str(tmp_path / "o"),
                "--max-steps",
                "5",
                "--warmup-steps",
                "1",
                *override,
            ]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert all(message in err for message in messages), err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_parser_accepts_the_documented_options():
    parser = build_parser()
    cfg = parser.parse_args(
        ["--data", "d", "--output", "o", "--optim.loss", "kl", "--trainer.strategy", "ddp"]
    )
    assert cfg.optim.loss == "kl" and cfg.trainer.strategy == "ddp" and cfg.encoder.max_pair_tokens == 512
    with pytest.raises(SystemExit):
        parser.parse_args(["--data", "d", "--output", "o", "--optim.loss", "hinge"])


def test_optional_loggers(tmp_path, data_dir, tiny_encoder_dir, monkeypatch):
    """CSV is always written; TensorBoard asked for without the package is a clear error; wandb offline
    works."""
    import importlib.util

    settings = _settings(tiny_encoder_dir, max_steps=2)
    fit_reranker(str(data_dir), str(tmp_path / "csv"), **settings)
    metrics = next((tmp_path / "csv" / "logs" / "csv").glob("version_*/metrics.csv")).read_text()
    assert "val/gain_recovered" in metrics.splitlines()[0] and "train/loss" in metrics.splitlines()[0]
    settings["run"].tensorboard = True
    if importlib.util.find_spec("tensorboard") is None and importlib.util.find_spec("tensorboardX") is None:
        with pytest.raises(RalmInputError, match="tensorboard is not installed"):
            fit_reranker(str(data_dir), str(tmp_path / "tb"), **settings)
    settings["run"].tensorboard = False
    if importlib.util.find_spec("wandb") is not None:
        monkeypatch.setenv("WANDB_MODE", "offline")
        monkeypatch.setenv("WANDB_DIR", str(tmp_path))
        settings["run"].wandb = "on"
        fit_reranker(str(data_dir), str(tmp_path / "wb"), **settings)
        assert list((tmp_path / "wb").rglob("*.wandb"))
    else:
        settings["run"].wandb = "on"
        with pytest.raises(RalmInputError, match="wandb is not installed"):
            fit_reranker(str(data_dir), str(tmp_path / "wb"), **settings)


def test_ralm_train_from_the_shipped_cpu_config(tmp_path, data_dir, tiny_encoder_dir, capsys):
    """`ralm train --config configs/train/cpu.yaml` with overrides, tokenizing in a loader worker process."""
    from ralm.cli.main import main as ralm_main

    out = tmp_path / "out"
    ralm_main(
        [
            "train",
            "--config",
            str(REPO / "configs" / "train" / "cpu.yaml"),
            "--data",
            str(data_dir),
            "--output",
            str(out),
            "--name",
            str(tiny_encoder_dir),
            "--max-steps",
            "3",
            "--warmup-steps",
            "1",
            "--val-every",
            "3",
            "--num-workers",
            "1",
            "--enable-progress-bar",
            "false",
            "--wandb",
            "off",
        ]
    )
    printed = capsys.readouterr().out
    assert "ralm train: done" in printed and "top-1 agreement" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["config"]["loader"]["num_workers"] == 1
    assert summary["config"]["encoder"]["max_prefix_tokens"] == 64  # from the YAML
    assert (out / "checkpoints" / "last.ckpt").exists() and summary["best_checkpoint"].endswith(
        "best-step3.ckpt"
    )
    assert PredictiveReranker.from_pretrained(out / "reranker").max_prefix_tokens == 64


@pytest.mark.parametrize(
    ("global_batch", "max_micro", "world", "expected"),
    [(32, 32, 1, (32, 1)), (32, 32, 8, (4, 1)), (32, 16, 1, (16, 2)), (32, 3, 2, (2, 8)), (32, 5, 1, (4, 8))],
)
def test_the_global_batch_is_the_same_whatever_the_world_size(global_batch, max_micro, world, expected):
    from ralm.train.global_batch import split_global_batch

    micro, accumulate = split_global_batch(global_batch, max_micro, world)
    assert (
        (micro, accumulate) == expected and micro * accumulate * world == global_batch and micro <= max_micro
    )


def test_a_global_batch_that_does_not_divide_and_the_planned_world():
    from ralm.train.global_batch import planned_world_size, split_global_batch

    with pytest.raises(RalmInputError, match="global_batch_size=32 does not divide among 3 processes"):
        split_global_batch(32, 32, 3)
    assert planned_world_size({"devices": 2, "num_nodes": 2}, env={}) == 4
    assert planned_world_size({"devices": "auto"}, env={"WORLD_SIZE": "8"}) == 8
    assert planned_world_size({"devices": "0,1,2"}, env={}) == 3
