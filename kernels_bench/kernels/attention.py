"""Attention: torch's scaled_dot_product_attention, one backend per case.

Parameters: batch, heads (query heads), kv_heads (< heads is GQA, one kv head per group
of heads // kv_heads query heads), q_len, kv_len, head_dim, causal. Prefill has
q_len == kv_len; decode has q_len 1 against a kv cache of kv_len.

Cost model (the FlashAttention benchmarks' convention):
- flops = 4 * batch * heads * q_len * kv_len * head_dim: two matmuls (Q K^T and P V) of
  2 * q_len * kv_len * head_dim each per query head; softmax is not counted. GQA does
  the same arithmetic per query head, so kv_heads does not enter.
- causal with q_len == kv_len counts half of that (the masked half is skipped); the
  diagonal's extra q_len/2 pairs are ignored. Causal with q_len != kv_len is not halved,
  and is skipped at run time: torch aligns the mask top-left, which is not what a decode
  step means, so such a case measures nothing a user would recognise.
- bytes = q, k, v read once and o written once (compulsory traffic, no KV reuse model).
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels_bench.case import Case
from kernels_bench.kernels.base import (DTYPE_BYTES, Prepared, Unsupported, compare, input_generator, randn,
                                         torch_dtype)

BACKENDS = ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math")
# The reference is float64 scores over a bounded slice: big enough to catch a wrong
# kernel, small enough (128 MiB) not to dwarf the case on any device.
_REFERENCE_SCORES = 1 << 24


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool

    @classmethod
    def of(cls, case: Case) -> "Shape":
        p = case.p
        heads = int(p["heads"])
        kv_heads = int(p.get("kv_heads", heads))
        if kv_heads < 1 or heads % kv_heads:
            raise ValueError(f"{case.label}: heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
        q_len = int(p["q_len"])
        return cls(int(p.get("batch", 1)), heads, kv_heads, q_len, int(p.get("kv_len", q_len)),
                   int(p["head_dim"]), _as_bool(p.get("causal", False)))


def _as_bool(v) -> bool:
    # Parameters may arrive as YAML booleans or as the strings the landing schema stores.
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")


def _select_backend(backend: str) -> None:
    """Enable exactly one SDPA backend for this process. Set per case, like tf32 for
    matmul, rather than with the `sdpa_kernel` context manager: a context manager in the
    timed call would put its Python overhead between the start event and the launch."""
    import torch

    chosen = backend.removeprefix("sdpa-")
    torch.backends.cuda.enable_flash_sdp(chosen == "flash")
    torch.backends.cuda.enable_mem_efficient_sdp(chosen == "efficient")
    torch.backends.cuda.enable_math_sdp(chosen == "math")
    torch.backends.cuda.enable_cudnn_sdp(chosen == "cudnn")


@dataclass(frozen=True)
class ScaledDotProductAttention:
    family: str = "attention"
    name: str = "sdpa"
    backends: tuple[str, ...] = BACKENDS

    def flops(self, case: Case) -> float:
        s = Shape.of(case)
        full = 4.0 * s.batch * s.heads * s.q_len * s.kv_len * s.head_dim
        return full / 2 if s.causal and s.q_len == s.kv_len else full

    def bytes(self, case: Case) -> float:
        s = Shape.of(case)
        q_and_o = 2 * s.batch * s.heads * s.q_len * s.head_dim
        k_and_v = 2 * s.batch * s.kv_heads * s.kv_len * s.head_dim
        return float((q_and_o + k_and_v) * DTYPE_BYTES[case.dtype])

    def prepare(self, case: Case, device: str) -> Prepared:
        import torch
        import torch.nn.functional as F

        s = Shape.of(case)
        if case.backend not in BACKENDS:
            raise Unsupported(f"attention backend {case.backend!r} is not one of {BACKENDS}")
        if case.dtype in ("fp8", "tf32"):
            raise Unsupported(f"attention in {case.dtype} is not benchmarked (fp32, bf16, fp16 are)")
        if s.causal and s.q_len != s.kv_len:
            raise Unsupported("causal attention with q_len != kv_len: torch's mask is top-left aligned, "
                              "which is not a decode step; benchmark decode as causal=false")
        dt = torch_dtype(case.dtype)
        gen = input_generator(device)
        q = randn((s.batch, s.heads, s.q_len, s.head_dim), gen, device, dt)
        k = randn((s.batch, s.kv_heads, s.kv_len, s.head_dim), gen, device, dt)
        v = randn((s.batch, s.kv_heads, s.kv_len, s.head_dim), gen, device, dt)
        gqa = s.kv_heads != s.heads
        if gqa and case.backend == "sdpa-efficient":
            # torch's memory-efficient kernel does not implement enable_gqa; asked alone it
            # raises a bare "Invalid backend" (seen on an H200 with torch 2.11).
            raise Unsupported("sdpa-efficient does not implement grouped-query attention "
                              f"(kv_heads {s.kv_heads} < heads {s.heads}); flash, cudnn and math do")
        if device.startswith("cuda"):
            # The math backend runs matmuls: an earlier tf32 GEMM case must not leak in.
            torch.backends.cuda.matmul.allow_tf32 = False
        _select_backend(case.backend)

        def fn():
            return F.scaled_dot_product_attention(q, k, v, is_causal=s.causal, enable_gqa=gqa)

        try:
            fn()
        except RuntimeError as e:
            # With one backend enabled, "no kernel" means this device, dtype or shape is
            # outside what that backend implements: a skip with torch's reason.
            text = str(e)
            if any(m in text for m in ("No viable backend", "No available kernel", "Invalid backend")):
                raise Unsupported(f"{case.backend} cannot run this case here: {text.splitlines()[0]}") from None
            raise

        def check():
            rows = max(1, min(s.q_len, _REFERENCE_SCORES // (s.heads // s.kv_heads * s.kv_len)))
            return compare(fn()[0, : s.heads // s.kv_heads, :rows], _reference(q, k, v, s, rows), case.dtype)

        return Prepared(fn, check)


def _reference(q, k, v, s: Shape, rows: int):
    """float64 attention of batch 0, the query heads that share kv head 0, and the first
    `rows` queries: written out (scores, mask, softmax, weighted sum) so that it shares
    no code with any SDPA backend."""
    import torch

    group = s.heads // s.kv_heads
    q64 = q[0, :group, :rows].double()
    k64, v64 = k[0, :1].double(), v[0, :1].double()
    scores = q64 @ k64.transpose(-1, -2) / s.head_dim ** 0.5
    if s.causal:
        mask = torch.ones(rows, s.kv_len, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v64


KERNELS = (ScaledDotProductAttention(),)
