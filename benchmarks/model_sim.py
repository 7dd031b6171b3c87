"""The model layer on a SIMULATED lake (`perflake demo-history`), against the simulator's
own truth: for each preset and scenario on each simulated GPU, the step `perflake model`
projects from the lake (measured, interpolated, roofline) against the step summed from
the simulated device's noise-free mean latency of every kernel call
(kernels_bench.sim.mean_latency_ns). This scores the pricing of kernel calls (how far the
interpolation and the roofline fallback are from what the device would measure), not
the end-to-end gap of a real run (benchmarks/model_e2e.py does that).

  PERFLAKE_HOME=/path/to/demo-lake .venv/bin/python benchmarks/model_sim.py
  PERFLAKE_HOME=/path/to/demo-lake .venv/bin/python benchmarks/model_sim.py --hide gemm attention

  PERFLAKE_HOME=/path/to/lake .venv/bin/python benchmarks/model_sim.py --hide attention --real
  PERFLAKE_HOME=/path/to/lake .venv/bin/python benchmarks/model_sim.py --cross

`--hide FAMILY...`: for each family in turn, each GPU's own measurements of it are left
out (from the measured medians and from its calibration), as on a GPU measured on other
suites only, and its calls are priced twice: with the family's efficiency from the other
simulated GPU's calibration (what `perflake model` does) and from the GPU's pooled
regime curve (before). With `--real`, on the lake's real (`gpu`) measurements instead:
there is no truth for a whole step, so each GPU's measured cases of the hidden family
are priced, against their measured medians.

`--cross`: on the lake's real measurements, each real GPU's cases that another real GPU
never ran, projected from that other GPU's calibration as `perflake project --source`
makes it (the families it never measured from a third GPU, never the target), against
their measured medians; by family and by the calibration level each
projection took (its `calibration_level`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from kernels_bench.hardware import hardware  # noqa: E402
from kernels_bench.sim import HOST_LAUNCH_NS, mean_latency_ns  # noqa: E402
from pipelines.config.lake import Lake  # noqa: E402
from pipelines.projection.decompose import decompose  # noqa: E402
from pipelines.projection.lookup import Lookup, load_lookup, newest  # noqa: E402
from pipelines.projection.model import project_workload  # noqa: E402
from pipelines.projection.roofline import calibrate  # noqa: E402
from pipelines.projection.workload import Scenario, load_workload  # noqa: E402
from pipelines.warehouse.frames import Frames  # noqa: E402

SKUS = ("H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB")
SCENARIOS = {"llama-8b": [Scenario("prefill", 1, 2048), Scenario("prefill", 4, 512), Scenario("decode", 32, 4096),
                          Scenario("decode", 32, 4096, tp=8)],
             "llama-70b": [Scenario("prefill", 1, 2048, tp=8), Scenario("decode", 64, 4096, tp=8)],
             "mixtral-8x7b": [Scenario("prefill", 1, 2048, tp=8, ep=8), Scenario("decode", 32, 4096, tp=8)]}


def truth_ns(w, s, sku: str) -> float:
    """The simulated device's mean step (collectives excluded: the simulator has no links)."""
    hw = hardware(sku)
    return sum(mean_latency_ns(hw, c.case) * c.count for c in decompose(w, s) if c.op_class != "communication")


def without(lookup: Lookup, family: str, borrow: bool) -> Lookup:
    """`lookup` as if its GPU had never measured `family`; the family's efficiency from the
    fallback GPU's calibration (`borrow`) or from the GPU's own pooled regime curve."""
    hist = lookup.history[lookup.history["family"] != family]
    fallback = lookup.fallback.as_of() if borrow and lookup.fallback else None
    cal = calibrate(newest(hist), hardware(lookup.sku), lookup.device_kind, fallback)
    return Lookup(lookup.sku, lookup.device_kind, hist, cal)


def hide(lookups: dict, families: list[str]) -> int:
    rows = []
    for family in families:
        for name, scenarios in SCENARIOS.items():
            w = load_workload(name)
            for s in scenarios:
                for sku, lookup in lookups.items():
                    if lookup.history.empty:  # an unmeasured GPU is calibrated on another already
                        continue
                    truth = truth_ns(w, s, sku)
                    row = {"hidden": family, "workload": name, "scenario": s.label, "gpu": sku,
                           "sim_truth_ms": round(truth / 1e6, 3)}
                    for label, borrow in (("borrowed", True), ("regime", False)):
                        calls, _ = project_workload(w, s, without(lookup, family, borrow))
                        calls = calls[calls["op_class"] != "communication"]
                        projected = float(calls["total_ns"].sum())
                        row[f"{label}_error_%"] = round((projected - truth) / truth * 100, 1)
                    rows.append(row)
    table = pd.DataFrame(rows)
    print(f"SIMULATED lake {Lake.from_env().root}; each family left out of each GPU's own measurements in turn; "
          f"truth = the simulator's mean latency per call; collectives left out of both")
    print(table.to_string(index=False))
    for (family, sku), g in table.groupby(["hidden", "gpu"]):
        b, r = g["borrowed_error_%"].abs(), g["regime_error_%"].abs()
        print(f"{family} hidden on {sku}: median |error| borrowed {b.median():.1f} % (max {b.max():.1f}), "
              f"regime {r.median():.1f} % (max {r.max():.1f})")
    return 0


def hide_real(families: list[str]) -> int:
    """Each real GPU's measured cases of each family, priced with the family left out of
    its calibration: borrowed from the most-measured other real GPU, or its regime curve."""
    from pipelines.projection.roofline import measured_cases, pick_source, project

    with Frames(Lake.from_env()) as frames:
        measured = {sku: measured_cases(frames, sku, device_kind="gpu") for sku in _real_skus(frames)}
        others = {sku: pick_source(frames, sku, "gpu")[0] for sku in measured if len(measured) > 1}
    print(f"REAL measurements, lake {Lake.from_env().root}: a GPU's measured cases of a family, priced with that "
          f"family left out of its own calibration, against their measured medians")
    for sku, cases in measured.items():
        for family in families:
            test, own = cases[cases["family"] == family], cases[cases["family"] != family]
            if test.empty or own.empty:
                continue
            other = others.get(sku)
            if other is None or family not in set(measured[other]["family"]):
                print(f"{family} hidden on {sku}: no other real GPU measured it")
                continue
            for label, fb in ((f"borrowed from {other}", (measured[other], hardware(other))), ("regime", None)):
                cal = calibrate(own, hardware(sku), "gpu", fb)
                p = project(test.assign(source_median_ns=float("nan")), cal, hardware(sku)).set_index("case_id")
                err = (p["projected_ns"] / test.set_index("case_id")["median_ns"] - 1) * 100
                print(f"{family} hidden on {sku} ({len(err)} cases), {label}: median |error| "
                      f"{err.abs().median():.1f} %, median error {err.median():+.1f} %, p90 |error| "
                      f"{err.abs().quantile(0.9):.1f} %")
    return 0


def cross_real() -> int:
    """Each real GPU's cases that another real GPU never ran, projected from that GPU."""
    from pipelines.projection.roofline import calibrate_source, measured_cases, project

    with Frames(Lake.from_env()) as frames:
        measured = {sku: measured_cases(frames, sku, device_kind="gpu") for sku in _real_skus(frames)}
        pairs = {(a, b): calibrate_source(frames, a, "gpu", target=b)[1] for a in measured for b in measured if a != b}
    print(f"REAL measurements, lake {Lake.from_env().root}: cases a GPU never ran, projected onto the GPU that "
          f"did from the first GPU's calibration (a third GPU's curves for the families it never measured), "
          f"against their measured medians")
    for (source, target), cal in pairs.items():
        cases = measured[target][~measured[target]["case_id"].isin(measured[source]["case_id"])]
        if cases.empty:
            continue
        p = project(cases.assign(source_median_ns=float("nan")), cal, hardware(target))
        p["error_%"] = (p["projected_ns"] / p["case_id"].map(cases.set_index("case_id")["median_ns"]) - 1) * 100
        err = p["error_%"]
        print(f"{source} -> {target}, {len(p)} cases: median |error| {err.abs().median():.1f} %, p90 |error| "
              f"{err.abs().quantile(0.9):.1f} %, within a factor 2 {err.between(-50, 100).mean():.2f}")
        by = p.assign(abs_error=err.abs()).groupby(["family", "calibration_level"])
        print(by.agg(cases=("abs_error", "size"), median_abs_error_pct=("abs_error", "median"),
                     median_error_pct=("error_%", "median")).round(1).to_string())
    return 0


def _real_skus(frames) -> list[str]:
    """The catalog GPUs the lake holds real (`gpu`) measurements of."""
    from kernels_bench.hardware import load_catalog

    catalog = load_catalog()
    skus = frames.sql("SELECT DISTINCT gpu_sku FROM perf.case_stats WHERE device_kind = 'gpu' AND status = 'ok'")
    return [sku for sku in skus["gpu_sku"] if sku in catalog and catalog[sku].device_kind == "gpu"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hide", nargs="+", metavar="FAMILY", help="leave each family out of each GPU's measurements")
    ap.add_argument("--real", action="store_true", help="with --hide: the real measurements, case by case")
    ap.add_argument("--cross", action="store_true", help="real cases one GPU never ran, projected from it")
    args = ap.parse_args()
    if args.cross:
        return cross_real()
    if args.hide and args.real:
        return hide_real(args.hide)
    rows = []
    with Frames(Lake.from_env()) as frames:
        lookups = {sku: load_lookup(frames, sku, device_kind="simulated") for sku in SKUS}
    if args.hide:
        return hide(lookups, args.hide)
    for name, scenarios in SCENARIOS.items():
        w = load_workload(name)
        for s in scenarios:
            for sku, lookup in lookups.items():
                calls, summary = project_workload(w, s, lookup)
                projected = float(calls.loc[calls["op_class"] != "communication", "total_ns"].sum())
                truth = truth_ns(w, s, sku)
                rows.append({"workload": name, "scenario": s.label, "gpu": sku,
                             "measured_%": round(summary["measured_pct"]),
                             "interp_%": round(summary["interpolated_pct"]),
                             "roofline_%": round(summary["roofline_pct"]),
                             "projected_ms": round(projected / 1e6, 3), "sim_truth_ms": round(truth / 1e6, 3),
                             "error_%": round((projected - truth) / truth * 100, 1)})
    table = pd.DataFrame(rows)
    print(f"SIMULATED lake {Lake.from_env().root}; truth = simulator's mean latency per call (its fixed cost "
          f"per kernel included, host launch {HOST_LAUNCH_NS:.0f} ns not); collectives left out of both")
    print(table.to_string(index=False))
    for sku in SKUS:
        e = table.loc[table["gpu"] == sku, "error_%"].abs()
        print(f"{sku}: median |error| {e.median():.1f} %, max {e.max():.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
