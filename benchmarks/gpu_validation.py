"""Validate kernels_bench against the timers GPU engineers already trust.

For a machine with a CUDA GPU (not part of the test suite). For each case (bf16 GEMM at
8192^3 and smaller, flash attention prefill and decode, a device copy) it measures:

- kernels_bench, cold L2 (its default), `--repeats` times: medians and run-to-run drift;
- triton.testing.do_bench with its defaults (cold L2 too, return_mode="median");
- kernels_bench hot and torch.utils.benchmark's blocked_autorange (both warm L2);

and prints the agreement of medians (target: within 3 % for kernels of 20 us or more),
the drift over repeats (target: under 1 %), the GPU wall-seconds each tool spent per
case, and the fraction of the catalog peak reached by the large bf16 GEMM and the copy.
A JSON of every figure goes to --out.

    python benchmarks/gpu_validation.py --out /tmp/gpu-validation.json
    python benchmarks/gpu_validation.py --smoke --device cpu --out /tmp/v.json  # logic only

--smoke uses toy shapes and short stopping rules; on a CPU it checks the script's logic
(do_bench needs triton and CUDA and is then reported as unavailable).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

AGREEMENT_TARGET = 0.03      # |harness / reference - 1| for kernels >= MIN_AGREEMENT_NS
MIN_AGREEMENT_NS = 20_000    # under ~20 us launch and event overheads dominate any timer
DRIFT_TARGET = 0.01          # (max - min) / mean of the repeat medians

FULL_CASES = [
    ("gemm", "matmul", "torch", "bf16", dict(m=8192, n=8192, k=8192)),
    ("gemm", "matmul", "torch", "bf16", dict(m=4096, n=4096, k=4096)),
    ("gemm", "matmul", "torch", "bf16", dict(m=2048, n=2048, k=2048)),
    ("gemm", "matmul", "torch", "bf16", dict(m=128, n=4096, k=4096)),
    ("attention", "sdpa", "sdpa-flash", "bf16",
     dict(batch=4, heads=32, kv_heads=32, q_len=2048, kv_len=2048, head_dim=128, causal=True)),
    ("attention", "sdpa", "sdpa-flash", "bf16",
     dict(batch=32, heads=32, kv_heads=8, q_len=1, kv_len=8192, head_dim=128, causal=False)),
    ("memory", "copy", "torch", "bf16", dict(numel=1 << 29)),   # 1 GiB each way
    ("memory", "copy", "torch", "bf16", dict(numel=1 << 22)),   # 8 MiB: inside L2 when hot
]
SMOKE_CASES = [
    ("gemm", "matmul", "torch", "fp32", dict(m=128, n=128, k=128)),
    ("attention", "sdpa", "sdpa-math", "fp32",
     dict(batch=1, heads=4, kv_heads=2, q_len=64, kv_len=64, head_dim=32, causal=True)),
    ("memory", "copy", "torch", "fp32", dict(numel=1 << 16)),
]
# The figures compared with the catalog peak: (kernel, what, catalog field).
PEAK_CASES = {"matmul": "tflops", "copy": "gbps"}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="path of the JSON results")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N (cpu only with --smoke)")
    ap.add_argument("--repeats", type=int, default=3, help="kernels_bench repeats per case, for drift")
    ap.add_argument("--smoke", action="store_true", help="toy shapes and short rules: checks the script")
    ap.add_argument("--min-time", type=float, default=None,
                    help="kernels_bench min_time_s per measurement (default: the harness default)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Heavy imports after argument parsing: --help works on any machine.
    import torch

    from kernels_bench import provenance
    from kernels_bench.case import Case
    from kernels_bench.stopping import StoppingRule

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: no CUDA device here; use --smoke --device cpu to check the script itself", file=sys.stderr)
        return 2
    if not args.device.startswith("cuda") and not args.smoke:
        print("error: a CPU run is only a logic check: add --smoke", file=sys.stderr)
        return 2
    rule = StoppingRule(min_samples=5, min_time_s=0.05, timeout_s=2.0) if args.smoke else StoppingRule()
    if args.min_time is not None:
        rule = StoppingRule(**{**rule.__dict__, "min_time_s": args.min_time})
    info = provenance.collect(args.device)
    cases = [Case.make(f, k, b, d, **p) for f, k, b, d, p in (SMOKE_CASES if args.smoke else FULL_CASES)]
    rows = []
    for case in cases:
        print(f"measuring {case.label}", file=sys.stderr, flush=True)
        rows.append(validate_case(case, args.device, rule, args.repeats))
    peaks = peak_fractions(rows, info)
    report = {"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(sys.argv), "device": args.device, "smoke": args.smoke,
              "provenance": {k: v for k, v in info.items() if k != "env"}, "rule": rule.__dict__,
              "targets": {"agreement": AGREEMENT_TARGET, "min_agreement_ns": MIN_AGREEMENT_NS,
                          "drift": DRIFT_TARGET},
              "cases": rows, "peaks": peaks}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print_report(report)
    return 0


def validate_case(case, device: str, rule, repeats: int) -> dict:
    """Every tool's median for one case, with drift, agreement and wall-seconds."""
    from kernels_bench.kernels import kernel_for

    kernel = kernel_for(case.kernel)
    row = {"label": case.label, "case_id": case.case_id, "kernel": case.kernel,
           "flops": kernel.flops(case), "bytes": kernel.bytes(case)}
    cold = [harness(case, device, rule, "cold") for _ in range(repeats)]
    if any(r["status"] != "ok" for r in cold):
        row.update(status=cold[0]["status"], error=cold[0].get("error"))
        return row
    medians = [r["median_ns"] for r in cold]
    row.update(status="ok", correct=all(r["correct"] for r in cold), harness_cold_medians_ns=medians,
               harness_cold_median_ns=statistics.median(medians),
               drift=(max(medians) - min(medians)) / statistics.fmean(medians),
               harness_wall_s=cold[0]["wall_s"], harness_samples=cold[0]["n"])
    hot = harness(case, device, rule, "hot")
    row["harness_hot_median_ns"] = hot.get("median_ns")
    fn = kernel.prepare(case, device).fn
    row.update(do_bench(fn, device))
    row.update(torch_benchmark(fn, device))
    row["agreement_do_bench"] = _ratio(row["harness_cold_median_ns"], row.get("do_bench_median_ns"))
    row["agreement_torch_benchmark"] = _ratio(row["harness_hot_median_ns"], row.get("torch_benchmark_median_ns"))
    row["agreement_applies"] = row["harness_cold_median_ns"] >= MIN_AGREEMENT_NS
    return row


def harness(case, device: str, rule, mode: str) -> dict:
    """One kernels_bench measurement in this process (no isolation: the cases are known good)."""
    from kernels_bench.measure import measure_case
    from kernels_bench.telemetry import observer_for

    t0 = time.perf_counter()
    out = measure_case(case, device, rule, observer_for(device), timer_mode=mode)
    wall = time.perf_counter() - t0
    if out.status != "ok":
        return {"status": out.status, "error": out.error}
    lat = [s["latency_ns"] for s in out.samples]
    return {"status": "ok", "correct": out.correct, "median_ns": statistics.median(lat), "n": len(lat),
            "wall_s": wall, "stop_reason": out.stop_reason}


def do_bench(fn, device: str) -> dict:
    """triton.testing.do_bench with its defaults (warmup 25 ms, rep 100 ms, cold L2)."""
    if not device.startswith("cuda"):
        return {"do_bench": "unavailable: needs CUDA"}
    try:
        from triton.testing import do_bench as triton_do_bench
    except ImportError:
        return {"do_bench": "unavailable: triton is not installed"}
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ms = triton_do_bench(fn, return_mode="median")
    torch.cuda.synchronize()
    return {"do_bench_median_ns": ms * 1e6, "do_bench_wall_s": time.perf_counter() - t0}


def torch_benchmark(fn, device: str) -> dict:
    """torch.utils.benchmark: blocks of calls between synchronisations (warm L2)."""
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn})
    t0 = time.perf_counter()
    m = timer.blocked_autorange(min_run_time=1.0 if device.startswith("cuda") else 0.2)
    return {"torch_benchmark_median_ns": m.median * 1e9, "torch_benchmark_wall_s": time.perf_counter() - t0}


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return None if not ours or not theirs else ours / theirs - 1.0


def peak_fractions(rows: list[dict], info: dict) -> dict:
    """Achieved TFLOP/s (largest GEMM) and GB/s (largest copy) against the catalog peak
    of the detected SKU; None where the SKU is not in the catalog."""
    from kernels_bench.hardware import load_catalog

    hw = load_catalog().get(info.get("gpu_sku") or "")
    out = {"gpu_sku": info.get("gpu_sku"), "catalog_source": hw.source if hw else None}
    for kernel, unit in PEAK_CASES.items():
        ok = [r for r in rows if r["kernel"] == kernel and r.get("status") == "ok"]
        if not ok:
            continue
        big = max(ok, key=lambda r: r["flops"] if unit == "tflops" else r["bytes"])
        t = big["harness_cold_median_ns"]
        if unit == "tflops":
            achieved, peak = big["flops"] / t / 1e3, (hw.peak_tflops.get("bf16") if hw else None)
        else:
            achieved, peak = big["bytes"] / t, (hw.memory_bandwidth_gbps if hw else None)
        out[kernel] = {"case": big["label"], f"achieved_{unit}": achieved, f"catalog_peak_{unit}": peak,
                       "fraction_of_peak": achieved / peak if peak else None}
    return out


def print_report(report: dict) -> None:
    pct = lambda x: "   n/a" if x is None else f"{100 * x:+6.2f}%"  # noqa: E731
    print(f"\n{report['provenance'].get('gpu_name')} ({report['device']}), {report['date_utc']}")
    print(f"{'case':<70} {'median us':>10} {'vs do_bench':>12} {'hot vs tub':>11} {'drift':>7} "
          f"{'wall s':>7} {'do_bench s':>10}")
    failures = []
    for r in report["cases"]:
        if r.get("status") != "ok":
            print(f"{r['label']:<70} {r.get('status')}: {r.get('error')}")
            failures.append(f"{r['label']}: {r.get('status')}")
            continue
        db_wall = r.get("do_bench_wall_s")
        print(f"{r['label'][:70]:<70} {r['harness_cold_median_ns'] / 1e3:>10.2f} {pct(r['agreement_do_bench']):>12} "
              f"{pct(r['agreement_torch_benchmark']):>11} {100 * r['drift']:>6.2f}% {r['harness_wall_s']:>7.2f} "
              f"{'n/a' if db_wall is None else f'{db_wall:.2f}':>10}")
        if r["drift"] > DRIFT_TARGET:
            failures.append(f"{r['label']}: drift {100 * r['drift']:.2f}% over {100 * DRIFT_TARGET:.0f}%")
        agree = r["agreement_do_bench"]
        if r["agreement_applies"] and agree is not None and abs(agree) > AGREEMENT_TARGET:
            failures.append(f"{r['label']}: {100 * agree:+.2f}% from do_bench (target {100 * AGREEMENT_TARGET:.0f}%)")
        if not r.get("correct"):
            failures.append(f"{r['label']}: result did not match the float64 reference")
    for kernel, p in report["peaks"].items():
        if isinstance(p, dict):
            frac = p["fraction_of_peak"]
            print(f"peak {kernel}: {p['case']}: {', '.join(f'{k} {v:.1f}' for k, v in p.items() if k.startswith('achieved'))}"
                  f" = {'n/a' if frac is None else f'{100 * frac:.1f}%'} of catalog peak")
    print("\nall targets met" if not failures else "\ntargets missed:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    sys.exit(main())
