"""A real local Airflow 3 (`airflow standalone`: scheduler, DAG processor, triggerer and
API server on loopback) on a lake's own home, for tests and `make airflow`.

Scheduled runs are off (`use_job_schedule`) so that only runs triggered on purpose
execute; everything listens on 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipelines.orchestration.airflow_env import airflow_env
from kernels_bench.collectives import free_port
from pipelines.config.lake import Lake
from pipelines.config.processes import group_members

BIN = Path(sys.executable).parent


def local_env(lake: Lake, port: int, scheduled_runs: bool = False) -> dict[str, str]:
    env = {**os.environ, **airflow_env(lake)}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": str(scheduled_runs),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
    })
    return env


class LocalAirflow:
    """Start with `with LocalAirflow(lake) as af:`; every process it started is stopped on exit."""

    def __init__(self, lake: Lake, port: int | None = None):
        self.lake = lake
        self.port = port or free_port()
        self.env = local_env(lake, self.port)
        self.proc: subprocess.Popen | None = None
        self.log = lake.root / "airflow-standalone.log"

    def cli(self, *args: str, timeout: float = 120, tries: int = 5) -> str:
        """Run an `airflow` command against this instance. SQLite admits one writer: a command
        that meets the scheduler's write ("database is locked", a rolled-back transaction)
        is tried again, up to `tries` times."""
        for attempt in range(tries):
            out = subprocess.run([str(BIN / "airflow"), *args], env=self.env, capture_output=True, text=True,
                                 timeout=timeout)
            if out.returncode == 0 or "database is locked" not in out.stderr or attempt == tries - 1:
                break
            time.sleep(2 * (attempt + 1))
        if out.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed (exit {out.returncode}): "
                               f"{out.stderr[-2000:]}{out.stdout[-1000:]}")
        return out.stdout

    def cli_json(self, *args: str):
        lines = [line for line in self.cli(*args, "-o", "json").splitlines() if line.startswith(("[", "{"))]
        return json.loads(lines[-1]) if lines else []

    def start(self, timeout_s: float = 240) -> "LocalAirflow":
        Path(self.env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
        self.cli("db", "migrate", timeout=300)
        subprocess.run([str(BIN / "perflake"), "pools"], env=self.env, check=True, capture_output=True)
        self.proc = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=self.env,
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"airflow standalone exited early; see {self.log}")
            dags = {d["dag_id"] for d in self.cli_json("dags", "list")}
            if "nightly_sweep" in dags:
                return self
            time.sleep(3)
        raise TimeoutError(f"nightly_sweep was not parsed within {timeout_s:.0f} s; see {self.log}")

    def trigger(self, dag_id: str, conf: dict, logical_date: str | None = None) -> str:
        before = {r["run_id"] for r in self.cli_json("dags", "list-runs", dag_id)}
        self.cli("dags", "trigger", dag_id, "--conf", json.dumps(conf),
                 *(("--logical-date", logical_date) if logical_date else ()))
        for _ in range(30):
            new = [r["run_id"] for r in self.cli_json("dags", "list-runs", dag_id) if r["run_id"] not in before]
            if new:
                return new[0]
            time.sleep(1)
        raise RuntimeError(f"triggered {dag_id} but no new run appeared")

    def backfill(self, dag_id: str, day: str) -> str:
        """`airflow backfill create` over one UTC day; returns the id of the run it created."""
        before = {r["run_id"] for r in self.cli_json("dags", "list-runs", dag_id)}
        self.cli("backfill", "create", "--dag-id", dag_id, "--from-date", f"{day}T00:00:00+00:00",
                 "--to-date", f"{day}T23:59:59+00:00")
        for _ in range(60):
            new = [r["run_id"] for r in self.cli_json("dags", "list-runs", dag_id)
                   if r["run_id"] not in before and r["run_id"].startswith("backfill")]
            if new:
                return new[0]
            time.sleep(2)
        raise RuntimeError(f"backfill of {dag_id} for {day} created no run")

    def wait(self, dag_id: str, run_id: str, timeout_s: float = 900) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = next(r["state"] for r in self.cli_json("dags", "list-runs", dag_id) if r["run_id"] == run_id)
            if state in ("success", "failed"):
                return state
            time.sleep(5)
        raise TimeoutError(f"{dag_id} run {run_id} still not finished after {timeout_s:.0f} s")

    def stop(self, timeout_s: float = 30) -> None:
        """Stop every process of the standalone's process group, and wait until none is left."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
            self.proc.wait(timeout_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        deadline = time.monotonic() + timeout_s
        while group_members(pgid) and time.monotonic() < deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        self.proc.wait(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
