"""The model layer on a SIMULATED lake (`perflake demo-history`), against the simulator's
own truth: for each preset and scenario on each simulated GPU, the step `perflake model`
projects from the lake (measured, interpolated, roofline) against the step summed from
the simulated device's noise-free mean latency of every kernel call
(kernels_bench.sim.mean_latency_ns). This scores the pricing of kernel calls (how far the
interpolation and the roofline fallback are from what the device would measure), not
the end-to-end gap of a real run (benchmarks/model_e2e.py does that).

  PERFLAKE_HOME=/path/to/demo-lake .venv/bin/python benchmarks/model_sim.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from kernels_bench.hardware import hardware  # noqa: E402
from kernels_bench.sim import HOST_LAUNCH_NS, mean_latency_ns  # noqa: E402
from pipelines.config.lake import Lake  # noqa: E402
from pipelines.projection.decompose import decompose  # noqa: E402
from pipelines.projection.lookup import load_lookup  # noqa: E402
from pipelines.projection.model import project_workload  # noqa: E402
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


def main() -> int:
    rows = []
    with Frames(Lake.from_env()) as frames:
        lookups = {sku: load_lookup(frames, sku, device_kind="simulated") for sku in SKUS}
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
