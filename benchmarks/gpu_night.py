"""What a real GPU night says beyond the validation table (issue #26, steps 3 and 4).

Reads a night folder written by `gpu_validation.py --night DIR` (its landed shards,
`nvidia-smi-*.csv` sampled every 500 ms during the calls, and `validation.json`) and
prints, as markdown:

- truth: per shard, NVML's readings in the samples (SM clock, power, the share marked
  throttled) beside nvidia-smi's samples taken in the same wall-clock window, with the
  share of those under an active clock-event reason (power cap, thermal, HW slowdown);
  the run's launch overhead; the largest GEMM's and copy's fraction of the catalog peak.
- sim: per family, the simulated device's model latency (`kernels_bench.sim`) for the
  same cases and the same SKU, against the measured medians: the simulator's error.

    python benchmarks/gpu_night.py truth kernels_bench/reference/h200-2026-11-26
    python benchmarks/gpu_night.py sim kernels_bench/reference/h200-2026-11-26
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# nvidia-smi's clocks_event_reasons bits that slow the clock (idle, 0x1, does not count).
SLOWING_REASONS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal", 0x40: "HW thermal",
                   0x80: "HW power brake"}


def shards(night: Path):
    """(name, run row, case_results frame, samples frame) per landed shard of the night."""
    for d in sorted(p for p in (night / "shards").iterdir() if (p / "run.parquet").exists()):
        yield (d.name, pq.read_table(d / "run.parquet").to_pylist()[0],
               pq.read_table(d / "case_results.parquet").to_pandas(),
               pq.read_table(d / "samples.parquet").to_pandas())


def smi_rows(night: Path) -> list[dict]:
    """nvidia-smi's samples: time (UTC), SM clock MHz, power W, active reason bits."""
    rows = []
    for f in sorted(night.glob("nvidia-smi-*.csv")):
        with f.open() as fh:
            for r in csv.reader(fh, skipinitialspace=True):
                try:
                    t = dt.datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
                    rows.append({"t": t, "sm": float(r[1].split()[0]), "w": float(r[3].split()[0]),
                                 "reasons": int(r[6], 16)})
                except (ValueError, IndexError):  # the header, or a line cut off at the end of a call
                    continue
    return rows


def truth(night: Path) -> list[str]:
    smi = smi_rows(night)
    out = ["| shard | samples | NVML SM clock median / min MHz | NVML power median W | marked throttled "
           "| nvidia-smi rows in window | nvidia-smi SM clock median / min MHz | nvidia-smi power median W "
           "| nvidia-smi rows with a slowing reason | launch overhead us |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, run, _, samples in shards(night):
        win = [r for r in smi if run["started_at"] <= r["t"] <= run["finished_at"]]
        slowed = [r for r in win if r["reasons"] & sum(SLOWING_REASONS)]
        reasons = sorted({label for r in slowed for bit, label in SLOWING_REASONS.items() if r["reasons"] & bit})
        smi_cols = (f"{statistics.median(r['sm'] for r in win):.0f} / {min(r['sm'] for r in win):.0f} | "
                    f"{statistics.median(r['w'] for r in win):.0f} | "
                    f"{len(slowed) / len(win):.1%} ({', '.join(reasons) or 'none'})") if win else "- | - | -"
        out.append(f"| {name} | {len(samples)} | {samples.sm_clock_mhz.median():.0f} / {samples.sm_clock_mhz.min():.0f} "
                   f"| {samples.power_w.median():.0f} | {samples.throttled.mean():.2%} | {len(win)} | {smi_cols} "
                   f"| {run['launch_overhead_ns'] / 1e3:.1f} |")
    report = night / "validation.json"
    if report.exists():
        for kernel, peak in json.loads(report.read_text()).get("peaks", {}).items():
            if isinstance(peak, dict) and peak.get("fraction_of_peak") is not None:
                unit = "tflops" if "achieved_tflops" in peak else "gbps"
                out.append(f"\nPeak, {kernel}: {peak['case']}: {peak['achieved_' + unit]:.1f} {unit}, "
                           f"{peak['fraction_of_peak']:.1%} of the catalog's {peak['catalog_peak_' + unit]}.")
    return out


def sim_error(night: Path) -> list[str]:
    from kernels_bench.case import Case
    from kernels_bench.hardware import hardware
    from kernels_bench.sim import mean_latency_ns

    by_family: dict[str, list[float]] = {}
    for _, run, results, samples in shards(night):
        hw = hardware(run["gpu_sku"])
        medians = samples.groupby("case_id").latency_ns.median()
        for r in results[results.status == "ok"].itertuples():
            case = Case.make(r.family, r.kernel, r.backend, r.dtype, **{k: _value(v) for k, v in r.params})
            if case.case_id != r.case_id:
                raise ValueError(f"{r.case_id}: its params rebuild another case ({case.case_id})")
            by_family.setdefault(r.family, []).append(mean_latency_ns(hw, case) / medians[r.case_id] - 1)
    out = ["| family | cases | median error (model / measured - 1) | median abs error | within 10 % | range |",
           "| --- | --- | --- | --- | --- | --- |"]
    for family, errs in sorted(by_family.items()):
        absolute = [abs(e) for e in errs]
        out.append(f"| {family} | {len(errs)} | {statistics.median(errs):+.1%} | {statistics.median(absolute):.1%} "
                   f"| {sum(a <= 0.10 for a in absolute)} of {len(errs)} | {min(errs):+.0%} .. {max(errs):+.0%} |")
    return out


def _value(text: str):
    """A case parameter as the suite wrote it (params travel as strings)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["truth", "sim"])
    ap.add_argument("night", type=Path, help="a night folder (shards/, nvidia-smi-*.csv, validation.json)")
    args = ap.parse_args(argv)
    if not (args.night / "shards").is_dir():
        print(f"error: {args.night}: no shards/ folder (expected a gpu_validation.py --night folder)", file=sys.stderr)
        return 2
    print("\n".join(truth(args.night) if args.what == "truth" else sim_error(args.night)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
