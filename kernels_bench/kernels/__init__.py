"""Kernel families. Each kernel declares its backends, dtypes, cost model and how to
build a timed call plus its correctness check; nothing else."""
from __future__ import annotations

from kernels_bench.kernels.base import Kernel, Prepared, Correctness, Unsupported
from kernels_bench.kernels import gemm, memory, selftest

KERNELS: dict[str, Kernel] = {k.name: k for k in (*gemm.KERNELS, *memory.KERNELS, *selftest.KERNELS)}


def kernel_for(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; known: {sorted(KERNELS)}") from None


__all__ = ["KERNELS", "Kernel", "Prepared", "Correctness", "Unsupported", "kernel_for"]
