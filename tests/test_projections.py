"""Roofline projections: the model's pieces on small known inputs, the whole model
against the simulated device's own roofline model (the known truth), and the job over a
simulated night: calibrate on the simulated H100, project onto the H200, score against
the H200's measurements."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kernels_bench.hardware import Hardware, hardware
from pipelines.projection.roofline import (attach_measured, calibrate, error_summary, project, regime, roofline_ns)
from report_data import DT, H100, H200, sim_night


def _hw(sku: str, peaks: dict, bw: float) -> Hardware:
    return Hardware(sku=sku, name=sku, device_kind="gpu", peak_tflops=peaks, memory_bandwidth_gbps=bw, l2_bytes=None,
                    sm_count=None, memory_bytes=None, board_power_w=None, sm_clock_default_mhz=None, source="test")


A = _hw("A", {"bf16": 100.0}, 1000.0)
B = _hw("B", {"bf16": 300.0}, 1500.0)
EFF = {"compute": 0.6, "memory": 0.8}
LAUNCH = 3000.0
# (case_id, family, kernel, flops, bytes): compute-bound, memory-bound, one that flips, and the empty call.
CASES = [("c1", "gemm", "matmul", 2e12, 1e8), ("c2", "gemm", "matmul", 1e11, 1e8), ("m1", "memory", "copy", 0.0, 4e9),
         ("m2", "memory", "copy", 0.0, 1e8), ("f1", "gemm", "matmul", 2.4e11, 2e9),
         ("n0", "selftest", "noop", 0.0, 0.0)]


def _truth(hw: Hardware, flops: float, bytes_: float) -> float:
    """The synthetic hardware's time: launch + binding roof / its regime's efficiency."""
    c, m = flops / (hw.peak_tflops["bf16"] * 1e3), bytes_ / hw.memory_bandwidth_gbps
    return LAUNCH + (c / EFF["compute"] if c > m else m / EFF["memory"])


def _frame(hw: Hardware, cases=CASES) -> pd.DataFrame:
    return pd.DataFrame([{"case_id": i, "family": f, "kernel": k, "backend": "torch", "dtype": "bf16", "shape": i,
                          "flops_per_call": fl, "bytes_per_call": by, "median_ns": _truth(hw, fl, by),
                          "run_id": "r1", "dt": "2035-01-01"} for i, f, k, fl, by in cases])


def test_the_roofline_bound_is_the_slower_of_compute_and_memory():
    compute, memory = roofline_ns([2e12, 1e9], [1e9, 4e9], [1000.0, 1000.0], 2000.0)
    assert compute.tolist() == [2e6, 1e3] and memory.tolist() == [5e5, 2e6]
    assert regime(compute, memory).tolist() == ["compute", "memory"]


def test_calibration_reads_the_launch_cost_from_the_noop_and_each_case_efficiency():
    cal = calibrate(_frame(A), A, "gpu")
    assert cal.launch_ns == pytest.approx(LAUNCH) and "noop" in cal.launch_from
    eff = cal.cases["efficiency"]
    assert eff["c1"] == pytest.approx(0.6) and eff["m1"] == pytest.approx(0.8)
    assert "A: 5 cases" in cal.source


def test_a_known_model_projects_exactly_onto_other_hardware_even_where_the_binding_roof_changes():
    cal = calibrate(_frame(A), A, "gpu")
    proj = project(_frame(A), cal, B)
    truth = {i: _truth(B, fl, by) for i, _, _, fl, by in CASES}
    assert proj.set_index("case_id")["projected_ns"].to_dict() == pytest.approx(truth, rel=1e-9)
    flipped = proj.set_index("case_id").loc["f1"]  # compute-bound on A, memory-bound on B
    assert flipped["regime"] == "memory" and "curve" in flipped["calibration_level"]


def test_cases_never_measured_take_the_efficiency_curve_of_their_family():
    cal = calibrate(_frame(A, CASES[:2] + CASES[3:4] + CASES[5:]), A, "gpu")
    unseen = _frame(B, [("c3", "gemm", "matmul", 8e11, 1e8), ("m3", "memory", "copy", 0.0, 1e9)])
    proj = project(unseen, cal, B).set_index("case_id")
    assert proj.loc["c3", "calibration_level"] == "backend-dtype curve"
    assert proj.loc["c3", "projected_ns"] == pytest.approx(_truth(B, 8e11, 1e8), rel=1e-9)
    assert proj.loc["m3", "projected_ns"] == pytest.approx(_truth(B, 0.0, 1e9), rel=1e-9)


def test_a_family_beyond_its_measured_sizes_keeps_its_own_curve_not_other_families_pooled():
    """GEMMs measured small (at 0.6 of peak), attention measured large (at 0.3): a GEMM
    far larger than any measured one is priced from the GEMM curve held flat, not from
    the regime curve that pools attention's efficiency with the GEMMs'. (Pooled, the
    simulated lake's llama-8b prefill GEMMs were priced 53 % slow: benchmarks/NOTES-model.md.)"""
    cal_cases = CASES[:2] + CASES[5:] + [("a1", "attention", "sdpa", 8e12, 1e8), ("a2", "attention", "sdpa", 4e13, 1e8)]
    measured = _frame(A, cal_cases)
    attention = measured["family"] == "attention"
    measured.loc[attention, "median_ns"] = LAUNCH + measured.loc[attention, "flops_per_call"] / (100.0 * 1e3) / 0.3
    cal = calibrate(measured, A, "gpu")
    big = project(_frame(B, [("c9", "gemm", "matmul", 2e13, 1e8)]), cal, B).set_index("case_id").loc["c9"]
    assert big["calibration_level"] == "backend-dtype curve, extrapolated"
    assert big["projected_ns"] == pytest.approx(_truth(B, 2e13, 1e8), rel=1e-9)


def test_a_backend_below_its_measured_sizes_keeps_its_own_curve_not_its_familys_other_backends():
    """Attention measured with a slow backend (math, 2 % of the memory roof) at small sizes
    and a fast one (flash, 55 %) at large sizes only: a small flash call is priced from
    flash's curve held flat, not from the family's curve, which covers its size with math
    alone. (Covered first, the real H200's llama-8b flash decode call was priced at
    252 us, 1.4 % of the roof: benchmarks/NOTES-model.md.)"""
    measured = _frame(A, [("s1", "attention", "sdpa", 1e6, 1e7), ("s2", "attention", "sdpa", 4e6, 4e7),
                          ("f1", "attention", "sdpa", 1e9, 1e9), ("f2", "attention", "sdpa", 4e9, 4e9)] + CASES[5:])
    eff = {"s1": 0.02, "s2": 0.02, "f1": 0.55, "f2": 0.55}
    measured["backend"] = measured["case_id"].map({"s1": "math", "s2": "math"}).fillna("flash")
    work = measured["case_id"].isin(list(eff))
    measured.loc[work, "median_ns"] = (LAUNCH + measured.loc[work, "bytes_per_call"] / A.memory_bandwidth_gbps
                                       / measured.loc[work, "case_id"].map(eff))
    cal = calibrate(measured, A, "gpu")
    small = _frame(B, [("d1", "attention", "sdpa", 2e6, 2e7)]).assign(backend="flash")
    row = project(small, cal, B).set_index("case_id").loc["d1"]
    assert row["calibration_level"] == "backend-dtype curve, extrapolated"
    assert row["efficiency"] == pytest.approx(0.55)
    assert row["projected_ns"] == pytest.approx(LAUNCH + 2e7 / B.memory_bandwidth_gbps / 0.55, rel=1e-9)
    # A backend the GPU never ran takes the family's curve, which covers the size.
    other = project(small.assign(backend="cudnn"), cal, B).set_index("case_id").loc["d1"]
    assert other["calibration_level"] == "family-dtype curve" and other["efficiency"] == pytest.approx(0.02)


def test_a_family_a_gpu_never_measured_takes_another_gpus_curve_and_launch_not_its_regime_curve():
    """GPU A measured on attention alone (at 0.3 of peak, no noop), GPU B on GEMMs (at
    0.6) with a noop: A's GEMMs are priced from B's GEMM curve at B's measured launch
    cost, exactly A's truth; without B, from A's compute regime curve, i.e. attention's
    efficiency (the real H100's attention shards priced llama-8b's decode at 44.9 ms)."""
    attention = _frame(A, [("a1", "attention", "sdpa", 8e12, 1e8), ("a2", "attention", "sdpa", 4e13, 1e8)])
    attention["median_ns"] = LAUNCH + attention["flops_per_call"] / (100.0 * 1e3) / 0.3
    gemm = _frame(A, [("c3", "gemm", "matmul", 8e11, 1e8)])
    alone = calibrate(attention, A, "gpu")
    filled = calibrate(attention, A, "gpu", fallback=(_frame(B, CASES[:2] + CASES[5:]), B))
    assert filled.launch_ns == pytest.approx(LAUNCH) and filled.launch_from == "median of 1 noop case(s) on B"
    assert "efficiency of gemm from B (2 cases" in filled.source
    assert filled.cases["efficiency"]["a1"] == pytest.approx(0.3)  # A's own cases keep their own
    row = project(gemm, filled, A).set_index("case_id").loc["c3"]
    assert row["calibration_level"] == "backend-dtype curve"
    assert row["projected_ns"] == pytest.approx(_truth(A, 8e11, 1e8), rel=1e-9)
    # A fallback with nothing to calibrate from (the other GPU's noop alone) changes nothing.
    assert calibrate(attention, A, "gpu", fallback=(_frame(B, CASES[5:]), B)).source == alone.source
    before = project(gemm, alone, A).set_index("case_id").loc["c3"]
    assert before["calibration_level"].startswith("regime curve") and before["projected_ns"] > 1.5 * row["projected_ns"]


def test_a_dtype_the_target_has_no_peak_for_is_not_projected_and_says_why():
    h100 = hardware(H100)
    src = pd.DataFrame([{"case_id": "f8", "family": "gemm", "kernel": "matmul", "backend": "torch", "dtype": "fp8",
                         "shape": "m=n=k=8192", "flops_per_call": 2 * 8192.0 ** 3, "bytes_per_call": 3 * 8192.0 ** 2,
                         "median_ns": 1.2e6, "run_id": "r", "dt": "d"}])
    row = project(src, calibrate(src, h100, "gpu"), hardware("A100-SXM4-80GB")).iloc[0]
    assert math.isnan(row["projected_ns"]) and "no fp8 peak" in row["note"]


def test_errors_are_signed_percent_of_the_measured_and_summarised_per_family():
    proj = pd.DataFrame({"case_id": ["a", "b", "c"], "family": ["gemm", "gemm", "norm"],
                         "projected_ns": [110.0, 90.0, 100.0]})
    scored = attach_measured(proj, pd.DataFrame({"case_id": ["a", "b"], "median_ns": [100.0, 100.0],
                                                 "run_id": "r", "dt": "d"}))
    assert scored["error_pct"].tolist()[:2] == pytest.approx([10.0, -10.0]) and math.isnan(scored["error_pct"][2])
    s = error_summary(scored).set_index("family")
    assert s.loc["gemm", "median_abs_error_pct"] == pytest.approx(10.0) and s.loc["norm", "measured"] == 0
    assert s.loc["all", "projected"] == 3 and s.loc["all", "measured"] == 2


@pytest.mark.parametrize("target", [H200, "B200-SXM-180GB"])
def test_projecting_the_simulated_h100_onto_another_simulated_gpu_is_within_15_percent(target):
    """Noise-free: the simulator's own mean latency is the truth on both GPUs."""
    from kernels_bench.kernels import kernel_for
    from kernels_bench.sim import mean_latency_ns
    from kernels_bench.suite import load_suite

    cases = [pc.case for s in ("roofline", "llm-gemm", "memory", "norm", "attention")
             for pc in load_suite(s).cases if not pc.skip_reason]

    def frame(sku):
        hw = hardware(sku)
        return pd.DataFrame([{"case_id": c.case_id, "family": c.family, "kernel": c.kernel, "backend": c.backend,
                              "dtype": c.dtype, "shape": c.label, "flops_per_call": kernel_for(c.kernel).flops(c),
                              "bytes_per_call": kernel_for(c.kernel).bytes(c), "median_ns": mean_latency_ns(hw, c),
                              "run_id": "sim", "dt": "-"} for c in cases])

    src = frame(H100)
    scored = attach_measured(project(src, calibrate(src, hardware(H100), "simulated"), hardware(target)), frame(target))
    assert np.median(np.abs(scored["error_pct"])) <= 15.0


# --- the job over published tables ----------------------------------------------------------

@pytest.fixture(scope="module")
def night(spark, lake, tmp_path_factory):
    return sim_night(spark, lake, tmp_path_factory.mktemp("rpt-staging"))


def test_project_job_calibrated_on_sim_h100_scores_sim_h200_within_15_percent(night, spark, lake):
    from pipelines.config.progress import Progress
    from pipelines.projection.roofline import project_job

    kw = dict(source=H100, device_kind="simulated", source_dates=[DT], source_pools=["sim-h100"],
              measured_dates=[DT], measured_pools=["sim-h200"], spark=spark, progress=Progress(5, quiet=True))
    rows, summary = project_job(lake, H200, recalibrate=True, **kw)
    overall = summary.set_index("family").loc["all"]
    assert overall["measured"] == night["cases"] - 1  # every case of the suite but the one that failed on the H200
    assert overall["median_abs_error_pct"] <= 15.0
    print(f"\nsim H100 -> sim H200 projection error:\n{summary.round(2).to_string(index=False)}")

    stored = spark.sql(f"SELECT count(*) AS n, count(measured_ns) AS measured, min(projected_at) AS at, "
                       f"min(calibration_source) AS src FROM perf.projections WHERE target_sku = '{H200}' "
                       f"AND source_sku = '{H100}' AND device_kind = 'simulated'").collect()[0]
    assert stored.n == len(rows) and stored.measured == overall["measured"]
    assert stored.src.startswith(f"simulated {H100}") and f"rpt-{DT}-sim-h100" in stored.src

    # Run again without --recalibrate: the projection stays as first made, only the score is redone.
    again, _ = project_job(lake, H200, **kw)
    assert again["projected_at"].nunique() == 1 and pd.Timestamp(again["projected_at"].iloc[0]).to_pydatetime() \
        .replace(tzinfo=None) == stored.at.replace(tzinfo=None)
    assert again.set_index("case_id")["projected_ns"].to_dict() == pytest.approx(
        rows.set_index("case_id")["projected_ns"].to_dict(), nan_ok=True)


def test_catalog_gpus_without_measurements_are_the_default_targets(night, lake):
    from pipelines.warehouse.frames import Frames
    from pipelines.projection.roofline import unmeasured_skus

    with Frames(lake) as frames:
        targets = unmeasured_skus(frames)
    assert "B200-SXM-180GB" in targets and H100 not in targets and H200 not in targets


def test_mining_a_night_on_projected_hardware_scores_the_projections_made_before(night, spark, lake, tmp_path):
    """The nightly mine task (pipelines.tasks.mine) scores projections by itself when the
    projected GPU's first measurements land, as a new SKU's backfill would."""
    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.suite import load_suite
    from pipelines.orchestration import tasks
    from pipelines.landing.files import land_shard
    from pipelines.config.progress import Progress
    from pipelines.projection.roofline import project_job
    from report_data import SUITE

    target, pool, dt = "L40S", "sim-l40s-rescore", "2035-03-09"
    before, _ = project_job(lake, target, source=H100, device_kind="simulated", source_dates=[DT],
                            source_pools=["sim-h100"], spark=spark, progress=Progress(5, quiet=True))
    assert before["measured_ns"].isna().all()  # nothing measured on the target yet

    spec = ShardSpec(run_id=f"rescore-{dt}", shard=0, num_shards=1, pool=pool, device=f"sim:{target}", dt=dt,
                     reason="backfill", seed=0)
    run_shard(load_suite(SUITE), spec, tmp_path / "l40s", progress=lambda *_: None)
    land_shard(tmp_path / "l40s", lake, dt=dt, pool=pool, run_id=spec.run_id, shard=0)
    out = tasks.mine(dt, [pool])

    ok = spark.sql(f"SELECT count(DISTINCT case_id) FROM perf.case_stats WHERE dt = '{dt}' AND pool = '{pool}' "
                   f"AND status = 'ok'").collect()[0][0]
    (scored,) = out["projections_scored"]
    assert (scored["target_sku"], scored["source_sku"], scored["device_kind"]) == (target, H100, "simulated")
    assert scored["projected"] == len(before) and scored["measured"] == ok > 0
    assert 0 <= scored["median_abs_error_pct"] < 100
    rows = spark.sql(f"SELECT measured_dt, measured_run_id, projected_at FROM perf.projections "
                     f"WHERE target_sku = '{target}' AND measured_ns IS NOT NULL").collect()
    assert len(rows) == ok and {(r.measured_dt, r.measured_run_id) for r in rows} == {(dt, spec.run_id)}
    made = pd.Timestamp(before["projected_at"].iloc[0]).to_pydatetime().replace(tzinfo=None)
    assert {r.projected_at.replace(tzinfo=None) for r in rows} == {made}  # scored, not re-projected
    print(f"\nsim H100 -> sim L40S, scored by the mine task: {scored}")


def test_a_latency_bound_case_far_below_the_roofs_projects_onto_its_own_gpu_as_measured():
    """A gloo all-reduce of 16 KB measured on an H200 at 200 us reaches 1.5e-5 of the HBM
    roof; a floor of 1e-4 on the efficiency projected it onto the H200 itself at 35 us."""
    from kernels_bench.hardware import hardware
    from pipelines.projection.roofline import calibrate, project

    h200 = hardware("H200-SXM-141GB")
    measured = pd.DataFrame([
        {"case_id": "noop", "family": "selftest", "kernel": "noop", "backend": "torch", "dtype": "fp32",
         "shape": "", "flops_per_call": 0.0, "bytes_per_call": 0.0, "median_ns": 5_000.0},
        {"case_id": "ar", "family": "collective", "kernel": "all_reduce", "backend": "gloo", "dtype": "fp32",
         "shape": "numel=4096,world_size=2", "flops_per_call": 4096.0, "bytes_per_call": 32768.0,
         "median_ns": 199_736.0}])
    cal = calibrate(measured, h200, "gpu")
    (row,) = project(measured[measured["case_id"] == "ar"], cal, h200).to_dict("records")
    assert row["projected_ns"] == pytest.approx(199_736.0, rel=1e-6) and row["efficiency"] < 1e-4
