"""A real Airflow 3 on loopback (scheduler, DAG processor, triggerer, API server) runs
nightly_sweep when triggered through its CLI, and the tables hold the night's results;
`airflow backfill create` re-mines the night through the mine DAG and changes nothing.
It uses its own lake: the shared test session holds the other lake's metastore."""
from __future__ import annotations

import datetime

import pytest

from launchers.airflow_local import LocalAirflow
from pipelines.config.processes import group_members
from pipelines.config.lake import Lake
from pipelines.warehouse.frames import Frames

FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


def test_triggered_nightly_sweep_succeeds_under_a_real_scheduler(tmp_path):
    lake = Lake(tmp_path / "lake")
    af = LocalAirflow(lake)
    try:
        af.start()
        # Yesterday's night: `backfill create` refuses a window whose cron tick (06:00 UTC)
        # is still ahead, so a sweep dated today could not be re-mined before 06:00.
        yesterday = datetime.datetime.now(datetime.timezone.utc).date() - datetime.timedelta(days=1)
        run_id = af.trigger("nightly_sweep", {"pools": ["sim-h100"], "suites": ["gemm-demo"], "stopping": FAST},
                            logical_date=f"{yesterday}T02:00:00+00:00")
        state = af.wait("nightly_sweep", run_id)
        assert state == "success", open(af.log).read()[-3000:]
        stats_before = _case_stats(lake)
        # Re-mining the night through Airflow 3's backfill gives the same table.
        day = stats_before[0]["dt"]
        assert day == str(yesterday)
        backfill_run = af.backfill("mine", day)
        assert af.wait("mine", backfill_run) == "success", open(af.log).read()[-3000:]
        assert _case_stats(lake) == stats_before
    finally:
        af.stop()
    assert group_members(af.proc.pid) == [], "airflow processes survived the stop"
    stats = _case_stats(lake)
    assert len(stats) == 6
    assert {r["pool"] for r in stats} == {"sim-h100"}
    assert all(r["status"] == "ok" and r["median_ns"] > 0 and r["device_kind"] == "simulated" for r in stats)


def _case_stats(lake: Lake) -> list[dict]:
    rows = Frames(lake).table("case_stats").to_dict("records")
    return sorted(rows, key=lambda r: (r["run_id"], r["case_id"]))
