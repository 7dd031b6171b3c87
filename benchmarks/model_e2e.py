"""The model layer's error against reality (#27): run a real transformer end to end with
eager torch, and compare its measured step time with the step `perflake model` projects
from kernel measurements of the same device.

1. The workload's step is decomposed into kernel calls (pipelines/projection/decompose.py)
   and each distinct case is measured by the harness itself (kernels_bench.measure.
   measure_case: the same prepare, timer and stopping rule as a nightly sweep; on the
   CPU with the last-level cache flushed before each sample, which the sweeps skip), on
   this device, now. The medians form the lookup a lake would hold (device_kind cpu or gpu).
2. The same step runs as a model: random weights of the preset's shapes, the same ops in
   the same order (embedding, per layer RMSNorm, fused QKV GEMM, SDPA, O GEMM, residual
   add, RMSNorm, fused gate-up GEMM, SiLU-mul, down GEMM, residual add; final norm and the
   LM head on the last token). Decode attends over a KV cache of `context` tokens.
3. The error is (projected - measured) / measured.

  .venv/bin/python benchmarks/model_e2e.py                              # tiny-cpu on this CPU
  .venv/bin/python benchmarks/model_e2e.py --device cuda --preset llama-8b --prompt 2048 --context 4096 --batch 32

Results: benchmarks/NOTES-model.md. No lake is written: the kernel medians live in memory
(they are the rows `perf.case_stats` would hold for this device).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from kernels_bench.hardware import Hardware  # noqa: E402
from kernels_bench.kernels import kernel_for  # noqa: E402
from kernels_bench.measure import measure_case  # noqa: E402
from kernels_bench.stopping import StoppingRule  # noqa: E402
from kernels_bench.telemetry import Observer  # noqa: E402
from pipelines.projection.decompose import decompose  # noqa: E402
from pipelines.projection.lookup import Lookup  # noqa: E402
from pipelines.projection.model import project_workload  # noqa: E402
from pipelines.projection.workload import Scenario, Workload, load_workload  # noqa: E402

RULE = StoppingRule(min_samples=20, min_time_s=0.2, max_noise=0.02, timeout_s=3.0, max_samples=2000)


STATS = {"median": statistics.median, "min": min}


def measured_lookup(w: Workload, scenarios, device: str, sku: str, stat: str = "median") -> Lookup:
    """Every distinct case the scenarios call, measured by the harness on `device`
    (`stat` of its samples: the lake's median, or the minimum on a loaded machine)."""
    cases = {c.case.case_id: c.case for s in scenarios for c in decompose(w, s)}
    rows = []
    for cid, case in cases.items():
        # Cold caches on the CPU too: in the model every layer's weights stream from memory.
        out = measure_case(case, device, RULE, Observer(), cpu_flush=True)
        if out.status != "ok":
            raise RuntimeError(f"{case.label}: {out.status}: {out.error}")
        k = kernel_for(case.kernel)
        rows.append({"case_id": cid, "family": case.family, "kernel": case.kernel, "backend": case.backend,
                     "dtype": case.dtype, "params": list(case.params), "flops_per_call": k.flops(case),
                     "bytes_per_call": k.bytes(case),
                     "median_ns": float(STATS[stat]([s["latency_ns"] for s in out.samples])),
                     "energy_per_call_j": out.energy_per_call_j, "run_id": "model-e2e", "dt": "now",
                     "device_kind": "gpu" if device.startswith("cuda") else "cpu"})
    return Lookup(sku, rows[0]["device_kind"], pd.DataFrame(rows), None)


class Model:
    """The preset's decoder with random weights, written with the decomposition's ops."""

    def __init__(self, w: Workload, device: str):
        import torch

        from kernels_bench.kernels.base import torch_dtype

        self.w, self.device, self.dt = w, device, torch_dtype(w.dtype)
        g = torch.Generator(device="cpu").manual_seed(0)

        def p(*shape):
            return (torch.randn(*shape, generator=g) * shape[0] ** -0.5).to(device=device, dtype=self.dt)

        H, d = w.hidden, w.head_dim
        self.embed = p(w.vocab, H)
        self.layers = [{"n1": torch.ones(H, device=device, dtype=self.dt),
                        "qkv": p(H, (w.heads + 2 * w.kv_heads) * d), "o": p(w.heads * d, H),
                        "n2": torch.ones(H, device=device, dtype=self.dt),
                        "up": p(H, w.ffn_up), "down": p(w.ffn, H)} for _ in range(w.layers)]
        self.norm = torch.ones(H, device=device, dtype=self.dt)
        self.head = p(H, w.vocab)

    def step(self, ids, kv_caches=None):
        """Logits of the last token of each sequence; `kv_caches` (per layer k, v of
        shape batch x kv_heads x context x head_dim) makes it a decode step."""
        import torch
        import torch.nn.functional as F

        w, (B, T) = self.w, ids.shape
        H, d = w.hidden, w.head_dim
        x = F.embedding(ids.reshape(-1), self.embed)                         # (B*T, H)
        for i, L in enumerate(self.layers):
            h = F.rms_norm(x, (H,), L["n1"], 1e-5)
            qkv = h @ L["qkv"]
            q, k, v = qkv.split([w.heads * d, w.kv_heads * d, w.kv_heads * d], dim=-1)
            q = q.view(B, T, w.heads, d).transpose(1, 2)
            k = k.view(B, T, w.kv_heads, d).transpose(1, 2)
            v = v.view(B, T, w.kv_heads, d).transpose(1, 2)
            if kv_caches is not None:
                kc, vc = kv_caches[i]
                kc[:, :, -1:], vc[:, :, -1:] = k, v                           # the new token's slot
                k, v = kc, vc
            a = F.scaled_dot_product_attention(q, k, v, is_causal=kv_caches is None, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(B * T, w.heads * d) @ L["o"]
            h = F.rms_norm(x, (H,), L["n2"], 1e-5)
            gu = h @ L["up"]
            x = x + (F.silu(gu[:, :w.ffn]) * gu[:, w.ffn:]) @ L["down"]
        last = F.rms_norm(x.view(B, T, H)[:, -1], (H,), self.norm, 1e-5)
        return last @ self.head


def time_step(fn, device: str, stat: str = "median", min_time_s: float = 1.0, min_runs: int = 10) -> float:
    """`stat` of the wall times of `fn` in ns (synchronised on a GPU), after warm-up."""
    from kernels_bench.timing import synchronize

    for _ in range(3):
        fn()
    synchronize(device)
    times, start = [], time.monotonic()
    while len(times) < min_runs or time.monotonic() - start < min_time_s:
        t0 = time.perf_counter_ns()
        fn()
        synchronize(device)
        times.append(time.perf_counter_ns() - t0)
    return float(STATS[stat](times))


def _cpu() -> Hardware:
    """This CPU as a roofline target: its figures are never used when every case is measured."""
    return Hardware(sku="this-cpu", name="this CPU", device_kind="cpu", peak_tflops={"fp32": 0.1, "bf16": 0.1},
                    memory_bandwidth_gbps=10.0, l2_bytes=None, sm_count=None, memory_bytes=None, board_power_w=None,
                    sm_clock_default_mhz=None, source="placeholder (benchmarks/model_e2e.py)")


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny-cpu")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sku", help="catalog SKU of the GPU (default: a placeholder CPU)")
    ap.add_argument("--batch", type=int, default=1, help="prefill batch (decode uses --decode-batch)")
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--decode-batch", type=int, default=8)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--layers", type=int, help="run only this many layers (a big model on a small device)")
    ap.add_argument("--threads", type=int, default=1, help="CPU: torch threads (default 1: a shared, loaded "
                                                              "machine makes more threads spin on each other)")
    ap.add_argument("--stat", choices=sorted(STATS), default="median",
                    help="statistic of kernel samples and model runs alike (min: a loaded, shared machine)")
    ap.add_argument("--rounds", type=int, default=1, help="measure kernels then the model this many times "
                                                         "(interleaved, so both see the same load)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    if not args.device.startswith("cuda"):
        torch.set_num_threads(args.threads)
    w = load_workload(args.preset)
    if args.layers:
        w = replace(w, layers=args.layers)
    if not args.device.startswith("cuda"):
        w = replace(w, attention_backend="sdpa-math") if w.attention_backend != "sdpa-math" else w
    prefill, decode = Scenario("prefill", args.batch, args.prompt), Scenario("decode", args.decode_batch, args.context)
    model = Model(w, args.device)
    target = None if args.sku else _cpu()
    results = []
    for rnd in range(args.rounds):
        t0 = time.monotonic()
        lookup = measured_lookup(w, [prefill, decode], args.device, args.sku or "this-cpu", args.stat)
        took = time.monotonic() - t0
        with torch.inference_mode():
            for s in (prefill, decode):
                calls, summary = project_workload(w, s, lookup, target)
                ids = torch.randint(0, w.vocab, (s.batch, s.seq if s.phase == "prefill" else 1), device=args.device)
                caches = None
                if s.phase == "decode":
                    shape = (s.batch, w.kv_heads, s.seq, w.head_dim)
                    caches = [(torch.randn(shape, device=args.device, dtype=model.dt),
                               torch.randn(shape, device=args.device, dtype=model.dt)) for _ in range(w.layers)]
                measured = time_step(lambda: model.step(ids, caches), args.device, args.stat)
                projected = summary["step_ns"]
                results.append({"round": rnd, "preset": w.name, "layers": w.layers, "scenario": s.label,
                                "device": args.device, "stat": args.stat, "projected_ms": projected / 1e6,
                                "measured_ms": measured / 1e6, "error_pct": (projected - measured) / measured * 100,
                                "kernel_calls": int(calls["count"].sum()),
                                "by_class_ms": {k[:-3]: v / 1e6 for k, v in summary.items()
                                                if k.endswith("_ns") and k not in ("step_ns", "per_layer_ns") and v},
                                "measured_pct": summary["measured_pct"]})
        print(f"round {rnd + 1}: {w.name} ({w.layers} layers, {w.dtype}) on {args.device}, {args.stat}: "
              f"{len(lookup.history)} kernel cases measured in {took:.0f} s")
        for r in results[-2:]:
            print(f"  {r['scenario']:<40} projected {r['projected_ms']:9.3f} ms  measured {r['measured_ms']:9.3f} ms  "
                  f"error {r['error_pct']:+6.1f} %  ({r['kernel_calls']} kernel calls; "
                  + ", ".join(f"{k} {v:.3f}" for k, v in r["by_class_ms"].items()) + " ms)")
    for sc in (prefill, decode):
        errs = [r["error_pct"] for r in results if r["scenario"] == sc.label]
        print(f"{sc.label}: error over {len(errs)} rounds: median {statistics.median(errs):+.1f} %, "
              f"range {min(errs):+.1f} .. {max(errs):+.1f} %")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
