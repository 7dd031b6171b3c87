"""Row-wise normalisations of LLM layers: LayerNorm, RMSNorm and softmax over the last
dimension of a (rows, hidden) activation.

Flop counts are declared per element of the input (a convention, stated so that
TFLOP/s figures can be compared; these kernels are memory-bound and judged by GB/s):
- layer_norm 8: mean 1, variance 3 (subtract, square, add), normalise 2, affine 2;
- rms_norm 4: mean of squares 2 (square, add), normalise 1, weight 1;
- softmax 5: max 1, subtract 1, exp 1, sum 1, divide 1.
Bytes are compulsory traffic: the input read, the output written, and the weight (and
bias) read once.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import (DTYPE_BYTES, Prepared, Unsupported, compare, input_generator, randn,
                                         torch_dtype)

EPS = 1e-5


def _dims(case: Case) -> tuple[int, int]:
    return int(case.p["rows"]), int(case.p["hidden"])


def _inputs(case: Case, device: str, vectors: int):
    """The activation and `vectors` per-feature vectors (weight, bias), seeded."""
    import torch

    if case.dtype in ("fp8", "tf32"):
        raise Unsupported(f"{case.kernel} in {case.dtype} is not benchmarked (fp32, bf16, fp16 are)")
    rows, hidden = _dims(case)
    dt = torch_dtype(case.dtype)
    gen = input_generator(device)
    x = randn((rows, hidden), gen, device, dt)
    # Weights near 1 and biases near 0, as a trained layer has: errors stay comparable.
    vecs = [(1.0 - i + 0.1 * randn((hidden,), gen, device, torch.float32)).to(dtype=dt) for i in range(vectors)]
    return x, vecs


@dataclass(frozen=True)
class LayerNorm:
    family: str = "norm"
    name: str = "layer_norm"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        rows, hidden = _dims(case)
        return 8.0 * rows * hidden

    def bytes(self, case: Case) -> float:
        rows, hidden = _dims(case)
        return float((2 * rows * hidden + 2 * hidden) * DTYPE_BYTES[case.dtype])

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch.nn.functional as F

        x, (w, b) = _inputs(case, device, 2)
        shape = (x.shape[-1],)

        def fn():
            return F.layer_norm(x, shape, w, b, EPS)

        def check():
            x64 = x.double()
            mean = x64.mean(-1, keepdim=True)
            var = ((x64 - mean) ** 2).mean(-1, keepdim=True)
            ref = (x64 - mean) / (var + EPS).sqrt() * w.double() + b.double()
            return compare(fn(), ref, case.dtype)

        return Prepared(fn, check)


@dataclass(frozen=True)
class RMSNorm:
    family: str = "norm"
    name: str = "rms_norm"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        rows, hidden = _dims(case)
        return 4.0 * rows * hidden

    def bytes(self, case: Case) -> float:
        rows, hidden = _dims(case)
        return float((2 * rows * hidden + hidden) * DTYPE_BYTES[case.dtype])

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch.nn.functional as F

        x, (w,) = _inputs(case, device, 1)
        shape = (x.shape[-1],)

        def fn():
            return F.rms_norm(x, shape, w, EPS)

        def check():
            x64 = x.double()
            ref = x64 / ((x64 ** 2).mean(-1, keepdim=True) + EPS).sqrt() * w.double()
            return compare(fn(), ref, case.dtype)

        return Prepared(fn, check)


@dataclass(frozen=True)
class Softmax:
    family: str = "norm"
    name: str = "softmax"
    backends: tuple[str, ...] = ("torch",)

    def flops(self, case: Case) -> float:
        rows, hidden = _dims(case)
        return 5.0 * rows * hidden

    def bytes(self, case: Case) -> float:
        rows, hidden = _dims(case)
        return float(2 * rows * hidden * DTYPE_BYTES[case.dtype])

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch

        x, _ = _inputs(case, device, 0)

        def fn():
            return torch.softmax(x, dim=-1)

        def check():
            x64 = x.double()
            e = (x64 - x64.amax(-1, keepdim=True)).exp()
            return compare(fn(), e / e.sum(-1, keepdim=True), case.dtype)

        return Prepared(fn, check)


KERNELS = (LayerNorm(), RMSNorm(), Softmax())
