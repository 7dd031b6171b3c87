"""Kernels that misbehave on purpose, to prove the harness survives each fault:
an exception, a segfault, an allocation far beyond memory, and a hang."""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import Correctness, Prepared


@dataclass(frozen=True)
class Fault:
    name: str
    family: str = "selftest"
    backends: tuple[str, ...] = ("python",)

    def flops(self, case: Case) -> float:
        return 0.0

    def bytes(self, case: Case) -> float:
        return 0.0

    def prepare(self, case: Case, device: str) -> Prepared:
        kind = self.name.removeprefix("fault_")
        if kind == "raise":
            raise RuntimeError("selftest: the kernel raised")
        if kind == "segv":
            ctypes.string_at(0)  # reads address 0: SIGSEGV in the child
        if kind == "oom":
            import torch

            torch.empty(1 << 50, dtype=torch.uint8, device=device)  # 1 PiB
        if kind == "hang":
            time.sleep(10_000)
        return Prepared(lambda: None, lambda: Correctness(True, 0.0, 0.0, 0.0))


@dataclass(frozen=True)
class Noop:
    """Does nothing; the fastest possible case (timer overhead)."""

    family: str = "selftest"
    name: str = "noop"
    backends: tuple[str, ...] = ("python",)

    def flops(self, case: Case) -> float:
        return 0.0

    def bytes(self, case: Case) -> float:
        return 0.0

    def prepare(self, case: Case, device: str) -> Prepared:
        return Prepared(lambda: None, lambda: Correctness(True, 0.0, 0.0, 0.0))


@dataclass(frozen=True)
class KnownError:
    """Copies a vector of ones and adds `error` (default 0.5, exact in fp32) to its first
    element: the correctness check must report exactly that error, and fail."""

    family: str = "selftest"
    name: str = "known_error"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        return 0.0

    def bytes(self, case: Case) -> float:
        return 2.0 * 4 * int(case.p.get("numel", 1024))

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch

        from kernels_bench.kernels.base import compare

        x = torch.ones(int(case.p.get("numel", 1024)), dtype=torch.float32, device=device)
        error = float(case.p.get("error", 0.5))

        def fn():
            y = x.clone()
            y[0] += error
            return y

        return Prepared(fn, lambda: compare(fn(), x, "fp32"))


KERNELS = tuple(Fault(f"fault_{k}") for k in ("raise", "segv", "oom", "hang")) + (Noop(), KnownError())
