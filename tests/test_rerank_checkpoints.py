"""Checkpoints are read as data: what `ralm train` writes needs exactly the allow-listed types beyond
torch's own, and a checkpoint that holds any other pickled object is refused, naming it, without building
it."""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path

import pytest
import torch

from ralm.errors import RalmInputError
from ralm.rerank.checkpoints import CHECKPOINT_GLOBALS, read_checkpoint
from tests.rerank_fixtures import keyword_dataset


def _ran(marker: str) -> None:
    """What the planted object would run when unpickled: it leaves a file behind."""
    Path(marker).write_text("ran")


class _Planted:
    """An object whose unpickling calls `_ran`, as a malicious checkpoint's would call anything."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (_ran, (self.marker,))


def _train(data: Path, out: Path, encoder: Path, max_steps: int, *extra: str) -> dict:
    """`ralm train` from the command line (whose options arrive as jsonargparse's constrained numbers), with
    the prior, abstention and attention dropout (and early stopping in `extra`): every option type a
    checkpoint records."""
    from ralm.train.train_command import main

    main(
        [
            *("--data", str(data), "--output", str(out), "--name", str(encoder)),
            *("--max-pair-tokens", "40", "--max-prefix-tokens", "12", "--attention-dropout", "0.1"),
            *("--batch-size", "4", "--val-fraction", "0.25", "--decision-fraction", "0.25"),
            *(
                "--max-steps",
                str(max_steps),
                "--warmup-steps",
                "1",
                "--head-lr",
                "0.002",
                "--weight-decay",
                "0",
            ),
            *("--val-every", "2", "--save-every", "2", "--keep-checkpoints", "true"),
            *("--bm25-prior", "true", "--abstain", "true", "--wandb", "off"),
            *("--accelerator", "cpu", "--devices", "1", "--enable-progress-bar", "false"),
            *extra,
        ]
    )
    return json.loads((out / "summary.json").read_text())


class _Crash(RuntimeError):
    pass


def _crashing_at(step: int):
    """``build_trainer`` with a callback that kills the run after `step` optimizer steps."""
    import lightning.pytorch as pl

    from ralm.train import fit

    build = fit.build_trainer

    class CrashAt(pl.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == step:
                raise _Crash(f"simulated crash at step {step}")

    return lambda *args: build(*args[:-1], [*args[-1], CrashAt()])


def test_what_training_writes_needs_exactly_the_allowed_types_and_resumes(
    tmp_path, real_documents, tiny_encoder_dir, monkeypatch
):
    """Each checkpoint names no global beyond torch's own and ``CHECKPOINT_GLOBALS``, reads, and a killed
    run resumes from it (Lightning's own load, weights_only by default since torch 2.6, allows the same)."""
    from ralm.train import fit

    data = keyword_dataset(real_documents, tmp_path / "data", 40, k=3, seed=5)
    _train(data, tmp_path / "done", tiny_encoder_dir, 2, "--patience", "5")
    checkpoints = sorted((tmp_path / "done").rglob("*.ckpt"))
    assert {p.name for p in checkpoints} >= {"last.ckpt", "step0-bm25.ckpt"}
    allowed = {f"{t.__module__}.{t.__qualname__}" for t in CHECKPOINT_GLOBALS}
    named = set()
    for path in checkpoints:
        named |= set(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
        checkpoint = read_checkpoint(str(path))
        assert checkpoint["hyper_parameters"]["bm25_prior"] is True
        assert "prior_weight" in checkpoint["state_dict"]
        if path.name == "last.ckpt":  # Lightning's whole state came through: callbacks, loops, RNG
            assert {"callbacks", "loops", "optimizer_states", "ralm_rng"} <= set(checkpoint)
    assert named == allowed  # each allowed type is one a real run writes, and no other is written

    with monkeypatch.context() as patch, pytest.raises(_Crash):
        patch.setattr(fit, "build_trainer", _crashing_at(3))
        _train(data, tmp_path / "killed", tiny_encoder_dir, 4)
    last = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    assert read_checkpoint(str(last))["global_step"] == 2
    assert _train(data, tmp_path / "killed", tiny_encoder_dir, 4, "--ckpt-path", "last")["steps"] == 4


def test_the_allowed_types_are_the_option_groups_constrained_numbers():
    """A new option type in a group a checkpoint records must be allowed too (or kept out of checkpoints)."""
    from ralm.train.settings import EncoderOptions, OptimOptions, RunOptions

    found = set()
    for group in (EncoderOptions, OptimOptions, RunOptions):
        for hint in typing.get_type_hints(group).values():
            for t in typing.get_args(hint) or (hint,):
                if isinstance(t, type) and issubclass(t, int | float) and t not in (int, float, bool):
                    found.add(t)
    assert found == set(CHECKPOINT_GLOBALS)


def test_a_checkpoint_holding_another_pickled_object_is_refused_not_run(tmp_path):
    marker = tmp_path / "ran.txt"
    path = tmp_path / "planted.ckpt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "hyper_parameters": {"x": _Planted(marker)}}, path)
    with pytest.raises(RalmInputError) as err:
        read_checkpoint(str(path))
    assert str(err.value).startswith(f"{path}: holds pickled objects of types ralm does not load (")
    assert f"{_ran.__module__}._ran" in str(err.value) and "weights_only=True" in str(err.value)
    assert not marker.exists()  # refused before anything was built
    torch.load(path, weights_only=False)  # what the old loader did: the planted call runs
    assert marker.read_text() == "ran"


def test_a_deepspeed_folder_holding_another_pickled_object_is_refused_not_run(tmp_path):
    """DeepSpeed's and Lightning's converters ask torch.load for weights_only=False; reading the folder
    forces weights_only=True on them, so a planted object in a shard is refused too."""
    pytest.importorskip("deepspeed")
    forced = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    marker = tmp_path / "ran.txt"
    folder = tmp_path / "best-step2.ckpt"
    shards = folder / "checkpoint"
    shards.mkdir(parents=True)
    (folder / "latest").write_text("checkpoint")
    planted = {"optimizer_state_dict": {"zero_stage": 2, "x": _Planted(marker)}, "ds_version": "0"}
    torch.save(planted, shards / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    torch.save({"module": {}, "x": _Planted(marker)}, shards / "mp_rank_00_model_states.pt")
    with pytest.raises(RalmInputError, match=r"best-step2.ckpt: holds pickled objects of types .*\._ran"):
        read_checkpoint(str(folder))
    assert not marker.exists()
    assert os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD") == forced  # the forcing ends with the read
