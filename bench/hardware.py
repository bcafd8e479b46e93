"""The CPU's peak FLOP/s, estimated from `lscpu`, for the benches' "share of peak" columns.

peak = cores x clock x FLOP per cycle per core. The clock is lscpu's "CPU max MHz" when it is shown, else half
of BogoMIPS (on x86 Linux BogoMIPS is twice the base clock; VMs often show no MHz). FLOP per cycle per core
comes from the microarchitecture's vector units, by lscpu's vendor, family and flags:

| CPU | fp32 | bf16 | why |
|---|---|---|---|
| AMD family 25 (Zen 3/4) | 32 | 64 (avx512_bf16) | two 256-bit FMA pipes (a 512-bit op takes both); |
|  |  |  | a bf16 dot product does twice fp32's work |
| AMD family 26 (Zen 5) | 64 | 128 | full 512-bit datapath |
| Intel with avx512f | 64 | 128 (avx512_bf16); 1,024 (amx_bf16, AMX tiles) | two 512-bit FMA ports |
| AVX2 only | 32 | fp32's (no native bf16) | two 256-bit FMA ports |

An estimate: turbo clocks (a VM's lscpu often shows only the base clock), AVX-512 down-clocking and shared
SMT threads move it by tens of percent, so a share of the nominal peak is good to about a factor of 1.5.
`gemm_gflops` measures instead what this machine attains on one large matrix product (oneDNN through torch),
the practical ceiling of a transformer's matmuls: a share of it is the sharper number, on an idle machine.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CpuPeak:
    description: str
    cores: int
    ghz: float
    fp32_gflops: float
    bf16_gflops: float

    def peak(self, dtype: str) -> float:
        return self.bf16_gflops if dtype in ("bf16", "bfloat16", "bf16-mixed") else self.fp32_gflops


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"^{re.escape(name)}:\s*(.+)$", text, flags=re.MULTILINE)
    return match.group(1).strip() if match else None


def flop_per_cycle(vendor: str, family: int, flags: set[str]) -> tuple[int, int]:
    """(fp32, bf16) FLOP per cycle per core (module table)."""
    if "AMD" in vendor and family >= 26:
        return 64, 128
    if "AMD" in vendor:
        return 32, 64 if "avx512_bf16" in flags else 32
    if "avx512f" in flags:
        return 64, 1024 if "amx_bf16" in flags else 128 if "avx512_bf16" in flags else 64
    return 32, 32


def cpu_peak(lscpu: str | None = None) -> CpuPeak:
    """This machine's estimated peak (module docstring); `lscpu` text may be passed for a test."""
    if lscpu is None:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    vendor = _field(lscpu, "Vendor ID") or ""
    family = int(_field(lscpu, "CPU family") or 0)
    flags = set((_field(lscpu, "Flags") or "").split())
    cores = int(_field(lscpu, "CPU(s)") or 1) // int(_field(lscpu, "Thread(s) per core") or 1)
    mhz = _field(lscpu, "CPU max MHz")
    ghz = float(mhz) / 1000 if mhz else float(_field(lscpu, "BogoMIPS") or 0) / 2000
    fp32, bf16 = flop_per_cycle(vendor, family, flags)
    name = f"{_field(lscpu, 'Model name')} (family {family}), {cores} cores at {ghz:.2f} GHz"
    return CpuPeak(name, cores, ghz, cores * ghz * fp32, cores * ghz * bf16)


def gemm_gflops(dtype: str, size: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of the best of `repeats` size^3 matrix products in `dtype` (fp32 or bf16) on all threads."""
    torch_dtype = torch.bfloat16 if dtype in ("bf16", "bfloat16", "bf16-mixed") else torch.float32
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=generator).to(torch_dtype) for _ in range(2))
    a @ b  # oneDNN's first call picks and caches its kernel
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e9


if __name__ == "__main__":
    p = cpu_peak()
    print(f"{p.description}: peak fp32 {p.fp32_gflops:.0f} GFLOP/s, bf16 {p.bf16_gflops:.0f} GFLOP/s")
    print(f"measured GEMM: fp32 {gemm_gflops('fp32'):.0f} GFLOP/s, bf16 {gemm_gflops('bf16'):.0f} GFLOP/s")
