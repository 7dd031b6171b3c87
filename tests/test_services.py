"""The shared services (issue 17, docs/deploy.md) on a fresh lake of their own: PostgreSQL,
the metastore on it, the Spark SQL service (JDBC + Spark Connect) and Airflow, brought up
once by `perflake services up` and taken down at the end, whatever happened.

- the soak: a three-pool nightly sweep and a new GPU's backfill through the services'
  Airflow, while one client queries JDBC every second and another runs `perflake sql`;
- readers see writers: sessions held open across a mine see its tables within the
  service's metadata TTL, and never a half-written table;
- read-only: the endpoints refuse every change, the readers' metastore role cannot write,
  the service runs as another OS user, and no secret is on a command line or in a log;
- faults (slow tier): the service or a mine's driver killed mid-mine, PostgreSQL restarted.

Every Spark process here is a process of its own (the service, `perflake mine`, Airflow's
task runners); this module never opens the test run's shared Spark session. The lake is a
mkdtemp folder opened to other users (the services' OS users must enter it), every port
is a free one, and every wait is bounded."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kernels_bench.collectives import free_port
from kernels_bench.suite import load_suite
from pipelines.config import processes
from pipelines.config.lake import Lake
from pipelines.config.services import (AIRFLOW_DB, AIRFLOW_ROLE, HOST, JDBC_DRIVER_JAR, METASTORE_DB, PG_BIN,
                                       READER_ROLE, ROLES, Services, configured)

from launchers.sql_clients import ConnectSession, JdbcSession
from sim_history import land_night

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# Three simulated pools for the night (1-2 devices each), a fourth GPU for the backfill,
# and `cpu`, which nightly_sweep's default parameter names.
POOLS_YAML = """\
sim-h100: {sku: H100-SXM5-80GB, device_kind: simulated, slots: 2}
sim-h200: {sku: H200-SXM-141GB, device_kind: simulated, slots: 2}
sim-a100: {sku: A100-SXM4-80GB, device_kind: simulated, slots: 1}
sim-b200: {sku: B200-SXM-180GB, device_kind: simulated, slots: 1}
cpu: {sku: cpu, device_kind: cpu, slots: 1}
"""
NIGHT_POOLS = ["sim-h100", "sim-h200", "sim-a100"]
NEW_GPU_POOL, NEW_GPU = "sim-b200", "B200-SXM-180GB"
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}
# Dates in the past (Airflow runs no logical date in the future), each test its own.
SEED, NIGHT, BACKFILL = "2026-08-01", "2026-08-02", "2026-08-03"
READERS, KILL_SERVICE, KILL_DRIVER, PG_RESTART = "2026-08-04", "2026-08-05", "2026-08-06", "2026-08-07"
SEED_POOL = "sim-h100"


def _require_packages() -> None:
    missing = [str(p) for p in (PG_BIN / "pg_ctl", JDBC_DRIVER_JAR) if not p.exists()]
    if not missing:
        return
    why = (f"the services need PostgreSQL 15 and the PostgreSQL JDBC driver, missing: {', '.join(missing)} "
           f"(apt-get install postgresql libpostgresql-jdbc-java)")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why}; .ci/run must install them")
    pytest.skip(why)


def _free_ports(n: int) -> int:
    """The first of n consecutive free loopback ports (Airflow's API server and its two log servers)."""
    for _ in range(50):
        first = free_port()
        import socket

        try:
            for p in range(first, first + n):
                with socket.socket() as s:
                    s.bind((HOST, p))
            return first
        except OSError:
            continue
    raise RuntimeError(f"found no {n} consecutive free ports on {HOST}")


@dataclass
class Deployment:
    """A lake in services mode and the ways to reach it from outside its processes."""
    lake: Lake
    env: dict[str, str]          # for `perflake` commands: this lake, these pools and ports

    @property
    def services(self) -> Services:
        found = configured(self.lake)
        assert found is not None, f"{self.lake.root} is not in services mode"
        return found

    def perflake(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(BIN / "perflake"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
        if check and proc.returncode != 0:
            raise AssertionError(f"perflake {' '.join(args)} failed (exit {proc.returncode}):\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        return proc

    def mine(self, dt: str) -> subprocess.Popen:
        """`perflake mine --date dt` started in its own session (its driver JVM is its child)."""
        return subprocess.Popen([str(BIN / "perflake"), "mine", "--date", dt], env=self.env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def airflow(self, *args: str, timeout: float = 180) -> str:
        from pipelines.deploy.airflow import environment

        env = {**environment(self.lake), "PERFLAKE_POOLS": self.env["PERFLAKE_POOLS"]}
        proc = subprocess.run([str(BIN / "airflow"), *args], env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"airflow {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        return proc.stdout

    def airflow_db(self, sql: str, params: tuple = ()) -> list[tuple]:
        from pipelines.deploy import postgres

        conn = postgres.connect(self.services, AIRFLOW_DB, AIRFLOW_ROLE)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()
        finally:
            conn.close()

    def jdbc(self, *statements: str) -> list[dict]:
        from pipelines.query.server import query_via_jdbc

        return query_via_jdbc(list(statements), HOST, self.services.sql_port, timeout_s=180)

    def jdbc_rows(self, statement: str) -> list[list]:
        (answer,) = self.jdbc(statement)
        assert answer["ok"], f"{statement}: {answer['error']}"
        return answer["rows"]

    def land(self, dt: str, pool: str = SEED_POOL, suffix: str = "") -> str:
        cases = [pc.case for pc in load_suite("gemm-demo").cases]
        with tempfile.TemporaryDirectory(prefix="perflake-services-land-") as tmp:
            return land_night(self.lake, Path(tmp), dt, pool, cases, prefix="svc", suffix=suffix)

    def landed_rows(self, dt: str) -> dict[str, int]:
        """Raw sample rows landed for `dt`, per run id."""
        out: dict[str, int] = {}
        for f in (self.lake.landing / "samples" / f"dt={dt}").rglob("*.parquet"):
            run_id = f.parent.name.removeprefix("run_id=")
            out[run_id] = out.get(run_id, 0) + pq.ParquetFile(f).metadata.num_rows
        return out

    def published_rows(self, dt: str) -> dict[str, int]:
        """perf.samples rows published for `dt`, per run id, through JDBC."""
        return {r[0]: int(r[1]) for r in self.jdbc_rows(
            f"SELECT run_id, count(*) FROM perf.samples WHERE dt = '{dt}' GROUP BY run_id")}

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

    def task_states(self, dag_id: str, run_id: str) -> list[tuple]:
        return self.airflow_db("SELECT task_id, map_index, state, try_number FROM task_instance "
                               "WHERE dag_id = %s AND run_id = %s ORDER BY task_id, map_index", (dag_id, run_id))

    def task_log_tail(self, dag_id: str, run_id: str, task_id: str) -> str:
        from pipelines.deploy.airflow import home

        root = home(self.lake) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        return "\n".join(f.read_text(errors="replace")[-3000:] for f in sorted(root.rglob("*.log"))) or "(no log)"


@pytest.fixture(scope="module")
def deployment():
    """The services up on a fresh lake with one mined night (SEED); down and deleted at the end."""
    _require_packages()
    root = Path(tempfile.mkdtemp(prefix="perflake-services-"))
    os.chmod(root, 0o755)  # the services' OS users must traverse it
    lake = Lake(root)
    (root / "pools.yaml").write_text(POOLS_YAML)
    # Only the runs a test triggers execute: no scheduled run of a DAG once it is unpaused.
    cfg = root / "services" / "airflow" / "airflow.cfg"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[scheduler]\nuse_job_schedule = False\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "PERFLAKE_SERVICES"}
    env.update(PERFLAKE_HOME=str(root), PERFLAKE_POOLS=str(root / "pools.yaml"),
               PERFLAKE_PG_PORT=str(free_port()), PERFLAKE_SQL_PORT=str(free_port()),
               PERFLAKE_CONNECT_PORT=str(free_port()), PERFLAKE_AIRFLOW_PORT=str(_free_ports(3)))
    dep = Deployment(lake, env)
    try:
        dep.perflake("services", "up", timeout=900)
        dep.land(SEED)
        dep.perflake("mine", "--date", SEED, timeout=600)
        yield dep
    finally:
        try:
            dep.perflake("services", "down", timeout=300, check=False)
        finally:
            _stop_processes_of(root)
            shutil.rmtree(root, ignore_errors=True)


def _stop_processes_of(root: Path) -> None:
    """Kill what this module started on the lake and left behind (a mine's driver, a task
    runner): the processes whose command line names the lake's folder."""
    me = os.getpid()
    for st in processes.all_stats():
        if st.pid != me and str(root).encode() in processes.cmdline(st.pid):
            try:
                os.kill(st.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


# --- the soak ------------------------------------------------------------------------

@dataclass
class QueryClients:
    """(c) of the soak: JDBC every second (a connection held open, and every tenth query a
    new connection through query_via_jdbc), and `perflake sql` (Spark Connect) every few s."""
    dep: Deployment
    answers: dict[str, list[float]] = field(default_factory=lambda: {"jdbc": [], "jdbc-new": [], "perflake sql": []})
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> "QueryClients":
        for target in (self._jdbc, self._cli):
            t = threading.Thread(target=self._guard, args=(target,), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(240)

    def _guard(self, target) -> None:
        try:
            target()
        except Exception as e:  # noqa: BLE001 (a client that dies is a failed query)
            self.errors.append(f"{target.__name__} died: {type(e).__name__}: {e}")

    def _jdbc(self) -> None:
        sql = "SELECT dt, pool, count(*) FROM perf.samples GROUP BY dt, pool"
        with JdbcSession(HOST, self.dep.services.sql_port) as session:
            n = 0
            while not self._stop.is_set():
                t0 = time.monotonic()
                if n % 10 == 9:
                    (answer,) = self.dep.jdbc(sql)
                    kind = "jdbc-new"
                else:
                    answer, kind = session.query(sql), "jdbc"
                self._record(kind, answer, time.monotonic() - t0)
                n += 1
                self._stop.wait(max(0.0, 1.0 - (time.monotonic() - t0)))

    def _cli(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            proc = self.dep.perflake("sql", "SELECT pool, count(*) AS n FROM perf.case_stats GROUP BY pool",
                                     "--format", "json", timeout=180, check=False)
            answer = {"ok": proc.returncode == 0, "error": proc.stderr[-1500:]}
            self._record("perflake sql", answer, time.monotonic() - t0)
            self._stop.wait(max(0.0, 4.0 - (time.monotonic() - t0)))

    def _record(self, kind: str, answer: dict, seconds: float) -> None:
        if answer["ok"]:
            self.answers[kind].append(seconds)
        else:
            self.errors.append(f"{kind} at {time.strftime('%H:%M:%S')}: {answer['error'][:600]}")


@pytest.fixture(scope="module")
def soak(deployment):
    """(a) the night over three pools and (b) the new GPU's backfill, both through Airflow,
    while (c) the query clients run; their outcome."""
    dep = deployment
    for dag_id in ("nightly_sweep", "backfill_hardware"):
        dep.airflow("dags", "unpause", dag_id)
    clients = QueryClients(dep).start()
    runs = {"nightly_sweep": "soak_night", "backfill_hardware": "soak_backfill"}
    try:
        dep.trigger("nightly_sweep", runs["nightly_sweep"], {"pools": NIGHT_POOLS, "suites": ["gemm-demo"],
                                                             "stopping": FAST}, f"{NIGHT}T02:00:00+00:00")
        dep.trigger("backfill_hardware", runs["backfill_hardware"],
                    {"pools": [NEW_GPU_POOL], "suites": ["memory"], "kernel": "copy", "stopping": FAST},
                    f"{BACKFILL}T03:00:00+00:00")
        states = {dag_id: dep.wait_run(dag_id, run_id, timeout_s=900) for dag_id, run_id in runs.items()}
    finally:
        clients.stop()
    return states, runs, clients


def test_soak_the_night_and_the_backfill_both_succeed(soak, deployment):
    states, runs, _ = soak
    failed = {d: [t for t in deployment.task_states(d, runs[d]) if t[2] not in ("success", "skipped")]
              for d in states if states[d] != "success"}
    assert states == {"nightly_sweep": "success", "backfill_hardware": "success"}, \
        f"{failed}\n" + "\n".join(deployment.task_log_tail(d, runs[d], "mine") for d in failed)


def test_soak_shards_of_different_pools_ran_at_the_same_time(soak, deployment):
    _, runs, _ = soak
    rows = deployment.airflow_db(
        "SELECT task_id, start_date, end_date FROM task_instance WHERE dag_id = 'nightly_sweep' AND run_id = %s "
        "AND task_id LIKE 'run\\_%%' AND state = 'success'", (runs["nightly_sweep"],))
    shards = [(task_id.removeprefix("run_"), start, end) for task_id, start, end in rows]
    assert {p for p, _, _ in shards} == {p.replace("-", "_") for p in NIGHT_POOLS}
    overlapping = {frozenset((a[0], b[0])) for a in shards for b in shards
                   if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]}
    assert overlapping, f"no two pools' shards overlapped in time: {shards}"


def test_soak_every_query_was_answered(soak):
    _, _, clients = soak
    assert clients.errors == [], "\n".join(clients.errors)
    assert len(clients.answers["jdbc"]) >= 30 and clients.answers["jdbc-new"] and \
        len(clients.answers["perflake sql"]) >= 5, {k: len(v) for k, v in clients.answers.items()}


def test_soak_each_nights_tables_match_their_raw_samples(soak, deployment):
    for dt in (SEED, NIGHT, BACKFILL):
        landed = deployment.landed_rows(dt)
        assert landed, f"nothing landed for {dt}"
        assert deployment.published_rows(dt) == landed, dt
    pools = {r[0] for r in deployment.jdbc_rows(f"SELECT DISTINCT pool FROM perf.case_stats WHERE dt = '{NIGHT}'")}
    assert pools == set(NIGHT_POOLS)


def test_soak_the_new_gpus_history_is_queryable_through_jdbc(soak, deployment):
    stats = deployment.jdbc_rows(f"SELECT DISTINCT reason, pool FROM perf.runs WHERE gpu_sku = '{NEW_GPU}'")
    assert stats == [["backfill", NEW_GPU_POOL]]
    series = deployment.jdbc_rows(f"SELECT count(*), min(last_dt) FROM perf.series WHERE gpu_sku = '{NEW_GPU}'")
    expected = len(load_suite("memory").filter("copy").cases)
    assert series == [[str(expected), BACKFILL]]
    # Both mines ran at once and each rewrites perf.series: neither may lose the other's.
    night = deployment.jdbc_rows(f"SELECT count(*) FROM perf.series WHERE last_dt = '{NIGHT}'")
    assert int(night[0][0]) == 3 * len(load_suite("gemm-demo").cases)


# --- readers see writers ---------------------------------------------------------------

def _watch(session, sql: str, stop: threading.Event, seen: list, period_s: float = 0.5) -> None:
    while not stop.is_set():
        t0 = time.monotonic()
        seen.append((t0, session.query(sql)))
        stop.wait(max(0.0, period_s - (time.monotonic() - t0)))


def test_sessions_held_open_across_a_mine_see_its_tables_within_the_ttl_and_never_half(deployment):
    from pipelines.query.server import METADATA_TTL_S

    dep = deployment
    sql = f"SELECT count(*) FROM perf.samples WHERE dt = '{READERS}'"
    stop = threading.Event()
    seen: dict[str, list] = {"jdbc": [], "connect": []}
    with JdbcSession(HOST, dep.services.sql_port) as jdbc, ConnectSession(dep.services.connect_url) as connect:
        for s in (jdbc, connect):  # both sessions open and answering before the mine
            assert s.query(sql)["ok"]
        watchers = [threading.Thread(target=_watch, args=(s, sql, stop, seen[k]), daemon=True)
                    for k, s in (("jdbc", jdbc), ("connect", connect))]
        for w in watchers:
            w.start()
        try:
            dep.land(READERS)
            dep.perflake("mine", "--date", READERS)
            first_done = time.monotonic()
            first = sum(dep.landed_rows(READERS).values())
            # A second run of the same night overwrites the published partition.
            dep.land(READERS, suffix="-b")
            dep.perflake("mine", "--date", READERS)
            second_done = time.monotonic()
            time.sleep(METADATA_TTL_S + 4)
        finally:
            stop.set()
            for w in watchers:
                w.join(120)
    second = sum(dep.landed_rows(READERS).values())
    assert first < second
    for kind, observations in seen.items():
        errors = [a["error"][:500] for _, a in observations if not a["ok"]]
        assert errors == [], f"{kind}: {errors}"
        counts = [(t, int(a["rows"][0][0])) for t, a in observations]
        # Never a half-written table: nothing, the first night, or both runs of it.
        assert {c for _, c in counts} <= {0, first, second}, f"{kind}: {sorted({c for _, c in counts})}"
        settle = METADATA_TTL_S + 1
        late_first = [c for t, c in counts if first_done + settle < t < second_done - 60]
        assert all(c in (first, second) for c in late_first), kind
        late_second = [c for t, c in counts if t > second_done + settle]
        assert late_second and set(late_second) == {second}, f"{kind}: {late_second}"


# --- read-only -------------------------------------------------------------------------

def _refused_statements(lake: Lake) -> list[str]:
    a_file = next((lake.table_path("samples")).rglob("*.parquet"))
    return [
        "DROP TABLE perf.samples",
        "INSERT OVERWRITE TABLE perf.runs SELECT * FROM perf.runs",
        "CREATE TABLE perf.evil (x INT) USING parquet",
        f"ALTER TABLE perf.cases SET LOCATION '{lake.root / 'evil'}'",
        f"SELECT count(*) FROM parquet.`{a_file}`",
    ]


def _tree(path: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*") if p.is_file()}


def test_jdbc_and_connect_refuse_every_change_and_the_files_stay(deployment):
    dep = deployment
    statements = _refused_statements(dep.lake)
    before = _tree(dep.lake.warehouse)
    answers = {"jdbc": dep.jdbc(*statements)}
    with ConnectSession(dep.services.connect_url) as connect:
        answers["connect"] = [connect.query(s) for s in statements]
    for kind, results in answers.items():
        accepted = [s for s, a in zip(statements, results) if a["ok"]]
        assert accepted == [], f"{kind} accepted {accepted}"
    assert _tree(dep.lake.warehouse) == before
    assert not (dep.lake.root / "evil").exists()
    assert dep.jdbc_rows("SELECT count(*) FROM perf.samples")[0][0] != "0"


def test_the_readers_metastore_role_cannot_change_rows(deployment):
    import psycopg2
    from pipelines.deploy import postgres

    for statement in ('UPDATE "TBLS" SET "OWNER" = \'evil\'', 'DELETE FROM "PARTITIONS"',
                      'INSERT INTO "DBS" ("DB_ID", "NAME") VALUES (999, \'evil\')'):
        conn = postgres.connect(deployment.services, METASTORE_DB, READER_ROLE)
        try:
            with pytest.raises(psycopg2.errors.InsufficientPrivilege), conn.cursor() as cur:
                cur.execute(statement)
        finally:
            conn.close()
    conn = postgres.connect(deployment.services, METASTORE_DB, READER_ROLE)
    try:
        with conn.cursor() as cur:
            cur.execute('SELECT count(*) FROM "TBLS"')
            assert cur.fetchone()[0] > 0  # it may read
    finally:
        conn.close()


def test_the_sql_service_runs_as_another_user_than_root(deployment):
    from pipelines.query import server as sqlserver

    st = sqlserver.status(deployment.lake)
    assert st.running
    uid = os.stat(f"/proc/{st.pid}").st_uid
    if os.getuid() == 0:
        assert uid != 0
    else:
        assert uid == os.getuid()
    # ... and that user cannot write the lake's tables.
    user = deployment.services.sql_user
    if user:
        from pipelines.config.accounts import as_user

        table = deployment.lake.table_path("samples")
        probe = subprocess.run(as_user(["touch", str(table / "written-by-the-service")], user), capture_output=True)
        assert probe.returncode != 0 and not (table / "written-by-the-service").exists()


def _secrets(services: Services) -> list[str]:
    values = [services.password(role) for role in ROLES]
    values += [(services.secrets / n).read_text().strip() for n in ("airflow-jwt-secret", "airflow-api-secret-key")]
    assert all(len(v) >= 16 for v in values)
    return values


def test_no_secret_is_on_a_command_line_or_in_a_log(deployment):
    secrets = _secrets(deployment.services)
    shown = [(st.pid, processes.cmdline(st.pid)[:200]) for st in processes.all_stats()
             if any(s.encode() in processes.cmdline(st.pid) for s in secrets)]
    assert shown == []
    root = deployment.lake.root
    logs = [p for p in root.rglob("*") if p.is_file() and (p.suffix in (".log", ".out") or "logs" in p.parts)
            and "secrets" not in p.parts and "data" not in p.relative_to(root).parts[:3]]
    assert any(p.name == "sql-server.log" for p in logs) and any(p.name == "postgres.log" for p in logs)
    leaked = [str(p) for p in logs if any(s in p.read_text(errors="replace") for s in secrets)]
    assert leaked == []


# --- faults (slow tier) ------------------------------------------------------------------

def _driver_started(mine: subprocess.Popen, timeout_s: float = 240) -> int:
    """Wait until the mine's Spark driver (its java child) runs; its pid."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert mine.poll() is None, f"the mine ended before its driver was seen:\n{mine.stdout.read()[-3000:]}"
        for st in processes.all_stats():
            if st.ppid == mine.pid and b"java" in processes.cmdline(st.pid):
                return st.pid
        time.sleep(0.5)
    raise TimeoutError("the mine's Spark driver did not start")


def _published_unchanged(dep: Deployment, before: dict[str, dict[str, int]]) -> None:
    for dt, rows in before.items():
        assert dep.published_rows(dt) == rows, f"night {dt} changed"


@pytest.mark.slow
def test_the_service_killed_during_a_mine_the_mine_still_publishes_and_up_restarts_it(deployment):
    from pipelines.query import server as sqlserver

    dep = deployment
    kept = {SEED: dep.published_rows(SEED)}
    dep.land(KILL_SERVICE)
    mine = dep.mine(KILL_SERVICE)
    try:
        _driver_started(mine)
        time.sleep(8)
        pid = sqlserver.status(dep.lake).pid
        assert pid is not None and mine.poll() is None
        os.killpg(pid, signal.SIGKILL)
        out, _ = mine.communicate(timeout=600)
    finally:
        if mine.poll() is None:
            os.killpg(mine.pid, signal.SIGKILL)
    # Mining runs in its own driver against the metastore, not in the service.
    assert mine.returncode == 0, out[-4000:]
    assert not sqlserver.status(dep.lake).running
    dep.perflake("services", "up", timeout=600)
    assert dep.published_rows(KILL_SERVICE) == dep.landed_rows(KILL_SERVICE)
    _published_unchanged(dep, kept)


@pytest.mark.slow
def test_a_mine_whose_driver_is_killed_publishes_on_its_rerun_and_loses_nothing(deployment):
    dep = deployment
    kept = {SEED: dep.published_rows(SEED)}
    dep.land(KILL_DRIVER)
    mine = dep.mine(KILL_DRIVER)
    try:
        _driver_started(mine)
        deadline = time.monotonic() + 120
        # Mid-run: once the mine writes anything for the night, or 20 s into its driver.
        started = time.monotonic()
        while time.monotonic() < deadline and mine.poll() is None:
            if any(f"dt={KILL_DRIVER}" in str(p) for p in dep.lake.warehouse.rglob("*")) or \
                    time.monotonic() - started > 20:
                break
            time.sleep(0.3)
        assert mine.poll() is None, "the mine finished before it could be killed"
        os.killpg(mine.pid, signal.SIGKILL)
        mine.wait(30)
    finally:
        if mine.poll() is None:
            os.killpg(mine.pid, signal.SIGKILL)
    assert mine.returncode == -signal.SIGKILL
    dep.perflake("mine", "--date", KILL_DRIVER)
    assert dep.published_rows(KILL_DRIVER) == dep.landed_rows(KILL_DRIVER)
    _published_unchanged(dep, kept)


@pytest.mark.slow
def test_postgresql_restarted_during_a_mine_the_mine_or_its_retry_publishes(deployment):
    from pipelines.deploy import postgres

    dep = deployment
    kept = {SEED: dep.published_rows(SEED)}
    dep.land(PG_RESTART)
    mine = dep.mine(PG_RESTART)
    try:
        _driver_started(mine)
        time.sleep(8)
        assert mine.poll() is None
        postgres.stop(dep.services)
        time.sleep(2)
        postgres.start(dep.services)
        out, _ = mine.communicate(timeout=600)
    finally:
        if mine.poll() is None:
            os.killpg(mine.pid, signal.SIGKILL)
    if mine.returncode != 0:  # the retry Airflow would make
        dep.perflake("mine", "--date", PG_RESTART)
    assert dep.published_rows(PG_RESTART) == dep.landed_rows(PG_RESTART), out[-3000:]
    _published_unchanged(dep, kept)
