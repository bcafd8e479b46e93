"""One rule for where and in what precision every stage runs (LM, reranker, dense encoder, training).

- **Device** ``auto``: under a launcher that starts one process per GPU (torchrun, ``deepspeed``,
  SLURM's ``srun``), each process takes ``cuda:LOCAL_RANK`` (``SLURM_LOCALID`` under plain srun) and makes
  it the current device (``cuda:0`` when the launcher binds one GPU to each process, so it sees only
  that one); otherwise the first CUDA device when one is visible, else the CPU. ``cuda``
  without an index follows the same local rank; ``cuda:N`` and ``cpu`` are taken as given.
- **dtype** ``auto``: bf16 on a GPU that computes it natively (compute capability 8.0 and up: A100, H100,
  RTX 30xx and later); fp32 everywhere else. ``torch.cuda.is_bf16_supported()`` also counts emulation,
  which makes V100 and T4 run bf16 slower than fp32. CPU bf16 only by request (``--dtype bf16``): on the
  AVX2 machine of bench/RESULTS.md it ran data-gen at 0.16x fp32's speed, and it is not exact.
- **dtype** ``fastest`` (the demo's, and ``ralm run``'s): ``auto`` on a GPU; on a CPU, bf16 only where the
  CPU computes it natively (``avx512_bf16`` or ``amx_bf16`` among its flags) *and* a measurement here finds
  it faster than fp32 (``bf16_is_faster``), else fp32. Machines differ: an AMX CPU ran eval 2.5-3x faster
  in bf16, an AVX2 one ran data-gen 6x slower. fp32 stays the exactness reference.
- **Lightning precision** ``auto``: ``bf16-mixed`` where dtype ``auto`` gives bf16, else ``32-true``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from typing import get_args

import torch

from ralm.config_types import Dtype
from ralm.errors import RalmInputError

DTYPES: dict[Dtype, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
"""The precisions of the vocabulary (``ralm.config_types.Dtype``), by both their names."""
RULES: tuple[Dtype, ...] = ("auto", "fastest")
"""The names of the vocabulary resolved by a rule here (module docstring); ``config`` is the LM loader's."""
assert set(get_args(Dtype)) == {*DTYPES, *RULES, "config"}, "Dtype and DTYPES name the same precisions"
SHORT_NAMES: dict[str, Dtype] = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
NATIVE_BF16_CAPABILITY = (8, 0)
"""Ampere: the first NVIDIA generation with bf16 tensor cores."""


def local_rank(env: Mapping[str, str] | None = None) -> int | None:
    """This process's GPU slot under a launcher (LOCAL_RANK, else SLURM_LOCALID); None for a plain process."""
    env = os.environ if env is None else env
    for name in ("LOCAL_RANK", "SLURM_LOCALID"):
        value = env.get(name)
        if value is not None and value != "":
            try:
                rank = int(value)
            except ValueError:
                raise RalmInputError(f"{name}={value!r}: not an integer (set by the launcher)") from None
            if rank < 0:
                raise RalmInputError(f"{name}={rank}: must be >= 0")
            return rank
    return None


def resolve_device(device: str | torch.device = "auto", env: Mapping[str, str] | None = None) -> torch.device:
    """The device of this process (module docstring); sets the current CUDA device under a launcher."""
    if isinstance(device, torch.device):
        return device
    if device != "auto" and device != "cpu" and not device.startswith("cuda"):
        raise RalmInputError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RalmInputError(f"--device {device}: no CUDA GPU is visible (use auto or cpu)")
    if device not in ("auto", "cuda"):
        try:
            return torch.device(device)
        except RuntimeError:
            raise RalmInputError(f"--device {device!r}: expected auto, cpu, cuda or cuda:N") from None
    if not torch.cuda.is_available():
        return torch.device("cpu")
    rank = local_rank(env)
    if rank is None:
        return torch.device("cuda")
    count = torch.cuda.device_count()
    if count == 1:  # per-task binding (srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank): its one GPU
        rank = 0
    elif rank >= count:
        raise RalmInputError(
            f"LOCAL_RANK={rank} but this node shows {count} CUDA device(s): start at most {count} processes "
            "per node (torchrun --nproc-per-node), or check CUDA_VISIBLE_DEVICES"
        )
    torch.cuda.set_device(rank)  # libraries that say "cuda" (NCCL, faiss, Lightning) then mean this GPU
    return torch.device("cuda", rank)


def native_bf16(device: torch.device) -> bool:
    """bf16 computed in hardware on this device (CUDA compute capability >= 8.0); False on CPU."""
    if device.type != "cuda":
        return False
    return tuple(torch.cuda.get_device_capability(device)) >= NATIVE_BF16_CAPABILITY


def resolve_dtype(dtype: str | torch.dtype = "auto", device: torch.device | None = None) -> torch.dtype:
    """``auto``: bf16 where `device` computes it natively, fp32 elsewhere; ``fastest``: `fastest_dtype`; else
    the named dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "fastest":
        dtype = fastest_dtype(device)
    if dtype == "auto":
        return torch.bfloat16 if native_bf16(device or resolve_device("auto")) else torch.float32
    if dtype not in DTYPES:
        raise RalmInputError(f"--dtype {dtype!r}: expected auto or one of {sorted(DTYPES)} (or fastest)")
    return DTYPES[dtype]


def training_precision(on_gpu: bool) -> str:
    """Lightning's precision for ``auto``: bf16-mixed on a native-bf16 GPU, else full fp32."""
    if on_gpu and native_bf16(resolve_device("auto")):
        return "bf16-mixed"
    return "32-true"


def cpu_has_native_bf16(cpuinfo: str | None = None) -> bool:
    """The CPU computes bf16 in hardware: ``avx512_bf16`` or ``amx_bf16`` among /proc/cpuinfo's flags."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return False
    flags = {flag for line in cpuinfo.splitlines() if line.startswith("flags") for flag in line.split()}
    return bool(flags & {"avx512_bf16", "amx_bf16"})


@functools.cache
def bf16_is_faster(repeats: int = 5) -> bool:
    """A small-LM-shaped matmul (2,048 x 576 by 576 x 1,536: SmolLM2-135M's MLP over a 2x1,024-token batch)
    in bf16 against fp32 on this CPU, best of `repeats` each: True when bf16 takes under 80% of fp32's time
    (a margin, so a tie keeps the exact dtype). About 0.1 s; measured once per process."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(2048, 576, generator=generator)
    b = torch.randn(576, 1536, generator=generator)

    def best(x: torch.Tensor, y: torch.Tensor) -> float:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - started)
        return min(times)

    fp32 = best(a, b)
    bf16 = best(a.bfloat16(), b.bfloat16())
    return bf16 < 0.8 * fp32


def fastest_dtype(device: torch.device | None = None) -> str:
    """``fastest`` resolved: the name of the dtype to pass as ``--dtype`` (module docstring)."""
    device = device or resolve_device("auto")
    if device.type == "cuda":
        return "auto"
    return "bf16" if cpu_has_native_bf16() and bf16_is_faster() else "fp32"
