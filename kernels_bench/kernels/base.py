"""The contract every kernel fulfils."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from kernels_bench.case import Case

DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}

# Normalised max error (max |out - ref| / max |ref|) accepted per dtype. The reference is
# computed in float64 from the same (already rounded) inputs, so these bound the
# accumulation error of the kernel alone.
TOLERANCE = {"fp64": 1e-10, "fp32": 1e-4, "tf32": 5e-3, "bf16": 3e-2, "fp16": 5e-3, "fp8": 1.5e-1}


class Unsupported(Exception):
    """The case cannot run on this device (e.g. fp8 without hardware support): a skip."""


@dataclass(frozen=True)
class Correctness:
    correct: bool
    max_abs_error: float
    max_rel_error: float
    tolerance: float


@dataclass(frozen=True)
class Prepared:
    """A ready-to-time call. `fn` is the timed region; `check` runs it once and compares
    the result with a float64 reference."""

    fn: Callable[[], Any]
    check: Callable[[], Correctness]


class Kernel(Protocol):
    family: str
    name: str
    backends: tuple[str, ...]

    def flops(self, case: Case) -> float: ...

    def bytes(self, case: Case) -> float: ...

    def prepare(self, case: Case, device: str) -> Prepared: ...


def torch_dtype(name: str):
    import torch

    table = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
             "bf16": torch.bfloat16, "fp16": torch.float16}
    if name == "fp8":
        return torch.float8_e4m3fn
    try:
        return table[name]
    except KeyError:
        raise Unsupported(f"dtype {name!r} is not supported") from None


def input_generator(device: str, seed: int = 0):
    """The seeded generator a case draws its inputs from, on the device they live on."""
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def randn(shape, gen, device: str, dtype):
    """Standard normal inputs drawn on `device` in `dtype` from `gen` (`input_generator`).
    On a GPU they are drawn there: drawn on the host in fp32 and copied, the inputs of
    one attention decode case (a 2 x 17 GB KV cache) took over the 60 s a case may
    take to set up on an H200 (2026-11-27). On the CPU the values are those of before."""
    import torch

    if gen.device.type == "cpu":
        return torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    return torch.randn(shape, generator=gen, device=device, dtype=dtype)


def compare(out, ref, dtype: str) -> Correctness:
    """Normalised error of `out` against the float64 reference `ref`."""
    import torch

    out64, ref64 = out.detach().to(torch.float64), ref.detach().to(torch.float64)
    abs_err = float((out64 - ref64).abs().max())
    scale = float(ref64.abs().max()) or 1.0
    rel = abs_err / scale
    tol = TOLERANCE.get(dtype, 1e-2)
    finite = bool(torch.isfinite(out64).all())
    return Correctness(finite and rel <= tol, abs_err, rel, tol)
