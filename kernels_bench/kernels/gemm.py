"""GEMM: matmul (M x K by K x N) and batched matmul, the layer that dominates LLMs."""
from __future__ import annotations

from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import (DTYPE_BYTES, Prepared, Unsupported, compare, input_generator, randn,
                                         torch_dtype)


@dataclass(frozen=True)
class Matmul:
    family: str = "gemm"
    name: str = "matmul"
    backends: tuple[str, ...] = ("torch",)

    def _dims(self, case: Case) -> tuple[int, int, int, int]:
        p = case.p
        return int(p.get("batch", 1)), int(p["m"]), int(p["n"]), int(p["k"])

    def flops(self, case: Case) -> float:
        b, m, n, k = self._dims(case)
        return 2.0 * b * m * n * k

    def bytes(self, case: Case) -> float:
        b, m, n, k = self._dims(case)
        out_bytes = 2 if case.dtype == "fp8" else DTYPE_BYTES[case.dtype]
        return float(b * (m * k + k * n) * DTYPE_BYTES[case.dtype] + b * m * n * out_bytes)

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch

        b, m, n, k = self._dims(case)
        if case.dtype == "fp8":
            return self._prepare_fp8(case, device, m, n, k)
        dt = torch_dtype(case.dtype)
        gen = input_generator(device)
        shape_a, shape_b = ((b, m, k), (b, k, n)) if b > 1 else ((m, k), (k, n))
        a, bm = randn(shape_a, gen, device, dt), randn(shape_b, gen, device, dt)
        if device.startswith("cuda"):
            # tf32 is a math mode of fp32 tensors, so it is set per case, explicitly.
            torch.backends.cuda.matmul.allow_tf32 = case.dtype == "tf32"
        out = torch.empty(shape_a[:-1] + (n,), device=device, dtype=dt)

        def fn():
            return torch.matmul(a, bm, out=out)

        def check():
            ref = torch.matmul(a.double(), bm.double())
            return compare(fn(), ref, case.dtype)

        return Prepared(fn, check)

    def _prepare_fp8(self, case: Case, device: str, m: int, n: int, k: int) -> Prepared:
        import torch

        if not device.startswith("cuda"):
            raise Unsupported("fp8 GEMM needs a CUDA device")
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            raise Unsupported(f"fp8 GEMM needs compute capability 8.9+, device has {major}.{minor}")
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        bm = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=device)

        def fn():
            return torch._scaled_mm(a, bm, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        def check():
            ref = a.double() @ bm.double()
            return compare(fn(), ref, "fp8")

        return Prepared(fn, check)


KERNELS = (Matmul(),)
