"""`make airflow`'s Airflow (`airflow standalone` on SQLite: scheduler, DAG processor,
triggerer and API server on loopback) mines a landed night through the mine DAG when
`airflow backfill create` asks (docs/airflow.md), the tables then hold the night, and
stopping it leaves no process behind. It uses its own lake: the shared test session holds
the other lake's metastore.

A triggered nightly_sweep under a real scheduler (its shards at once, its mine) runs in
the services soak (tests/test_services.py, on the services' PostgreSQL Airflow); running
it here as well cost a sweep and a second mine (about 3 of this test's 6 minutes)."""
from __future__ import annotations

import datetime
import json
import time
import urllib.request
from pathlib import Path

from kernels_bench.suite import load_suite
from launchers.airflow_local import LocalAirflow
from pipelines.config.processes import group_members
from pipelines.config.lake import Lake
from pipelines.orchestration.airflow_env import PASSWORDS
from pipelines.warehouse.frames import Frames
from sim_history import land_night


def test_backfill_create_mines_a_landed_night_under_the_standalone_scheduler(tmp_path):
    lake = Lake(tmp_path / "lake")
    # Yesterday's night: `backfill create` refuses a window whose cron tick (06:00 UTC) is
    # still ahead, so a night dated today could not be mined before 06:00.
    day = str(datetime.datetime.now(datetime.timezone.utc).date() - datetime.timedelta(days=1))
    cases = [pc.case for pc in load_suite("gemm-demo").cases]
    run_id = land_night(lake, tmp_path / "staging", day, "sim-h100", cases)
    af = LocalAirflow(lake)
    try:
        af.start()
        # The UI's password: private to its owner (Airflow wrote it readable by every local
        # user), and it logs in.
        passwords = Path(af.env["AIRFLOW_HOME"]) / PASSWORDS
        assert passwords.stat().st_mode & 0o777 == 0o600
        login = urllib.request.Request(f"http://127.0.0.1:{af.port}/auth/token", method="POST",
                                       data=json.dumps({"username": "admin",
                                                        "password": json.loads(passwords.read_text())["admin"]}).encode(),
                                       headers={"Content-Type": "application/json"})
        for attempt in range(30):  # the API server may still be starting
            try:
                with urllib.request.urlopen(login, timeout=30) as answer:
                    assert json.loads(answer.read())["access_token"]
                break
            except OSError:
                if attempt == 29:
                    raise
                time.sleep(2)
        backfill_run = af.backfill("mine", day)
        assert af.wait("mine", backfill_run) == "success", open(af.log).read()[-3000:]
    finally:
        af.stop()
    assert group_members(af.proc.pid) == [], "airflow processes survived the stop"
    stats = sorted(Frames(lake).table("case_stats").to_dict("records"), key=lambda r: r["case_id"])
    assert [(r["dt"], r["run_id"], r["pool"]) for r in stats] == [(day, run_id, "sim-h100")] * len(cases)
    assert all(r["status"] == "ok" and r["median_ns"] > 0 and r["device_kind"] == "simulated" for r in stats)
