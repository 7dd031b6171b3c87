"""Kernel families. Each kernel declares its backends, dtypes, cost model and how to
build a timed call plus its correctness check; nothing else."""
from __future__ import annotations

from kernels_bench.kernels.base import Kernel, Prepared, Correctness, Unsupported
from kernels_bench.kernels import attention, collective, gemm, memory, norm, selftest

_ALL = (*gemm.KERNELS, *attention.KERNELS, *norm.KERNELS, *memory.KERNELS, *collective.KERNELS, *selftest.KERNELS)
KERNELS: dict[str, Kernel] = {k.name: k for k in _ALL}
if len(KERNELS) != len(_ALL):  # two kernels of one name would make a suite's `kernel:` ambiguous
    raise ImportError(f"duplicate kernel names in {[k.name for k in _ALL]}")


def kernel_for(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; known: {sorted(KERNELS)}") from None


__all__ = ["KERNELS", "Kernel", "Prepared", "Correctness", "Unsupported", "kernel_for"]
