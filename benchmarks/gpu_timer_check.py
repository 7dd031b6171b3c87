"""Why does kernels_bench (cold) read lower than triton's do_bench? One GPU test (#22).

The H200 validation (NOTES-harness.md) found kernels_bench's cold median 1-19 us below
do_bench on kernels of 5-200 us. The two orders differ in one place: between the L2
flush and the start event, do_bench queues nothing, kernels_bench a spin of at least
10 us. The guess: the flush leaves L2 full of dirty lines, and a kernel that starts
right after it pays for their write-back. This script times the same callable in
do_bench's own order, written out here so that one thing changes at a time:

- `do_bench`: triton.testing.do_bench(return_mode="median"), the reference;
- `order+0`: do_bench's order re-implemented (256 MB flush, start, fn, end; the CPU
  runs ahead, one synchronize at the end); it should match `do_bench`;
- `order+spin10`, `order+spin50`: the same with a 10 or 50 us spin between the flush
  and the start event;
- `order+2xL2`: the flush buffer kernels_bench uses (twice the L2) instead of 256 MB;
- `kernels_bench`: measure_case cold median.

If `order+spin10` lands on `kernels_bench` and `order+0` on `do_bench`, the gap is the
L2 state the flush leaves behind, not launch cost. `--ncu-target` runs each case once
inside cudaProfilerStart/Stop so that `ncu --profile-from-start off --cache-control all
--clock-control none` gives a third figure: the kernels' own durations, L2 flushed by
the profiler, no events.

    python3 benchmarks/gpu_timer_check.py --out DIR/timer-check.json
    ncu --profile-from-start off --cache-control all --clock-control none \\
        --section SpeedOfLight --csv python3 benchmarks/gpu_timer_check.py --ncu-target
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from gpu_validation import FULL_CASES  # noqa: E402  (the validation's cases, by the same tuples)

REPS = 200
SPINS_NS = (10_000, 50_000)
DO_BENCH_FLUSH_BYTES = 256 << 20
_FLASH_PREFILL = FULL_CASES[-2]
# The validation's cases of 2 us to about 1 ms, where the gap was seen: copies up to 2^25
# elements, GEMMs up to 4096^3 and the 128x4096x4096 one, and GQA decode.
CASES = [c for c in FULL_CASES if c is not _FLASH_PREFILL
         and c[4].get("numel", 0) <= 1 << 25 and c[4].get("m", 0) <= 4096]
# ncu also sees the large GEMM and flash prefill (counters, not the timer question).
NCU_EXTRA = [next(c for c in FULL_CASES if c[4].get("m") == 8192), _FLASH_PREFILL]


def sleep_rate(torch) -> float:
    """Spin cycles per ns, timed behind another spin (its launch outside the interval)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rates = []
    for _ in range(3):
        torch.cuda._sleep(1_000_000)
        a.record()
        torch.cuda._sleep(1_000_000)
        b.record()
        b.synchronize()
        rates.append(1_000_000 / (a.elapsed_time(b) * 1e6))
    return max(rates)


def in_order(torch, fn, flush, spin_cycles: int, sync_each: bool = False) -> float:
    """do_bench's order: per rep flush, [spin], start, fn, end; one synchronize at the end
    (`sync_each`: after every rep, as kernels_bench does)."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    for i in range(REPS):
        flush.zero_()
        if spin_cycles:
            torch.cuda._sleep(spin_cycles)
        starts[i].record()
        fn()
        ends[i].record()
        if sync_each:
            ends[i].synchronize()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e6


def check(args) -> int:
    import torch
    from triton.testing import do_bench

    from kernels_bench import provenance
    from kernels_bench.case import Case
    from kernels_bench.kernels import kernel_for
    from kernels_bench.measure import measure_case
    from kernels_bench.stopping import StoppingRule
    from kernels_bench.telemetry import observer_for

    device = "cuda"
    rate = sleep_rate(torch)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    big = torch.empty(DO_BENCH_FLUSH_BYTES, dtype=torch.int8, device=device)
    small = torch.empty(2 * l2, dtype=torch.int8, device=device)
    rule = StoppingRule(min_samples=10, min_time_s=0.1, max_noise=0.005, timeout_s=2.0)
    info = provenance.collect(device)
    rows = []
    for f, k, b, d, p in CASES:
        case = Case.make(f, k, b, d, **p)
        fn = kernel_for(case.kernel).prepare(case, device).fn
        row = {"label": case.label, "do_bench_ns": do_bench(fn, return_mode="median") * 1e6}
        row["order+0_ns"] = in_order(torch, fn, big, 0)
        for s in SPINS_NS:
            row[f"order+spin{s // 1000}_ns"] = in_order(torch, fn, big, int(s * rate))
        row["order+2xL2_ns"] = in_order(torch, fn, small, 0)
        row["order+2xL2+spin10_ns"] = in_order(torch, fn, small, int(10_000 * rate))
        row["order+0+sync_ns"] = in_order(torch, fn, big, 0, sync_each=True)
        row["order+2xL2+sync_ns"] = in_order(torch, fn, small, 0, sync_each=True)
        out = measure_case(case, device, rule, observer_for(device), timer_mode="cold")
        row["kernels_bench_ns"] = (statistics.median(s["latency_ns"] for s in out.samples)
                                   if out.status == "ok" else None)
        rows.append(row)
        print(json.dumps(row), flush=True)
        report = {"date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  "provenance": {k: v for k, v in info.items() if k != "env"},
                  "sleep_cycles_per_ns": rate, "l2_bytes": l2, "reps": REPS, "cases": rows}
        Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print_table(report)
    return 0


def print_table(report: dict) -> None:
    cols = ["do_bench_ns", "order+0_ns", "order+spin10_ns", "order+spin50_ns", "order+2xL2_ns",
            "order+2xL2+spin10_ns", "order+0+sync_ns", "order+2xL2+sync_ns", "kernels_bench_ns"]
    print(f"spin rate {report['sleep_cycles_per_ns']:.3f} cycles/ns, L2 {report['l2_bytes'] >> 20} MiB")
    print("| case | " + " | ".join(c[:-3] + " us" for c in cols) + " |")
    print("| --- " * (len(cols) + 1) + "|")
    for r in report["cases"]:
        print(f"| {r['label']} | " + " | ".join("-" if r.get(c) is None else f"{r[c] / 1e3:.2f}" for c in cols)
              + " |")


def ncu_target() -> int:
    import torch

    from kernels_bench.case import Case
    from kernels_bench.kernels import kernel_for

    for f, k, b, d, p in CASES + NCU_EXTRA:
        case = Case.make(f, k, b, d, **p)
        fn = kernel_for(case.kernel).prepare(case, "cuda").fn
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        print(f"ncu-case {case.label}", flush=True)
        torch.cuda.profiler.start()
        fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON of the figures")
    ap.add_argument("--ncu-target", action="store_true", help="run each case once in a profiler range")
    ap.add_argument("--render", metavar="JSON", help="print the table of an earlier run")
    args = ap.parse_args(argv)
    if args.render:
        print_table(json.loads(Path(args.render).read_text()))
        return 0
    if args.ncu_target:
        return ncu_target()
    if not args.out:
        ap.error("--out is required")
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device here: this check times CUDA kernels (use --render to read a result)",
              file=sys.stderr)
        return 2
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
