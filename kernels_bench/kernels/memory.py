"""Memory-bound kernels: copy, elementwise add, reduction. Bytes are compulsory traffic."""
from __future__ import annotations

from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import DTYPE_BYTES, Prepared, compare, torch_dtype


def _inputs(case: Case, device: str, count: int):
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    n = int(case.p["numel"])
    dt = torch_dtype(case.dtype)
    return [torch.randn(n, generator=gen).to(device=device, dtype=dt) for _ in range(count)]


@dataclass(frozen=True)
class Copy:
    family: str = "memory"
    name: str = "copy"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        return 0.0

    def bytes(self, case: Case) -> float:
        return 2.0 * int(case.p["numel"]) * DTYPE_BYTES[case.dtype]

    def prepare(self, case: Case, device: str) -> Prepared:
        src, dst = _inputs(case, device, 2)

        def fn():
            return dst.copy_(src)

        return Prepared(fn, lambda: compare(fn(), src.double(), case.dtype))


@dataclass(frozen=True)
class Add:
    family: str = "memory"
    name: str = "add"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        return float(int(case.p["numel"]))

    def bytes(self, case: Case) -> float:
        return 3.0 * int(case.p["numel"]) * DTYPE_BYTES[case.dtype]

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch

        x, y, out = _inputs(case, device, 3)

        def fn():
            return torch.add(x, y, out=out)

        return Prepared(fn, lambda: compare(fn(), x.double() + y.double(), case.dtype))


@dataclass(frozen=True)
class Sum:
    family: str = "memory"
    name: str = "sum"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        return float(int(case.p["numel"]))

    def bytes(self, case: Case) -> float:
        return float(int(case.p["numel"]) * DTYPE_BYTES[case.dtype])

    def prepare(self, case: Case, device: str) -> Prepared:
        (x,) = _inputs(case, device, 1)
        # A sum's error grows with n; compare against the float64 sum of the same inputs.
        return Prepared(lambda: x.sum(), lambda: compare(x.sum().reshape(1), x.double().sum().reshape(1), case.dtype))


KERNELS = (Copy(), Add(), Sum())
