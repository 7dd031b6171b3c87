"""The services soak, longer (issue 17, item 5; tests/test_services.py is its bounded
version). On a fresh lake in services mode (`perflake services up`, loopback, free ports):

1. during mining: a night over three simulated pools and a new GPU's backfill through the
   services' Airflow at once, while one client queries JDBC every second (a connection
   held open; every tenth query a new connection) and another runs `perflake sql`
   (Spark Connect) every 4 s: query latency p50/p95 per client, and every error;
2. parallel night: the same three-pool night alone through Airflow (LocalExecutor, pools'
   slots in parallel): its DAG run's wall time;
3. serial night: the same night on an embedded lake (no services: Derby, SQLite,
   `dag.test()` runs its tasks one at a time, as `perflake demo` does): its wall time;
4. `perflake sql` latency, the same query repeated: through the warm service, and with
   a JVM per command on the embedded lake (which holds the same night).

    python benchmarks/services_soak.py [--sql-repeats 8] [--out FILE.json]

Prints one JSON document (also written to --out) with the machine's load average before
and after each phase: on a shared machine the figures move with the neighbours' load.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the launchers the test uses

import numpy as np  # noqa: E402

from launchers.services_lake import (BIN, FAST, NEW_GPU_POOL, NIGHT_POOLS, POOLS_YAML, QueryClients,  # noqa: E402
                                     ServicesLake, client_env, landed_rows, new_lake, stop_processes_of)

SEED, SOAK_NIGHT, SOAK_BACKFILL, PARALLEL_NIGHT = "2026-07-01", "2026-07-02", "2026-07-03", "2026-07-04"
NIGHT_CONF = {"pools": NIGHT_POOLS, "suites": ["gemm-demo"], "stopping": FAST}
BACKFILL_CONF = {"pools": [NEW_GPU_POOL], "suites": ["memory"], "kernel": "copy", "stopping": FAST}
SQL = "SELECT pool, count(*) AS n FROM perf.case_stats GROUP BY pool"

# The embedded serial night: nightly_sweep through dag.test() in a process of its own.
SERIAL_NIGHT = """
import datetime, json, sys, time
from pipelines.config.lake import Lake
from pipelines.orchestration.airflow_env import prepare_airflow, sync_pools
lake = Lake.from_env()
prepare_airflow(lake)
sync_pools()
from pipelines.orchestration.demo import load_dag
dag = load_dag("nightly_sweep")
t0 = time.monotonic()
run = dag.test(logical_date=datetime.datetime.fromisoformat(sys.argv[1]), run_conf=json.loads(sys.argv[2]))
print(json.dumps({"state": str(run.state), "wall_s": time.monotonic() - t0}))
"""


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def summary(seconds: list[float]) -> dict:
    if not seconds:
        return {"n": 0}
    a = np.asarray(seconds)
    return {"n": int(a.size), "p50_s": round(float(np.percentile(a, 50)), 3),
            "p95_s": round(float(np.percentile(a, 95)), 3), "max_s": round(float(a.max()), 3)}


def record(result: dict, name: str, phase: dict) -> None:
    """Keep a phase's figures, and print them at once (a later phase may fail or be stopped)."""
    result[name] = phase
    print(f"{time.strftime('%H:%M:%S')} {name}: {json.dumps(phase)}", file=sys.stderr, flush=True)


def timed_sql(env: dict[str, str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.monotonic()
        proc = subprocess.run([str(BIN / "perflake"), "sql", SQL, "--format", "json"], env=env, capture_output=True,
                              text=True, timeout=600, cwd=REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"perflake sql failed: {proc.stderr[-2000:]}")
        out.append(time.monotonic() - t0)
    return out


def services_phases(args, result: dict) -> None:
    with ServicesLake.create(prefix="perflake-services-bench-") as svc:
        svc.land(SEED)
        svc.perflake("mine", "--date", SEED)
        svc.unpause("nightly_sweep", "backfill_hardware")

        phase = {"load_before": load()}
        clients = QueryClients(svc).start()
        t0 = time.monotonic()
        try:
            svc.trigger("nightly_sweep", "soak_night", NIGHT_CONF, f"{SOAK_NIGHT}T02:00:00+00:00")
            svc.trigger("backfill_hardware", "soak_backfill", BACKFILL_CONF, f"{SOAK_BACKFILL}T03:00:00+00:00")
            states = {d: svc.wait_run(d, r, timeout_s=3600)
                      for d, r in (("nightly_sweep", "soak_night"), ("backfill_hardware", "soak_backfill"))}
        finally:
            clients.stop()
        phase.update(wall_s=round(time.monotonic() - t0, 1), states=states, load_after=load(),
                     latency={k: summary(v) for k, v in clients.latencies.items()}, errors=clients.errors,
                     tables_match_raw={dt: svc.published_rows(dt) == landed_rows(svc.lake, dt)
                                       for dt in (SEED, SOAK_NIGHT, SOAK_BACKFILL)})
        record(result, "during_mining", phase)

        phase = {"load_before": load()}
        svc.trigger("nightly_sweep", "parallel_night", NIGHT_CONF, f"{PARALLEL_NIGHT}T02:00:00+00:00")
        phase["state"] = svc.wait_run("nightly_sweep", "parallel_night", timeout_s=3600)
        phase.update(wall_s=round(svc.run_wall_s("nightly_sweep", "parallel_night"), 1), load_after=load())
        record(result, "parallel_night", phase)

        phase = {"load_before": load()}
        svc.perflake("sql", SQL)  # the service's first Connect session is not the warm figure
        phase["latency"] = summary(timed_sql(svc.env, args.sql_repeats))
        phase["load_after"] = load()
        record(result, "sql_via_service", phase)


def embedded_phases(args, result: dict) -> None:
    root = new_lake(POOLS_YAML, "perflake-embedded-bench-")
    env = client_env(root)
    try:
        phase = {"load_before": load()}
        proc = subprocess.run([sys.executable, "-c", SERIAL_NIGHT, f"{PARALLEL_NIGHT}T02:00:00+00:00",
                               json.dumps(NIGHT_CONF)], env=env, capture_output=True, text=True, timeout=3600,
                              cwd=REPO)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"state"')]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"the embedded night failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
        phase.update(json.loads(lines[-1]), load_after=load())
        record(result, "serial_night", phase)

        phase = {"load_before": load()}
        phase["latency"] = summary(timed_sql(env, max(2, args.sql_repeats // 3)))
        phase["load_after"] = load()
        record(result, "sql_per_command_jvm", phase)
    finally:
        stop_processes_of(root)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sql-repeats", type=int, default=8, help="perflake sql calls timed through the service")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args()
    result = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} {os.cpu_count()} cores",
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "load_start": load()}
    services_phases(args, result)
    embedded_phases(args, result)
    result["night_serial_over_parallel"] = round(result["serial_night"]["wall_s"] / result["parallel_night"]["wall_s"], 2)
    result["sql_per_command_jvm_over_service_p50"] = round(
        result["sql_per_command_jvm"]["latency"]["p50_s"] / result["sql_via_service"]["latency"]["p50_s"], 1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
