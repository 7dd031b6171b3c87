"""The device a shard measures on: checked before anything is measured or written, and,
on the CPU, torch's intra-op thread count pinned.

CPU threads: torch's default intra-op pool has one thread per core. On a machine whose
cores other processes share (a CI runner, a 2-core sandbox), a multi-threaded call waits
for its slowest thread, and its samples measure the OS scheduler, not the kernel:
gemm-demo's fp32 128^3 matmul took 16 ms a call with the default pool on a loaded 2-core
machine and 48 us with one thread (benchmarks/NOTES-harness.md). The harness therefore
pins the measuring processes to a known count, 1 unless asked otherwise (`run
--cpu-threads N`, `ShardSpec.cpu_threads`), and records the count in the run's `env`
(OMP_NUM_THREADS and MKL_NUM_THREADS, the variables it sets in those processes)."""
from __future__ import annotations

import os

from kernels_bench.errors import UsageError

DEVICES = "cpu, cuda, cuda:N or sim:SKU"
DEFAULT_CPU_THREADS = 1
# The environment variables set in a measuring process on the CPU: OpenMP's and MKL's
# thread counts, both of which torch.set_num_threads also sets.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


class DeviceError(UsageError, ValueError):
    """A device (or CPU thread count) this machine cannot measure on as asked."""


def is_cpu(device: str) -> bool:
    return device == "cpu" or device.startswith("cpu:")


def check_device(device: str) -> None:
    """DeviceError, in one sentence with the way out, unless `device` can be measured on
    here: a catalog SKU for sim:SKU, a visible GPU for cuda[:N]."""
    if is_cpu(device):
        return
    if device.startswith("sim:"):
        from kernels_bench.hardware import hardware

        hardware(device.split(":", 1)[1])  # UnknownSku (a UsageError) names the catalog
        return
    if device == "cuda" or device.startswith("cuda:"):
        _check_cuda(device)
        return
    raise DeviceError(f"device {device!r}: expected {DEVICES}")


def _check_cuda(device: str) -> None:
    import torch

    try:
        index = torch.device(device).index
    except RuntimeError:
        raise DeviceError(f"device {device!r}: expected {DEVICES}") from None
    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            why = f"torch {torch.__version__} is built without CUDA"
        else:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            why = "no GPU is visible" + (f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else "")
        raise DeviceError(f"device {device!r}: this machine has no CUDA device ({why}); measure on the CPU "
                         f"(--device cpu) or on a simulated GPU (--device sim:<SKU>, e.g. {_example_sku()})")
    count = torch.cuda.device_count()
    if index is not None and index >= count:
        raise DeviceError(f"device {device!r}: {count} CUDA device{'s' if count != 1 else ''} visible "
                         f"(cuda:0{f' to cuda:{count - 1}' if count > 1 else ''})")


def _example_sku() -> str:
    from kernels_bench.hardware import load_catalog

    skus = sorted(load_catalog())
    return f"sim:{'H100-SXM5-80GB' if 'H100-SXM5-80GB' in skus else skus[0]}" if skus else "sim:<SKU>"


def check_cpu_threads(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DeviceError(f"cpu threads: need a whole number >= 1, got {n!r}")
    return n


def pin_cpu_threads(n: int) -> int:
    """In a measuring process: set OMP_NUM_THREADS and MKL_NUM_THREADS (read by OpenMP
    and MKL when torch first loads them) and torch's intra-op thread count to `n`;
    returns the count torch then reports, the one recorded."""
    check_cpu_threads(n)
    for var in THREAD_ENV:
        os.environ[var] = str(n)
    import torch

    torch.set_num_threads(n)
    return torch.get_num_threads()


def threads_env(env: dict, threads: int) -> dict:
    """The run's recorded `env` with the thread count its measuring processes used."""
    return {**env, **{var: str(threads) for var in THREAD_ENV}}
