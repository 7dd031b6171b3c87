"""The shared services (issue 17, docs/deploy.md) on a fresh lake of their own: PostgreSQL,
the metastore on it, the Spark SQL service (JDBC + Spark Connect) and Airflow, brought up
once by `perflake services up` and taken down at the end, whatever happened.

- the soak (fast tier; the deployment's first night, about 9 minutes on two cores, two mines
  at once): a three-pool nightly sweep and a new GPU's backfill through the services'
  Airflow (the fast tier's one test on a real Airflow scheduler), while one client queries
  JDBC every 2 s and another runs `perflake sql` every 15 s; every query answered, the
  tables equal the raw samples, the new GPU queryable (benchmarks/services_soak.py is the
  longer version, with a seeded lake and the figures);
- readers see writers (end-to-end tier): sessions held open across a mine that replaces a
  published night see its new version within the service's metadata TTL, and never a
  half-written table nor the night gone, while a heavy query beside them is stopped at the
  statement timeout;
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
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kernels_bench.suite import load_suite
from pipelines.config import processes
from pipelines.config.lake import Lake
from pipelines.config.services import HOST, METASTORE_DB, READER_ROLE, ROLES, Services

from launchers.services_lake import (FAST, NEW_GPU, NEW_GPU_POOL, NIGHT_POOLS, QueryClients, ServicesLake,
                                     require_packages)
from launchers.sql_clients import JdbcSession

# Dates in the past (Airflow runs no logical date in the future), each test its own.
NIGHT, BACKFILL = "2026-08-02", "2026-08-03"
KILL_SERVICE, KILL_DRIVER, PG_RESTART = "2026-08-05", "2026-08-06", "2026-08-07"
# The SQL service's statement timeout on this deployment (the default, 300 s, would make
# the heavy-query test wait five minutes); every other query here takes seconds.
QUERY_TIMEOUT_S = 40


def _fast_tier_selected(session: pytest.Session) -> bool:
    """Whether any selected test of this module outside the slow tier uses the deployment
    (the soak and the tests that read its tables)."""
    return any(item.module.__name__ == __name__ and "deployment" in item.fixturenames
               and item.get_closest_marker("slow") is None for item in session.items)


@pytest.fixture(scope="module")
def deployment(request):
    """The services up on a fresh lake, and its first night run as the soak (fast tier,
    bounded, loopback only): (a) a nightly sweep over three simulated pools and (b) a new
    GPU's backfill, both through the services' Airflow at once, while (c) one client
    queries JDBC every 2 s and another runs `perflake sql` every 15 s, from the night's
    first publication (a fresh lake has no table to query before it) to the end of both
    runs. Down and deleted at the end. benchmarks/services_soak.py is the longer version.

    A run of the slow tests alone (`make test-full`, CI's second command) needs only a published
    night: there the services come up without Airflow and one night is landed and mined
    by `perflake mine`; the soak (9-13 min on two cores with its query clients, and its
    Airflow daemons taking CPU from every later mine) ran in the fast tier already."""
    require_packages()
    if not _fast_tier_selected(request.session):
        with ServicesLake.create(settings={"PERFLAKE_SQL_QUERY_TIMEOUT_S": str(QUERY_TIMEOUT_S)},
                                 with_airflow=False) as dep:
            dep.land(NIGHT)
            dep.perflake("mine", "--date", NIGHT, timeout=1500)
            yield dep
        return
    with ServicesLake.create(settings={"PERFLAKE_SQL_QUERY_TIMEOUT_S": str(QUERY_TIMEOUT_S)}) as dep:
        dep.unpause("nightly_sweep", "backfill_hardware")
        # JDBC every 2 s and `perflake sql` every 15 s: every client query is CPU taken from
        # the two mines on a 2-core machine (benchmarks/services_soak.py loads it harder).
        clients = QueryClients(dep, jdbc_period_s=2.0, cli_period_s=15.0, after_first_publication=True).start()
        runs = {"nightly_sweep": "soak_night", "backfill_hardware": "soak_backfill"}
        try:
            dep.trigger("nightly_sweep", runs["nightly_sweep"], {"pools": NIGHT_POOLS, "suites": ["gemm-demo"],
                                                                 "stopping": FAST}, f"{NIGHT}T02:00:00+00:00")
            dep.trigger("backfill_hardware", runs["backfill_hardware"],
                        {"pools": [NEW_GPU_POOL], "suites": ["memory"], "kernel": "copy", "stopping": FAST},
                        f"{BACKFILL}T03:00:00+00:00")
            states = {dag_id: dep.wait_run(dag_id, run_id, timeout_s=2400) for dag_id, run_id in runs.items()}
        finally:
            clients.stop()
        dep.soak = (states, runs, clients)
        yield dep


def _mine_logs(dep: ServicesLake, runs: dict[str, str]) -> str:
    return "\n".join(dep.task_log_tail(d, r, "mine")[-2000:] for d, r in runs.items())


def test_soak_the_night_and_the_backfill_both_succeed_through_the_services_airflow(deployment):
    dep = deployment
    states, runs, _ = dep.soak
    failed = {d: [t for t in dep.task_states(d, runs[d]) if t[2] not in ("success", "skipped")] for d in states}
    assert states == {"nightly_sweep": "success", "backfill_hardware": "success"}, \
        f"{failed}\n" + "\n".join(dep.task_log_tail(d, runs[d], t[0]) for d in failed for t in failed[d])
    # `perflake info` says what the lake holds and each service's state.
    shown = json.loads(dep.perflake("info", "--format", "json", timeout=180).stdout)
    assert shown["nights"]["count"] == 2
    assert shown["samples"] == sum(sum(dep.landed_rows(dt).values()) for dt in (NIGHT, BACKFILL))
    assert set(shown["services"]) >= {"postgresql", "spark-sql-service", "airflow-scheduler"}
    assert all(state in ("running", "healthy") for state in shown["services"].values()), shown["services"]


def test_the_commands_that_read_through_spark_connect_answer(deployment):
    # after `make up` they read over Spark Connect; pyspark.sql.functions once asserted a local JVM there
    assert "in the whole history" in deployment.perflake("regressions", timeout=300).stdout
    listed = json.loads(deployment.perflake("triage", "list", "--all", "--format", "json", timeout=300).stdout)
    assert isinstance(listed["regressions"], list)


def test_soak_shards_of_different_pools_ran_at_the_same_time(deployment):
    _, runs, _ = deployment.soak
    rows = deployment.airflow_db(
        "SELECT task_id, start_date, end_date FROM task_instance WHERE dag_id = 'nightly_sweep' AND run_id = %s "
        "AND task_id LIKE 'run\\_%%' AND map_index >= 0 AND state = 'success'", (runs["nightly_sweep"],))
    shards = [(task_id.removeprefix("run_"), start, end) for task_id, start, end in rows]
    assert {p for p, _, _ in shards} == {p.replace("-", "_") for p in NIGHT_POOLS}
    overlapping = {frozenset((a[0], b[0])) for a in shards for b in shards
                   if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]}
    assert overlapping, f"no two pools' shards overlapped in time: {shards}"


def test_soak_every_query_was_answered(deployment):
    _, _, clients = deployment.soak
    assert clients.errors == [], "\n".join(clients.errors)
    answered = {k: len(v) for k, v in clients.latencies.items()}
    # The clients query from the night's first publication to the end of both runs, a
    # window as long as the machine is slow (on a quiet 2-core machine about 40 s, 19-20
    # queries, where a fixed 20 failed): at least half the JDBC queries its period
    # allows, and some of each kind.
    first, stop = clients.querying_s
    allowed = (stop - first) / clients.jdbc_period_s
    assert answered["jdbc"] + answered["jdbc-new"] >= max(10, allowed / 2), (answered, stop - first)
    assert answered["jdbc-new"] >= 1 and answered["perflake sql"] >= 2, answered


def test_soak_each_nights_tables_match_their_raw_samples(deployment):
    dep = deployment
    for dt in (NIGHT, BACKFILL):
        landed = dep.landed_rows(dt)
        assert landed, f"nothing landed for {dt}"
        assert dep.published_rows(dt) == landed, f"{dt}\n{_mine_logs(dep, dep.soak[1])}"
    stats = dep.jdbc_rows(f"SELECT pool, device_kind, count(*) FROM perf.case_stats WHERE dt = '{NIGHT}' "
                          "AND status = 'ok' AND median_ns > 0 GROUP BY pool, device_kind ORDER BY pool")
    assert stats == [[p, "simulated", str(len(load_suite("gemm-demo").cases))] for p in sorted(NIGHT_POOLS)]


def test_soak_the_new_gpus_history_is_queryable_through_jdbc(deployment):
    stats = deployment.jdbc_rows(f"SELECT DISTINCT reason, pool FROM perf.runs WHERE gpu_sku = '{NEW_GPU}'")
    assert stats == [["backfill", NEW_GPU_POOL]], _mine_logs(deployment, deployment.soak[1])
    series = deployment.jdbc_rows(f"SELECT count(*), min(last_dt) FROM perf.series WHERE gpu_sku = '{NEW_GPU}'")
    expected = {pc.case.case_id for pc in load_suite("memory").filter("copy").cases}
    assert series == [[str(len(expected)), BACKFILL]]
    # The catalog narrowed by the backfill's Params (suite, kernel glob), with the suite's own
    # case ids: the new GPU's rows line up with every other run of those cases.
    stats = deployment.jdbc_rows(f"SELECT case_id, kernel, status, median_ns FROM perf.case_stats "
                                 f"WHERE dt = '{BACKFILL}' AND pool = '{NEW_GPU_POOL}'")
    assert {r[0] for r in stats} == expected and len(stats) == len(expected)
    assert all(kernel == "copy" and status == "ok" and float(median) > 0 for _, kernel, status, median in stats), stats
    # Both mines ran at once and each rewrites perf.series: neither may lose the other's.
    night = deployment.jdbc_rows(f"SELECT count(*) FROM perf.series WHERE last_dt = '{NIGHT}'")
    assert int(night[0][0]) == 3 * len(load_suite("gemm-demo").cases)


# --- readers see writers ---------------------------------------------------------------

def _watch(session, sql: str, stop: threading.Event, seen: list, period_s: float = 0.5) -> None:
    while not stop.is_set():
        t0 = time.monotonic()
        seen.append((t0, session.query(sql)))
        stop.wait(max(0.0, period_s - (time.monotonic() - t0)))


@pytest.mark.slow  # one more mine (3-4 min on a quiet 2-core machine): the end-to-end tier
def test_sessions_held_open_across_a_mine_see_its_tables_and_a_heavy_query_beside_them_is_stopped(deployment):
    """Readers see writers: sessions held open across a mine that replaces a published
    night (JDBC and Spark Connect, a light query every 0.5 s) see its new version within
    the metadata TTL and never a half-written one, nor the night gone for a moment. One
    user's heavy statement, sent as the mine starts, cannot starve them or the night: it
    is cancelled at the service's statement timeout while the sessions keep being
    answered and the mine publishes."""
    from pipelines.query.server import METADATA_TTL_S, query_via_jdbc

    dep = deployment
    night = NIGHT  # published by the deployment's first night; a second run of it lands here
    sql = f"SELECT count(*) FROM perf.samples WHERE dt = '{night}'"
    heavy = "SELECT count(*) FROM range(0, 100000000000, 1, 20000) a WHERE a.id % 7 = 3"
    heavy_result: dict = {}

    def run_heavy():
        heavy_result["start"] = time.monotonic()
        heavy_result["answer"] = query_via_jdbc([heavy], HOST, dep.services.sql_port,
                                                timeout_s=QUERY_TIMEOUT_S + 240)[0]
        heavy_result["end"] = time.monotonic()

    published = dep.published_rows(night)
    first = sum(published.values())
    assert first > 0 and published == dep.landed_rows(night)
    stop = threading.Event()
    seen: dict[str, list] = {"jdbc": [], "connect": []}
    heavy_thread = threading.Thread(target=run_heavy, daemon=True)
    with JdbcSession(HOST, dep.services.sql_port) as jdbc, dep.connect() as connect:
        for s in (jdbc, connect):  # both sessions open and answering before the mine
            assert s.query(sql)["ok"]
        watchers = [threading.Thread(target=_watch, args=(s, sql, stop, seen[k]), daemon=True)
                    for k, s in (("jdbc", jdbc), ("connect", connect))]
        for w in watchers:
            w.start()
        try:
            # A second run of the published night: the mine replaces its partitions.
            dep.land(night, suffix="-readers")
            mine = dep.mine(night)
            try:
                _driver_started(mine)
                heavy_thread.start()
                out, _ = mine.communicate(timeout=1500)
            finally:
                if mine.poll() is None:
                    os.killpg(mine.pid, signal.SIGKILL)
            assert mine.returncode == 0, out[-4000:]
            done = time.monotonic()
            heavy_thread.join(QUERY_TIMEOUT_S + 240)
            time.sleep(METADATA_TTL_S + 4)
        finally:
            stop.set()
            for w in watchers:
                w.join(120)
    second = sum(dep.landed_rows(night).values())
    assert first < second
    assert dep.published_rows(night) == dep.landed_rows(night)
    for kind, observations in seen.items():
        errors = [a["error"][:500] for _, a in observations if not a["ok"]]
        assert errors == [], f"{kind}: {errors}"
        counts = [(t, int(a["rows"][0][0])) for t, a in observations]
        # Never a half-written table and never the night gone: the old version or the new one.
        assert {c for _, c in counts} <= {first, second}, f"{kind}: {sorted({c for _, c in counts})}"
        late = [c for t, c in counts if t > done + METADATA_TTL_S + 1]
        assert late and set(late) == {second}, f"{kind}: {late}"
    # The heavy statement: cancelled at the timeout, not before and not long after, and the
    # sessions' light queries (sent and answered while it ran) were answered meanwhile.
    assert not heavy_thread.is_alive() and not heavy_result["answer"]["ok"], heavy_result
    assert "timed out" in heavy_result["answer"]["error"].lower(), heavy_result["answer"]["error"][:1000]
    heavy_s = heavy_result["end"] - heavy_result["start"]
    assert QUERY_TIMEOUT_S - 5 <= heavy_s < QUERY_TIMEOUT_S + 90, heavy_s
    for kind, observations in seen.items():
        meanwhile = [t for t, a in observations if heavy_result["start"] < t and t + a["s"] < heavy_result["end"]]
        assert meanwhile, f"no {kind} query was answered while the heavy statement ran ({heavy_s:.0f} s)"


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
    with dep.connect() as connect:
        answers["connect"] = [connect.query(s) for s in statements]
    for kind, results in answers.items():
        accepted = [s for s, a in zip(statements, results) if a["ok"]]
        assert accepted == [], f"{kind} accepted {accepted}"
    assert _tree(dep.lake.warehouse) == before
    assert not (dep.lake.root / "evil").exists()
    assert dep.jdbc_rows("SELECT count(*) FROM perf.samples")[0][0] != "0"


def test_the_readers_metastore_role_cannot_change_rows(deployment):
    from psycopg2.errors import InsufficientPrivilege

    from pipelines.deploy import postgres

    for statement in ('UPDATE "TBLS" SET "OWNER" = \'evil\'', 'DELETE FROM "PARTITIONS"',
                      'INSERT INTO "DBS" ("DB_ID", "NAME") VALUES (999, \'evil\')'):
        conn = postgres.connect(deployment.services, METASTORE_DB, READER_ROLE)
        try:
            with pytest.raises(InsufficientPrivilege), conn.cursor() as cur:
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
    values.append(services.connect_token())
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


def _published_unchanged(dep: ServicesLake, before: dict[str, dict[str, int]]) -> None:
    for dt, rows in before.items():
        assert dep.published_rows(dt) == rows, f"night {dt} changed"


@pytest.mark.slow
def test_the_service_killed_during_a_mine_the_mine_still_publishes_and_up_restarts_it(deployment):
    from pipelines.query import server as sqlserver

    dep = deployment
    kept = {NIGHT: dep.published_rows(NIGHT)}
    dep.land(KILL_SERVICE)
    mine = dep.mine(KILL_SERVICE)
    try:
        _driver_started(mine)
        time.sleep(8)
        pid = sqlserver.status(dep.lake).pid
        assert pid is not None and mine.poll() is None
        os.killpg(pid, signal.SIGKILL)
        out, _ = mine.communicate(timeout=1500)
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
    kept = {NIGHT: dep.published_rows(NIGHT)}
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
    dep.perflake("mine", "--date", KILL_DRIVER, timeout=1500)
    assert dep.published_rows(KILL_DRIVER) == dep.landed_rows(KILL_DRIVER)
    _published_unchanged(dep, kept)


@pytest.mark.slow
def test_postgresql_restarted_during_a_mine_the_mine_or_its_retry_publishes(deployment):
    from pipelines.deploy import postgres

    dep = deployment
    kept = {NIGHT: dep.published_rows(NIGHT)}
    dep.land(PG_RESTART)
    mine = dep.mine(PG_RESTART)
    try:
        _driver_started(mine)
        time.sleep(8)
        assert mine.poll() is None
        postgres.stop(dep.services)
        time.sleep(2)
        postgres.start(dep.services)
        out, _ = mine.communicate(timeout=1500)
    finally:
        if mine.poll() is None:
            os.killpg(mine.pid, signal.SIGKILL)
    if mine.returncode != 0:  # the retry Airflow would make
        dep.perflake("mine", "--date", PG_RESTART, timeout=1500)
    assert dep.published_rows(PG_RESTART) == dep.landed_rows(PG_RESTART), out[-3000:]
    _published_unchanged(dep, kept)


# --- the command line (no deployment) --------------------------------------------------

def test_services_up_takes_no_airflow_as_its_own_option_and_airflow_passes_the_rest_on():
    from pipelines.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["services", "up", "--no-airflow"]).no_airflow
    assert not parse(["services", "up"]).no_airflow
    assert parse(["services", "airflow", "dags", "list", "-o", "json"]).rest == ["dags", "list", "-o", "json"]
    with pytest.raises(SystemExit):
        parse(["services", "down", "--no-airflow"])  # an option of `up` only
