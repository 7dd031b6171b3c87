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
    python benchmarks/gpu_night.py sim --fit kernels_bench/reference/h*
    python benchmarks/gpu_night.py sim --holdout kernels_bench/reference/h*

sim pools the cases of every night named; families whose backends differ by more than a
scale can absorb (`BACKEND_SPREAD`: attention) are fitted and reported per backend too.
With nights of two GPU models of other bandwidths per SM-clock (an H200 and an H100),
the fit adds an SM-side byte rate and weighs each GPU model alike (`fit_calibration`).
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


def sim_cases(nights: list[Path]) -> list[tuple[str, str, float, tuple[float, float, float], float, str]]:
    """(family, shard, measured median, (compute ns, memory ns, SM ns) of the model without
    scale or floor, calibrated model, GPU SKU) for every ok case of the nights, each on its
    night's own SKU; `shard` names the night and shard, the unit a held-out check leaves out."""
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
                       mean_latency_ns(hw, case), hw.sku)
                out.append((r.family, *row))
                if len(BACKEND_SPREAD.get(r.family, ())) > 1:  # backends far apart: each one too
                    out.append((f"{r.family}/{r.backend}", *row))
    return out


def sim_error(nights: list[Path]) -> list[str]:
    """Per family: the uncalibrated roofline model's error and the calibrated model's."""
    from kernels_bench.sim import KERNEL_FLOOR_NS

    by_family: dict[str, list[tuple[float, float]]] = {}
    for family, _, measured, terms, calibrated, _ in sim_cases(nights):
        by_family.setdefault(family, []).append(((max(terms[:2]) + KERNEL_FLOOR_NS) / measured - 1,
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


def fit_calibration(measured, terms, min_cases_for_floor: int = 20, min_cases_per_term: int = 5,
                    sm_rate: bool = False, gpus=None) -> tuple[float, float, float, float | None]:
    """The (compute scale, memory scale, floor_ns, SM bytes per clock) of least median
    absolute log error for cases with these measured medians and `roofline_terms_ns`
    terms (compute, memory[, SM]). Parameters are fitted only where the cases can tell
    them apart: the floor where there are at least `min_cases_for_floor` (else
    KERNEL_FLOOR_NS), two scales where at least `min_cases_per_term` cases are bound by
    each term (else one for both), and the SM rate only with `sm_rate`, for cases from
    GPUs of other bandwidths per SM-clock (on one GPU model the memory and SM terms are
    the same bytes over two constants; else None: no SM bound). `gpus`: each case's GPU
    model; the loss is then the mean over GPU models of each one's median, so that a GPU
    measured on fewer cases counts as much as one measured on many."""
    import numpy as np

    from kernels_bench.sim import KERNEL_FLOOR_NS

    y = np.asarray(measured, float)
    cols = [np.asarray(v, float) for v in zip(*terms)]
    compute, memory = cols[0], cols[1]
    sm = cols[2] if len(cols) > 2 else np.zeros_like(y)
    compute_bound = int((compute >= memory).sum())
    two = min(compute_bound, len(y) - compute_bound) >= min_cases_per_term
    fit_floor = len(y) >= min_cases_for_floor
    if not sm_rate:  # the exhaustive grid of one GPU model
        scales = np.exp(np.linspace(np.log(0.5), np.log(100.0), 301))
        floors = np.arange(0.0, 20_001.0, 500.0) if fit_floor else np.array([KERNEL_FLOOR_NS])
        return _search(y, compute, memory, sm, scales, scales, floors, [None], two, gpus)
    # with the SM rate, a coarse grid and then a fine one around its best
    scales = np.exp(np.linspace(np.log(0.5), np.log(100.0), 61))
    rates = [None, *np.exp(np.linspace(np.log(1.0), np.log(64.0), 17))]  # bytes per SM per clock
    floors = np.arange(0.0, 20_001.0, 2000.0) if fit_floor else np.array([KERNEL_FLOOR_NS])
    sc, sm_scale, floor, rate = _search(y, compute, memory, sm, scales, scales, floors, rates, two, gpus)
    step = scales[1] / scales[0]

    def around(v, n=41):
        return np.exp(np.linspace(np.log(v / step ** 2), np.log(v * step ** 2), n))

    floors = np.arange(max(0.0, floor - 2000.0), floor + 2001.0, 250.0) if fit_floor else floors
    rate_step = rates[2] / rates[1]
    fine_rates = [None] if rate is None else list(np.exp(np.linspace(np.log(rate / rate_step),
                                                                     np.log(rate * rate_step), 9)))
    return _search(y, compute, memory, sm, around(sc), around(sm_scale), floors, fine_rates, two, gpus)


def _search(y, compute, memory, sm, compute_scales, memory_scales, floors, rates, two, gpus=None):
    """Grid search of `fit_calibration`: the best (compute scale, memory scale, floor, rate)."""
    import numpy as np

    groups = [slice(None)] if gpus is None else [np.asarray(gpus) == g for g in sorted(set(gpus))]
    best = None
    for rate in rates:
        sm_bound = sm / rate if rate else 0.0
        for floor in floors:
            if two:  # compute scale x memory scale x cases
                model = np.maximum(compute_scales[:, None, None] * compute, memory_scales[None, :, None] * memory)
            else:
                model = (compute_scales[:, None] * np.maximum(compute, memory))[:, None, :]
            model = np.maximum(model, sm_bound) + floor
            error = np.abs(np.log(model / y))
            loss = np.mean([np.median(error[..., g], axis=-1) for g in groups], axis=0)
            i, j = np.unravel_index(np.argmin(loss), loss.shape)
            if best is None or loss[i, j] < best[0]:
                best = (loss[i, j], compute_scales[i], memory_scales[j] if two else compute_scales[i], floor, rate)
    return float(best[1]), float(best[2]), float(best[3]), None if best[4] is None else float(best[4])


def _grouped(nights: list[Path]) -> dict[str, list[tuple[str, float, tuple[float, float, float], str]]]:
    by_family: dict[str, list] = {}
    for family, shard, measured, terms, _, sku in sim_cases(nights):
        by_family.setdefault(family, []).append((shard, measured, terms, sku))
    return by_family


def _fit(rows) -> tuple[float, float, float, float | None]:
    """`fit_calibration` over (shard, measured, terms, sku) rows, with an SM rate where
    they come from GPUs of more than one bandwidth per SM-clock."""
    from kernels_bench.hardware import hardware

    _, measured, terms, skus = zip(*rows)
    ratios = {round(h.memory_bandwidth_gbps / ((h.sm_count or 1) * (h.sm_clock_default_mhz or 1)), 3)
              for h in map(hardware, set(skus))}
    return fit_calibration(measured, terms, sm_rate=len(ratios) > 1, gpus=skus if len(set(skus)) > 1 else None)


def sim_fit(nights: list[Path]) -> list[str]:
    """Per family, `fit_calibration` over every case of the nights: the entries that
    `kernels_bench.sim.CALIBRATION` holds."""
    from kernels_bench.sim import calibrated_ns

    out = ["| family | cases | compute scale | memory scale | floor ns | SM bytes per clock | median abs error after |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for family, rows in sorted(_grouped(nights).items()):
        if len(rows) < 3:
            out.append(f"| {family} | {len(rows)} | - | - | - | - | (under 3 cases: not fitted) |")
            continue
        entry = _fit(rows)
        errs = [abs(calibrated_ns(terms, entry) / y - 1) for _, y, terms, _ in rows]
        rate = "-" if entry[3] is None else f"{entry[3]:.2f}"
        out.append(f"| {family} | {len(rows)} | {entry[0]:.2f} | {entry[1]:.2f} | {entry[2]:.0f} | {rate} "
                   f"| {statistics.median(errs):.1%} |")
    return out


def holdout_errors(nights: list[Path], families: tuple[str, ...] | None = None,
                   held_out: str | None = None) -> dict[str, list[float]]:
    """Per family (all, or those named), each case's error when the calibration is fitted
    on every other shard of the nights (leave one shard out): how the model projects
    cases it was not fitted on. `held_out`: only the shards whose name starts with it are
    held out (each in turn; the fits still use every other shard)."""
    from kernels_bench.sim import calibrated_ns

    out: dict[str, list[float]] = {}
    for family, rows in _grouped(nights).items():
        if families is not None and family not in families:
            continue
        for shard in sorted({r[0] for r in rows if held_out is None or r[0].startswith(held_out)}):
            train = [r for r in rows if r[0] != shard]
            if len(train) < 3:
                continue
            entry = _fit(train)
            out.setdefault(family, []).extend(calibrated_ns(terms, entry) / y - 1
                                              for s, y, terms, _ in rows if s == shard)
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
