"""Energy and accuracy as columns of perf.case_stats: modelled by the simulated device
within its board limit, null on the CPU (never invented), and a case whose result is off
by a known amount carries exactly that error."""
from __future__ import annotations

import pytest

from kernels_bench.hardware import load_catalog
from jobs.mine import mine
from pipelines.sweep.shards import plan_shards, run_shard

DT = "2030-02-03"
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


@pytest.fixture(scope="module")
def mined(spark, lake):
    for pool, suite in (("sim-h100", "gemm-demo"), ("cpu", "selftest-accuracy")):
        for shard in plan_shards(run_id=f"energy-{pool}", dt=DT, pool=pool, suites=[suite], reason="manual",
                                 stopping=FAST):
            run_shard(shard, lake)
    mine(spark, lake, DT, ["sim-h100", "cpu"])
    return {r.pool + "/" + r.case_id: r for r in spark.sql(
        f"SELECT * FROM perf.case_stats WHERE dt = '{DT}'").collect()}


def test_simulated_energy_columns_are_filled_and_within_the_board_limit(mined):
    board = load_catalog()["H100-SXM5-80GB"].board_power_w
    sim = [r for k, r in mined.items() if k.startswith("sim-h100/")]
    assert len(sim) == 6
    for r in sim:
        assert 0 < r.avg_power_w <= board
        assert r.energy_per_call_j == pytest.approx(r.avg_power_w * r.median_ns * 1e-9, rel=0.05)
        assert r.tflops_per_watt == pytest.approx(r.flops_per_call / r.energy_per_call_j / 1e12)
        assert r.joules_per_tflop == pytest.approx(1 / r.tflops_per_watt)


def test_cpu_rows_have_null_energy_and_a_known_error_is_recorded_exactly(mined):
    (r,) = [r for k, r in mined.items() if k.startswith("cpu/")]
    assert r.kernel == "known_error" and r.status == "ok"
    assert (r.energy_per_call_j, r.avg_power_w, r.tflops_per_watt) == (None, None, None)
    assert r.max_abs_error == 0.5 and r.max_rel_error == 0.5 and r.tolerance == 1e-4
    assert r.correct is False  # faster or not, a wrong result is visible

