"""Memory-bound kernels: copy, elementwise add, reduction, and the activations of an LLM's
feed-forward layer. Bytes are compulsory traffic.

Activations take a (rows, hidden) activation, hidden being the FFN width F:
- silu_mul (SwiGLU, Llama/Mixtral): silu(gate) * up over a (rows, 2F) input holding gate
  and up side by side (the fused gate-up GEMM's output), written to (rows, F); flops 5
  per output element (sigmoid 3: exp, add, divide; two multiplies);
- gelu (tanh approximation, GPT-class): (rows, F) in and out; flops 8 per element.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import DTYPE_BYTES, Prepared, compare, input_generator, randn, torch_dtype


def _inputs(case: Case, device: str, count: int):
    gen = input_generator(device)
    n = int(case.p["numel"])
    dt = torch_dtype(case.dtype)
    return [randn((n,), gen, device, dt) for _ in range(count)]


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


def _act_dims(case: Case) -> tuple[int, int]:
    return int(case.p["rows"]), int(case.p["hidden"])


@dataclass(frozen=True)
class SiluMul:
    family: str = "memory"
    name: str = "silu_mul"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        rows, hidden = _act_dims(case)
        return 5.0 * rows * hidden

    def bytes(self, case: Case) -> float:
        rows, hidden = _act_dims(case)
        return 3.0 * rows * hidden * DTYPE_BYTES[case.dtype]

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch
        import torch.nn.functional as F

        rows, hidden = _act_dims(case)
        x = randn((rows, 2 * hidden), input_generator(device), device, torch_dtype(case.dtype))
        gate, up = x[:, :hidden], x[:, hidden:]

        def fn():
            return F.silu(gate) * up

        def check():
            g, u = gate.double(), up.double()
            return compare(fn(), g * torch.sigmoid(g) * u, case.dtype)

        return Prepared(fn, check)


@dataclass(frozen=True)
class Gelu:
    family: str = "memory"
    name: str = "gelu"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        rows, hidden = _act_dims(case)
        return 8.0 * rows * hidden

    def bytes(self, case: Case) -> float:
        rows, hidden = _act_dims(case)
        return 2.0 * rows * hidden * DTYPE_BYTES[case.dtype]

    def prepare(self, case: Case, device: str) -> Prepared:
        import math

        import torch
        import torch.nn.functional as F

        rows, hidden = _act_dims(case)
        x = randn((rows, hidden), input_generator(device), device, torch_dtype(case.dtype))

        def fn():
            return F.gelu(x, approximate="tanh")

        def check():
            d = x.double()
            ref = 0.5 * d * (1 + torch.tanh(math.sqrt(2 / math.pi) * (d + 0.044715 * d ** 3)))
            return compare(fn(), ref, case.dtype)

        return Prepared(fn, check)


KERNELS = (Copy(), Add(), Sum(), SiluMul(), Gelu())
