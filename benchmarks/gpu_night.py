"""What a real GPU night says beyond the validation table (issue #26, steps 3 and 4).

Reads a night folder written by `gpu_validation.py --night DIR` (its landed shards,
`nvidia-smi-*.csv` sampled every 500 ms during the calls, and `validation.json`) and
prints, as markdown:

- truth: per shard, NVML's readings in the samples (SM clock, power, the share marked
  throttled) beside nvidia-smi's samples taken in the same wall-clock window, with the
  share of those under an active clock-event reason (power cap, thermal, HW slowdown);
  the run's launch overhead; the largest GEMM's and copy's fraction of the catalog peak.
- sim: per family, the simulated device's model latency (`kernels_bench.sim`) for the
  same cases and the same SKU, against the measured medians: the simulator's error,
  uncalibrated and calibrated; with --fit, the per-family calibration that
  `kernels_bench.sim.CALIBRATION` holds.

    python benchmarks/gpu_night.py truth kernels_bench/reference/h200-2026-11-26
    python benchmarks/gpu_night.py sim kernels_bench/reference/h200-2026-11-26
    python benchmarks/gpu_night.py sim --fit kernels_bench/reference/h200-2026-11-2[67]

sim pools the cases of every night named; families whose backends differ by more than a
scale can absorb (`BACKEND_SPREAD`: attention) are fitted and reported per backend too.
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


# Families whose backends differ by more than a scale of the roofline can absorb (the
# H200: attention's math backend 7-60x slower than cuDNN's): fitted and reported per
# backend as well, and `kernels_bench.sim.CALIBRATION` holds an entry for each.
BACKEND_SPREAD = {"attention": ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math")}


def sim_cases(nights: list[Path]) -> list[tuple[str, float, float, float]]:
    """(family, measured median, model roofline term without scale or floor, calibrated
    model) for every ok case of the nights, each on its night's own SKU."""
    from kernels_bench.case import Case
    from kernels_bench.hardware import hardware
    from kernels_bench.sim import mean_latency_ns

    out = []
    for _, run, results, samples in (shard for night in nights for shard in shards(night)):
        hw = hardware(run["gpu_sku"])
        medians = samples.groupby("case_id").latency_ns.median()
        for r in results[results.status == "ok"].itertuples():
            case = Case.make(r.family, r.kernel, r.backend, r.dtype, **{k: _value(v) for k, v in r.params})
            if case.case_id != r.case_id:
                raise ValueError(f"{r.case_id}: its params rebuild another case ({case.case_id})")
            roof = mean_latency_ns(hw, case, {case.family: (1.0, 0.0)})
            measured, calibrated = float(medians[r.case_id]), mean_latency_ns(hw, case)
            out.append((r.family, measured, roof, calibrated))
            if len(BACKEND_SPREAD.get(r.family, ())) > 1:  # backends far apart: each one too
                out.append((f"{r.family}/{r.backend}", measured, roof, calibrated))
    return out


def sim_error(nights: list[Path]) -> list[str]:
    """Per family: the uncalibrated roofline model's error and the calibrated model's."""
    from kernels_bench.sim import KERNEL_FLOOR_NS

    by_family: dict[str, list[tuple[float, float]]] = {}
    for family, measured, roof, calibrated in sim_cases(nights):
        by_family.setdefault(family, []).append(((roof + KERNEL_FLOOR_NS) / measured - 1, calibrated / measured - 1))
    out = ["| family | cases | uncalibrated: median error / median abs / within 10 % "
           "| calibrated: median error / median abs / within 10 % |", "| --- | --- | --- | --- |"]
    for family, pairs in sorted(by_family.items()):
        cols = []
        for errs in zip(*pairs):
            absolute = [abs(e) for e in errs]
            cols.append(f"{statistics.median(errs):+.1%} / {statistics.median(absolute):.1%} / "
                        f"{sum(a <= 0.10 for a in absolute)} of {len(errs)}")
        out.append(f"| {family} | {len(pairs)} | {cols[0]} | {cols[1]} |")
    return out


def sim_fit(nights: list[Path], min_cases_for_floor: int = 20) -> list[str]:
    """Per family, the (scale, floor_ns) of least median absolute log error: both where
    the night has at least `min_cases_for_floor` cases, else the scale over the default
    floor (two parameters are not fitted to a handful of cases)."""
    import numpy as np

    from kernels_bench.sim import KERNEL_FLOOR_NS

    scales = np.exp(np.linspace(np.log(0.5), np.log(100.0), 1201))
    by_family: dict[str, list[tuple[float, float]]] = {}
    for family, measured, roof, _ in sim_cases(nights):
        by_family.setdefault(family, []).append((measured, roof))
    out = ["| family | cases | scale | floor ns | median abs error after |", "| --- | --- | --- | --- | --- |"]
    for family, rows in sorted(by_family.items()):
        measured, roof = (np.array(v) for v in zip(*rows))
        floors = np.arange(0.0, 20_001.0, 100.0) if len(rows) >= min_cases_for_floor else np.array([KERNEL_FLOOR_NS])
        if len(rows) < 3:
            out.append(f"| {family} | {len(rows)} | - | - | (under 3 cases: not fitted) |")
            continue
        model = scales[:, None, None] * roof[None, None, :] + floors[None, :, None]
        loss = np.median(np.abs(np.log(model / measured)), axis=2)
        a, b = np.unravel_index(np.argmin(loss), loss.shape)
        out.append(f"| {family} | {len(rows)} | {scales[a]:.2f} | {floors[b]:.0f} | {np.expm1(loss[a, b]):.1%} |")
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
    ap.add_argument("--fit", action="store_true", help="sim: fit each family's (scale, floor) instead")
    ap.add_argument("night", type=Path, nargs="+",
                    help="night folders (shards/, nvidia-smi-*.csv, validation.json); sim pools the cases of all")
    args = ap.parse_args(argv)
    for night in args.night:
        if not (night / "shards").is_dir():
            print(f"error: {night}: no shards/ folder (expected a gpu_validation.py --night folder)", file=sys.stderr)
            return 2
    if args.what == "truth":
        print("\n\n".join("\n".join(truth(night)) for night in args.night))
    else:
        print("\n".join(sim_fit(args.night) if args.fit else sim_error(args.night)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
