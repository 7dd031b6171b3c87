"""A lake in services mode for tests and benchmarks (docs/deploy.md): a fresh folder other
users may enter (the services' OS users must), its own pool registry, free ports, and
`perflake services up` ... `down`, with the ways to reach it from outside its processes
(perflake commands, the Airflow CLI and database, JDBC) and the query clients of the soak.

    with ServicesLake.create(POOLS_YAML) as lake:   # up; down, stray processes killed, deleted
        lake.perflake("mine", "--date", dt)
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from kernels_bench.collectives import free_port
from kernels_bench.suite import load_suite
from pipelines.config import processes
from pipelines.config.lake import Lake
from pipelines.config.services import AIRFLOW_DB, AIRFLOW_ROLE, HOST, JDBC_DRIVER_JAR, PG_BIN, Services, configured

from launchers.sql_clients import ConnectSession, JdbcSession

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Three simulated pools for a night (1-2 devices each), a fourth GPU for a backfill, and
# `cpu`, which nightly_sweep's default parameter names (a registry without it fails the DAG).
POOLS_YAML = """\
sim-h100: {sku: H100-SXM5-80GB, device_kind: simulated, slots: 2}
sim-h200: {sku: H200-SXM-141GB, device_kind: simulated, slots: 2}
sim-a100: {sku: A100-SXM4-80GB, device_kind: simulated, slots: 1}
sim-b200: {sku: B200-SXM-180GB, device_kind: simulated, slots: 1}
cpu: {sku: cpu, device_kind: cpu, slots: 1}
"""
NIGHT_POOLS = ["sim-h100", "sim-h200", "sim-a100"]
NEW_GPU_POOL, NEW_GPU = "sim-b200", "B200-SXM-180GB"
# A sample budget that keeps a simulated night to seconds per shard.
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


def require_packages() -> None:
    """Skip the calling test without PostgreSQL 15 and its JDBC driver (fail it in CI, which must install them)."""
    import pytest

    missing = [str(p) for p in (PG_BIN / "pg_ctl", JDBC_DRIVER_JAR) if not p.exists()]
    if not missing:
        return
    why = (f"the services need PostgreSQL 15 and the PostgreSQL JDBC driver, missing: {', '.join(missing)} "
           f"(apt-get install postgresql libpostgresql-jdbc-java)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why}; .ci/run must install them")
    pytest.skip(why)


def consecutive_free_ports(n: int) -> int:
    """The first of n consecutive free loopback ports (Airflow's API server and its two log servers)."""
    for _ in range(50):
        first = free_port()
        try:
            for p in range(first, first + n):
                with socket.socket() as s:
                    s.bind((HOST, p))
            return first
        except OSError:
            continue
    raise RuntimeError(f"found no {n} consecutive free ports on {HOST}")


def client_env(root: Path, **extra: str) -> dict[str, str]:
    """This process's environment for commands on the lake at `root`: no Airflow setting of
    the caller's (a test run exports its own SQLite Airflow) and no mode switch."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "PERFLAKE_SERVICES"}
    env.update(PERFLAKE_HOME=str(root), PERFLAKE_POOLS=str(root / "pools.yaml"), **extra)
    return env


def new_lake(pools_yaml: str, prefix: str) -> Path:
    """A fresh lake folder that other users may enter, with its own pool registry."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o755)
    (root / "pools.yaml").write_text(pools_yaml)
    return root


@dataclass
class ServicesLake:
    """A lake in services mode and the ways to reach it from outside its processes."""
    lake: Lake
    env: dict[str, str]          # for `perflake` commands: this lake, its pools and ports
    with_airflow: bool = True    # False: `up --no-airflow` (the metastore and the SQL service only)

    @classmethod
    def create(cls, pools_yaml: str = POOLS_YAML, prefix: str = "perflake-services-", *,
               with_airflow: bool = True, settings: dict[str, str] | None = None) -> "ServicesLake":
        """A fresh lake; `settings` are PERFLAKE_* variables `up` reads (the SQL service's
        PERFLAKE_SQL_QUERY_TIMEOUT_S, PERFLAKE_SQL_MAX_ROWS)."""
        root = new_lake(pools_yaml, prefix)
        # Only the runs one triggers execute: no scheduled run of a DAG once it is unpaused.
        cfg = root / "services" / "airflow" / "airflow.cfg"
        cfg.parent.mkdir(parents=True)
        cfg.write_text("[scheduler]\nuse_job_schedule = False\n")
        return cls(Lake(root), client_env(root, PERFLAKE_PG_PORT=str(free_port()), PERFLAKE_SQL_PORT=str(free_port()),
                                          PERFLAKE_CONNECT_PORT=str(free_port()),
                                          PERFLAKE_AIRFLOW_PORT=str(consecutive_free_ports(3)), **(settings or {})),
                   with_airflow)

    def __enter__(self) -> "ServicesLake":
        up = ("services", "up") if self.with_airflow else ("services", "up", "--no-airflow")
        try:
            first = self.perflake(*up, timeout=900, check=False)
            if first.returncode != 0:
                # Seen once on the loaded 2-core machine: Airflow's API server "exited while
                # starting" with an empty log, and the next `up` brought it up. `up` is
                # idempotent; say so loudly and try once more.
                warnings.warn(f"perflake services up failed once, trying again:\n{first.stderr[-1500:]}")
                self.perflake(*up, timeout=900)
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        """`perflake services down`, kill what was started on the lake and left behind, delete it."""
        try:
            self.perflake("services", "down", timeout=300, check=False)
        finally:
            stop_processes_of(self.lake.root)
            shutil.rmtree(self.lake.root, ignore_errors=True)

    @property
    def services(self) -> Services:
        found = configured(self.lake)
        assert found is not None, f"{self.lake.root} is not in services mode"
        return found

    def perflake(self, *args: str, timeout: float = 600, check: bool = True,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(BIN / "perflake"), *args], env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout, cwd=REPO)
        if check and proc.returncode != 0:
            raise AssertionError(f"perflake {' '.join(args)} failed (exit {proc.returncode}):\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        return proc

    def mine(self, dt: str) -> subprocess.Popen:
        """`perflake mine --date dt` started in a session of its own (its driver JVM is its child)."""
        return subprocess.Popen([str(BIN / "perflake"), "mine", "--date", dt], env=self.env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def airflow(self, *args: str, timeout: float = 600) -> str:
        from pipelines.deploy.airflow import environment

        env = {**environment(self.lake), "PERFLAKE_POOLS": self.env["PERFLAKE_POOLS"]}
        proc = subprocess.run([str(BIN / "airflow"), *args], env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        return proc.stdout

    def airflow_db(self, sql: str, params: tuple = ()) -> list[tuple]:
        """Rows of Airflow's own database (runs, task instances), as its role."""
        from pipelines.deploy import postgres

        conn = postgres.connect(self.services, AIRFLOW_DB, AIRFLOW_ROLE)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            conn.close()

    def wait_parsed(self, dag_ids: list[str], timeout_s: float = 600) -> None:
        """Wait until the DAG processor has serialised these DAGs (the CLI knows none before)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = {r[0] for r in self.airflow_db("SELECT dag_id FROM serialized_dag WHERE dag_id = ANY(%s)",
                                                   (list(dag_ids),))}
            if found >= set(dag_ids):
                return
            time.sleep(3)
        raise TimeoutError(f"Airflow's DAG processor did not parse {dag_ids} within {timeout_s:.0f} s; see "
                           f"{self.lake.root}/services/airflow/logs/dag-processor.log")

    def unpause(self, *dag_ids: str) -> None:
        self.wait_parsed(list(dag_ids))
        for dag_id in dag_ids:
            self.airflow("dags", "unpause", dag_id)

    def trigger(self, dag_id: str, run_id: str, conf: dict, logical_date: str) -> None:
        self.airflow("dags", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf),
                     "--logical-date", logical_date)

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rows = self.airflow_db("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", (dag_id, run_id))
            if rows and rows[0][0] in ("success", "failed"):
                return rows[0][0]
            time.sleep(3)
        raise TimeoutError(f"{dag_id} {run_id} did not finish within {timeout_s:.0f} s; task states: "
                           f"{self.task_states(dag_id, run_id)}")

    def run_wall_s(self, dag_id: str, run_id: str) -> float:
        ((start, end),) = self.airflow_db("SELECT start_date, end_date FROM dag_run WHERE dag_id = %s AND run_id = %s",
                                          (dag_id, run_id))
        return (end - start).total_seconds()

    def task_states(self, dag_id: str, run_id: str) -> list[tuple]:
        return self.airflow_db("SELECT task_id, map_index, state, try_number FROM task_instance "
                               "WHERE dag_id = %s AND run_id = %s ORDER BY task_id, map_index", (dag_id, run_id))

    def task_log_tail(self, dag_id: str, run_id: str, task_id: str) -> str:
        from pipelines.deploy.airflow import home

        root = home(self.lake) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        return "\n".join(f.read_text(errors="replace")[-3000:] for f in sorted(root.rglob("*.log"))) or "(no log)"

    def jdbc(self, *statements: str) -> list[dict]:
        """Each statement's answer over one new JDBC connection (query_via_jdbc)."""
        from pipelines.query.server import query_via_jdbc

        return query_via_jdbc(list(statements), HOST, self.services.sql_port, timeout_s=180)

    def jdbc_rows(self, statement: str) -> list[list]:
        (answer,) = self.jdbc(statement)
        assert answer["ok"], f"{statement}: {answer['error']}"
        return answer["rows"]

    def connect(self, max_rows: int = 1000) -> ConnectSession:
        """A Spark Connect session held open, presenting the service's token."""
        return ConnectSession(self.services.connect_url, max_rows, token=self.services.connect_token())

    def land(self, dt: str, pool: str = "sim-h100", suffix: str = "") -> str:
        """Measure the gemm-demo cases on the simulated H100 for night `dt` and land them; the run id."""
        from sim_history import land_night

        cases = [pc.case for pc in load_suite("gemm-demo").cases]
        with tempfile.TemporaryDirectory(prefix="perflake-services-land-") as tmp:
            return land_night(self.lake, Path(tmp), dt, pool, cases, prefix="svc", suffix=suffix)

    def landed_rows(self, dt: str) -> dict[str, int]:
        return landed_rows(self.lake, dt)

    def published_rows(self, dt: str) -> dict[str, int]:
        """perf.samples rows published for `dt`, per run id, through JDBC."""
        return {r[0]: int(r[1]) for r in self.jdbc_rows(
            f"SELECT run_id, count(*) FROM perf.samples WHERE dt = '{dt}' GROUP BY run_id")}


def landed_rows(lake: Lake, dt: str) -> dict[str, int]:
    """Raw sample rows landed for `dt`, per run id (the landing Parquet files' row counts)."""
    out: dict[str, int] = {}
    for f in (lake.landing / "samples" / f"dt={dt}").rglob("*.parquet"):
        run_id = f.parent.name.removeprefix("run_id=")
        out[run_id] = out.get(run_id, 0) + pq.ParquetFile(f).metadata.num_rows
    return out


def stop_processes_of(root: Path) -> None:
    """Kill the processes left behind on a lake (a mine's driver, a task runner): those
    whose command line names the lake's folder (a fresh mkdtemp: only ours do)."""
    me = os.getpid()
    for st in processes.all_stats():
        if st.pid != me and str(root).encode() in processes.cmdline(st.pid):
            try:
                os.kill(st.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@dataclass
class QueryClients:
    """Clients of a serving lake: JDBC every `jdbc_period_s` (a connection held open, every
    tenth query a new connection through query_via_jdbc), and `perflake sql` (Spark
    Connect) every `cli_period_s`. Answers' latencies per kind, and every error. With
    `after_first_publication`, both start once the perf tables they query exist (a fresh
    lake's first mine creates them); `SHOW TABLES` polls until then count for nothing."""
    lake: ServicesLake
    jdbc_period_s: float = 1.0
    cli_period_s: float = 4.0
    after_first_publication: bool = False
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"jdbc": [], "jdbc-new": [], "perflake sql": []})
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _tables: threading.Event = field(default_factory=threading.Event)
    _poll_lock: threading.Lock = field(default_factory=threading.Lock)
    querying_s: tuple[float, float] | None = None  # (first query, stop), monotonic: how long they queried

    def start(self) -> "QueryClients":
        for target in (self._jdbc, self._cli):
            t = threading.Thread(target=self._guard, args=(target,), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        if self.querying_s is not None:
            self.querying_s = (self.querying_s[0], time.monotonic())
        self._stop.set()
        for t in self._threads:
            t.join(240)

    def _guard(self, target) -> None:
        try:
            if self.after_first_publication:
                self._wait_for_tables("samples", "case_stats")
            target()
        except Exception as e:  # noqa: BLE001 (a client that dies is a failed query)
            self.errors.append(f"{target.__name__} died: {type(e).__name__}: {e}")

    def _wait_for_tables(self, *names: str) -> None:
        # One poller over one held-open connection: both clients polled with a new JDBC
        # connection each second, a JVM started per poll, CPU taken from the mines the
        # soak is about (minutes of a fresh lake's first night).
        with self._poll_lock:
            if self._tables.is_set():
                return
            with JdbcSession(HOST, self.lake.services.sql_port) as session:
                while not self._stop.is_set():
                    answer = session.query("SHOW TABLES IN perf")
                    if answer["ok"] and set(names) <= {row[1] for row in answer["rows"]}:
                        self._tables.set()
                        return
                    self._stop.wait(2.0)

    def _jdbc(self) -> None:
        sql = "SELECT dt, pool, count(*) FROM perf.samples GROUP BY dt, pool"
        with JdbcSession(HOST, self.lake.services.sql_port) as session:
            n = 0
            self.querying_s = (time.monotonic(), time.monotonic())
            while not self._stop.is_set():
                t0 = time.monotonic()
                if n % 10 == 9:
                    (answer,) = self.lake.jdbc(sql)
                    kind = "jdbc-new"
                else:
                    answer, kind = session.query(sql), "jdbc"
                self._record(kind, answer, time.monotonic() - t0)
                n += 1
                self._stop.wait(max(0.0, self.jdbc_period_s - (time.monotonic() - t0)))

    def _cli(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            proc = self.lake.perflake("sql", "SELECT pool, count(*) AS n FROM perf.case_stats GROUP BY pool",
                                      "--format", "json", timeout=180, check=False)
            self._record("perflake sql", {"ok": proc.returncode == 0, "error": proc.stderr[-1500:]},
                         time.monotonic() - t0)
            self._stop.wait(max(0.0, self.cli_period_s - (time.monotonic() - t0)))

    def _record(self, kind: str, answer: dict, seconds: float) -> None:
        if answer["ok"]:
            self.latencies[kind].append(seconds)
        else:
            self.errors.append(f"{kind} at {time.strftime('%H:%M:%S')}: {answer['error'][:600]}")
