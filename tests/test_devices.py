"""The one device/dtype rule, on CPU, with the launcher's environment and the GPU's answers simulated.

CUDA is replaced by a stand-in (this machine has none); what is under test is ralm's rule on top of it.
"""

from __future__ import annotations

import pytest
import torch

from ralm import devices
from ralm.errors import RalmInputError


class FakeCuda:
    def __init__(self, count: int, capability: tuple[int, int]):
        self.count, self.capability, self.current = count, capability, None

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: self.capability)
        monkeypatch.setattr(torch.cuda, "set_device", lambda d: setattr(self, "current", d))
        # What the old rule asked: true on V100/T4 too (emulated bf16).
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)


def test_each_torchrun_rank_takes_its_own_gpu(monkeypatch):
    cuda = FakeCuda(8, (9, 0))
    cuda.install(monkeypatch)
    for rank in (0, 3, 7):
        env = {"LOCAL_RANK": str(rank), "RANK": str(rank + 8), "WORLD_SIZE": "16"}
        assert devices.resolve_device("auto", env) == torch.device("cuda", rank)
        assert cuda.current == rank  # the current device too, for libraries that say "cuda"
        assert devices.resolve_device("cuda", env) == torch.device("cuda", rank)
    assert devices.resolve_device("auto", {"SLURM_LOCALID": "2"}) == torch.device("cuda", 2)
    assert devices.resolve_device("cuda:5", {"LOCAL_RANK": "1"}) == torch.device("cuda", 5)  # as given
    assert devices.resolve_device("auto", {}) == torch.device("cuda")


def test_a_process_bound_to_one_gpu_takes_it_whatever_its_local_rank(monkeypatch):
    cuda = FakeCuda(1, (9, 0))  # srun --gpus-per-task=1: each rank sees only its own GPU, as cuda:0
    cuda.install(monkeypatch)
    assert (
        devices.resolve_device("auto", {"SLURM_LOCALID": "5"}) == torch.device("cuda", 0)
        and cuda.current == 0
    )


def test_a_rank_beyond_the_node_gpus_is_refused_with_the_fix(monkeypatch):
    FakeCuda(2, (8, 0)).install(monkeypatch)
    with pytest.raises(RalmInputError, match=r"LOCAL_RANK=3 .*2 CUDA device.*--nproc-per-node"):
        devices.resolve_device("auto", {"LOCAL_RANK": "3"})
    with pytest.raises(RalmInputError, match="LOCAL_RANK='x'"):
        devices.resolve_device("auto", {"LOCAL_RANK": "x"})


@pytest.mark.parametrize(
    ("capability", "dtype", "precision"),
    [
        ((7, 0), torch.float32, "32-true"),
        ((7, 5), torch.float32, "32-true"),
        ((8, 0), torch.bfloat16, "bf16-mixed"),
    ],
)
def test_bf16_only_where_the_gpu_computes_it_natively(monkeypatch, capability, dtype, precision):
    """V100 (7.0) and T4 (7.5) emulate bf16, slower than fp32; A100 (8.0) and later compute it."""
    FakeCuda(1, capability).install(monkeypatch)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("SLURM_LOCALID", raising=False)
    assert devices.resolve_dtype("auto", torch.device("cuda", 0)) == dtype
    assert devices.training_precision(on_gpu=True) == precision


def test_cpu_is_fp32_unless_asked_and_bad_names_say_what_is_allowed():
    cpu = torch.device("cpu")
    assert devices.resolve_dtype("auto", cpu) == torch.float32
    assert devices.resolve_dtype("bf16", cpu) == torch.bfloat16
    assert devices.training_precision(on_gpu=False) == "32-true"
    with pytest.raises(RalmInputError, match="expected auto or one of"):
        devices.resolve_dtype("int3", cpu)
    with pytest.raises(RalmInputError, match="expected auto, cpu, cuda or cuda:N"):
        devices.resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RalmInputError, match="no CUDA GPU is visible"):
            devices.resolve_device("cuda:1")


def test_one_dtype_vocabulary_for_every_option_and_the_device_rule(monkeypatch):
    """``--dtype``, ``--scale.dtype`` and `resolve_dtype` share one Literal: every name it lists resolves
    (config is the LM loader's) and ``fastest`` resolves as the demo resolves it."""
    import typing

    from ralm.config_types import Dtype
    from ralm.lm.options import LMOptions
    from ralm.pipeline.dtype_check import resolved_dtype
    from ralm.pipeline.scale import ScaleOptions, ScaleSettings

    assert typing.get_type_hints(LMOptions)["dtype"] == Dtype
    assert typing.get_type_hints(ScaleSettings)["dtype"] == Dtype
    assert typing.get_type_hints(ScaleOptions)["dtype"] == Dtype | None
    cpu = torch.device("cpu")
    for name in typing.get_args(Dtype):
        if name != "config":
            assert isinstance(devices.resolve_dtype(name, cpu), torch.dtype), name
    monkeypatch.setattr(devices, "fastest_dtype", lambda device=None: "bf16")
    assert devices.resolve_dtype("fastest", cpu) == torch.bfloat16
    assert resolved_dtype("fastest") == "bf16" and resolved_dtype("bfloat16") == "bf16"
    assert resolved_dtype("fp32") == "fp32" and resolved_dtype("auto") == "auto"
