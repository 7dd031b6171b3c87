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
    python benchmarks/gpu_night.py sim --fit kernels_bench/reference/h200-2026-11-2*
    python benchmarks/gpu_night.py sim --holdout kernels_bench/reference/h200-2026-11-2*

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


def sim_cases(nights: list[Path]) -> list[tuple[str, str, float, tuple[float, float], float]]:
    """(family, shard, measured median, (compute ns, memory ns) of the model without scale
    or floor, calibrated model) for every ok case of the nights, each on its night's own
    SKU; `shard` names the night and shard, the unit a held-out check leaves out."""
    from kernels_bench.case import Case
    from kernels_bench.hardware import hardware
    from kernels_bench.sim import mean_latency_ns, roofline_terms_ns

    out = []
    for night in nights:
        for name, run, results, samples in shards(night):
            hw = hardware(run["gpu_sku"])
            medians = samples.groupby("case_id").latency_ns.median()
            for r in results[results.status == "ok"].itertuples():
                case = Case.make(r.family, r.kernel, r.backend, r.dtype, **{k: _value(v) for k, v in r.params})
                if case.case_id != r.case_id:
                    raise ValueError(f"{r.case_id}: its params rebuild another case ({case.case_id})")
                row = (f"{night.name}/{name}", float(medians[r.case_id]), roofline_terms_ns(hw, case),
                       mean_latency_ns(hw, case))
                out.append((r.family, *row))
                if len(BACKEND_SPREAD.get(r.family, ())) > 1:  # backends far apart: each one too
                    out.append((f"{r.family}/{r.backend}", *row))
    return out


def sim_error(nights: list[Path]) -> list[str]:
    """Per family: the uncalibrated roofline model's error and the calibrated model's."""
    from kernels_bench.sim import KERNEL_FLOOR_NS

    by_family: dict[str, list[tuple[float, float]]] = {}
    for family, _, measured, terms, calibrated in sim_cases(nights):
        by_family.setdefault(family, []).append(((max(terms) + KERNEL_FLOOR_NS) / measured - 1,
                                                 calibrated / measured - 1))
    out = ["| family | cases | uncalibrated: median error / median abs / within 10 % "
           "| calibrated: median error / median abs / within 10 % |", "| --- | --- | --- | --- |"]
    for family, pairs in sorted(by_family.items()):
        cols = [_summary(errs) for errs in zip(*pairs)]
        out.append(f"| {family} | {len(pairs)} | {cols[0]} | {cols[1]} |")
    return out


def _summary(errs) -> str:
    absolute = [abs(e) for e in errs]
    return (f"{statistics.median(errs):+.1%} / {statistics.median(absolute):.1%} / "
            f"{sum(a <= 0.10 for a in absolute)} of {len(errs)}")


def fit_calibration(measured, terms, min_cases_for_floor: int = 20, min_cases_per_term: int = 5):
    """The (compute scale, memory scale, floor_ns) of least median absolute log error for
    cases with these measured medians and (compute ns, memory ns) terms. Parameters are
    fitted only where the cases can tell them apart: the floor where there are at least
    `min_cases_for_floor` (else KERNEL_FLOOR_NS), two scales where at least
    `min_cases_per_term` cases are bound by each term (else one for both)."""
    import numpy as np

    from kernels_bench.sim import KERNEL_FLOOR_NS

    measured = np.asarray(measured, float)
    compute, memory = (np.asarray(v, float) for v in zip(*terms))
    scales = np.exp(np.linspace(np.log(0.5), np.log(100.0), 301))
    floors = np.arange(0.0, 20_001.0, 500.0) if len(measured) >= min_cases_for_floor else np.array([KERNEL_FLOOR_NS])
    compute_bound = int((compute >= memory).sum())
    two = min(compute_bound, len(measured) - compute_bound) >= min_cases_per_term
    best = None
    for floor in floors:
        if two:  # compute scale x memory scale x cases
            model = np.maximum(scales[:, None, None] * compute, scales[None, :, None] * memory) + floor
        else:
            model = (scales[:, None] * np.maximum(compute, memory) + floor)[:, None, :]
        loss = np.median(np.abs(np.log(model / measured)), axis=-1)
        i, j = np.unravel_index(np.argmin(loss), loss.shape)
        if best is None or loss[i, j] < best[0]:
            best = (loss[i, j], scales[i], scales[j] if two else scales[i], floor)
    return float(best[1]), float(best[2]), float(best[3])


def _grouped(nights: list[Path]) -> dict[str, list[tuple[str, float, tuple[float, float]]]]:
    by_family: dict[str, list] = {}
    for family, shard, measured, terms, _ in sim_cases(nights):
        by_family.setdefault(family, []).append((shard, measured, terms))
    return by_family


def sim_fit(nights: list[Path]) -> list[str]:
    """Per family, `fit_calibration` over every case of the nights: the entries that
    `kernels_bench.sim.CALIBRATION` holds."""
    out = ["| family | cases | compute scale | memory scale | floor ns | median abs error after |",
           "| --- | --- | --- | --- | --- | --- |"]
    for family, rows in sorted(_grouped(nights).items()):
        if len(rows) < 3:
            out.append(f"| {family} | {len(rows)} | - | - | - | (under 3 cases: not fitted) |")
            continue
        _, measured, terms = zip(*rows)
        sc, sm, floor = fit_calibration(measured, terms)
        errs = [abs((max(sc * c, sm * m) + floor) / y - 1) for y, (c, m) in zip(measured, terms)]
        out.append(f"| {family} | {len(rows)} | {sc:.2f} | {sm:.2f} | {floor:.0f} | {statistics.median(errs):.1%} |")
    return out


def holdout_errors(nights: list[Path], families: tuple[str, ...] | None = None) -> dict[str, list[float]]:
    """Per family (all, or those named), each case's error when the calibration is fitted
    on every other shard of the nights (leave one shard out): how the model projects
    cases it was not fitted on."""
    out: dict[str, list[float]] = {}
    for family, rows in _grouped(nights).items():
        if families is not None and family not in families:
            continue
        for shard in sorted({r[0] for r in rows}):
            train = [r for r in rows if r[0] != shard]
            if len(train) < 3:
                continue
            _, measured, terms = zip(*train)
            sc, sm, floor = fit_calibration(measured, terms)
            out.setdefault(family, []).extend((max(sc * c, sm * m) + floor) / y - 1
                                              for s, y, (c, m) in rows if s == shard)
    return out


def sim_holdout(nights: list[Path]) -> list[str]:
    out = ["| family | cases | held out by shard: median error / median abs / within 10 % |", "| --- | --- | --- |"]
    out += [f"| {family} | {len(errs)} | {_summary(errs)} |" for family, errs in sorted(holdout_errors(nights).items())]
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
    ap.add_argument("--fit", action="store_true",
                    help="sim: fit each family's (compute scale, memory scale, floor) instead")
    ap.add_argument("--holdout", action="store_true",
                    help="sim: each shard's error with the calibration fitted on the other shards")
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
        report = sim_fit if args.fit else sim_holdout if args.holdout else sim_error
        print("\n".join(report(args.night)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
