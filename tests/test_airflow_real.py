"""A real Airflow 3 on loopback (scheduler, DAG processor, triggerer, API server) runs
nightly_sweep when triggered through its CLI, and the tables hold the night's results.
It uses its own lake: the shared test session holds the other lake's metastore."""
from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from pipelines.airflow_local import LocalAirflow, group_members
from pipelines.lake import Lake

pytestmark = pytest.mark.slow
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


def test_triggered_nightly_sweep_succeeds_under_a_real_scheduler(tmp_path):
    lake = Lake(tmp_path / "lake")
    af = LocalAirflow(lake)
    try:
        af.start()
        run_id = af.trigger("nightly_sweep", {"pools": ["sim-h100"], "suites": ["gemm-demo"], "stopping": FAST})
        state = af.wait("nightly_sweep", run_id)
        assert state == "success", open(af.log).read()[-3000:]
    finally:
        af.stop()
    assert group_members(af.proc.pid) == [], "airflow processes survived the stop"
    stats = ds.dataset(lake.table_path("case_stats"), format="parquet", partitioning="hive").to_table().to_pylist()
    assert len(stats) == 6
    assert {r["pool"] for r in stats} == {"sim-h100"}
    assert all(r["status"] == "ok" and r["median_ns"] > 0 and r["device_kind"] == "simulated" for r in stats)
