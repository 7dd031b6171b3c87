"""`make up` / `make down` / `make status` (also `perflake services up|down|status`): the
shared services of one lake on this host, all on 127.0.0.1 (docs/deploy.md).

    PostgreSQL 15        the Hive metastore and Airflow's metadata
    Spark SQL service    one Spark application: HiveServer2 (JDBC) and Spark Connect, read-only
    Airflow 3            scheduler, dag-processor, triggerer, API server (LocalExecutor)

`up` is idempotent: it creates what is missing, starts what is stopped and says where each
service listens and logs. `down` stops what `up` started, by the pid each one recorded.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pipelines.config import accounts
from pipelines.config.lake import Lake
from pipelines.config.services import HOST, JDBC_DRIVER_JAR, PG_BIN, WRITER_ROLE, Services, configured, planned
from pipelines.deploy import airflow, metastore, postgres
from pipelines.config.services import ServiceError
from pipelines.query import server as sqlserver

DEBIAN_PACKAGES = ("postgresql", "libpostgresql-jdbc-java")


@dataclass(frozen=True)
class State:
    name: str
    state: str          # running / healthy / stopped / ...
    pid: int | None
    listen: str
    log: Path

    def line(self) -> str:
        pid = f"pid {self.pid}" if self.pid else "-"
        return f"{self.name:<24} {self.state:<12} {pid:<11} {self.listen:<34} {self.log}"


def up(lake: Lake, *, echo=print, with_airflow: bool = True) -> list[State]:
    """Create and start every service that is missing or stopped; their states."""
    _require_packages(echo)
    services = _choose(lake)
    postgres.ensure_passwords(services)
    _ensure_connect_token(services)
    if postgres.initialise(services):
        echo(f"PostgreSQL: created the cluster in {postgres.data_dir(services)}")
    if postgres.start(services):
        echo(f"PostgreSQL: started on {HOST}:{services.pg_port}")
    postgres.wait_ready(services)
    postgres.ensure_roles_and_databases(services)
    _write_writer_properties(services)
    if metastore.create(services):
        echo(f"metastore: created the Hive metastore schema ({metastore.table_count(services)} tables) on PostgreSQL")
        adopt_tables(lake, echo)
    elif not _has_database(services):
        adopt_tables(lake, echo)  # an earlier `up` stopped before registering the lake
    if not sqlserver.status(lake).running:
        try:
            st = sqlserver.start(lake, HOST, services.sql_port, run_as=services.sql_user, **services.limits())
        except (RuntimeError, ValueError) as e:
            raise ServiceError(f"the Spark SQL service did not start: {e}") from e
        echo(f"Spark SQL service: started (pid {st.pid}) as {services.sql_user or 'this user'}")
    if with_airflow:
        airflow.write_secrets(lake, services)
        started = [c for c in airflow.COMPONENTS if airflow.pid(services, c) is None]
        if started:
            airflow.migrate(lake)
            for component in started:
                airflow.start(lake, services, component)
            airflow.wait_up(lake, services)
            echo(f"Airflow: started {', '.join(started)}")
    return status(lake)


def down(lake: Lake, *, echo=print) -> list[str]:
    """Stop the services `up` started (Airflow, the SQL service, PostgreSQL); their names."""
    services = configured(lake) or planned(lake)
    stopped = []
    for component in reversed(airflow.COMPONENTS):
        if airflow.stop(services, component):
            stopped.append(f"airflow {component}")
    if sqlserver.stop(lake):
        stopped.append("Spark SQL service")
    if postgres.stop(services):
        stopped.append("PostgreSQL")
    for name in stopped:
        echo(f"stopped {name}")
    return stopped


def status(lake: Lake) -> list[State]:
    services = configured(lake) or planned(lake)
    pg_running = postgres.running(services)
    states = [State("postgresql", _pg_health(services) if pg_running else "stopped", postgres.pid(services),
                    f"{HOST}:{services.pg_port}", postgres.log_file(services))]
    sql = sqlserver.status(lake)
    listen = f"jdbc:hive2://{HOST}:{services.sql_port}  {services.connect_url}"
    states.append(State("spark-sql-service", _sql_health(sql, services), sql.pid, listen, sql.log))
    health = airflow.healthy(lake, services)
    for component in airflow.COMPONENTS:
        listen = f"http://{HOST}:{services.airflow_port}/" if component == "api-server" else "-"
        states.append(State(f"airflow-{component}", health[component], airflow.pid(services, component), listen,
                            airflow.log_file(lake, component)))
    return states


def all_healthy(states: list[State]) -> bool:
    return all(s.state in ("running", "healthy") for s in states)


def adopt_tables(lake: Lake, echo=print) -> None:
    """Register the lake's existing tables (and their partitions) in a new metastore, in a
    Spark process of its own: the files are the truth, the metastore their index. Run on
    an empty lake too: its writer session creates the `default` and `perf` databases,
    which the read-only SQL service cannot."""
    proc = subprocess.run([sys.executable, "-m", "pipelines.deploy.adopt"], env={**os.environ,
                          "PERFLAKE_HOME": str(lake.root)}, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise ServiceError(f"registering the lake's tables in the new metastore failed (exit {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-2500:]}")
    for line in proc.stdout.splitlines():
        echo(f"metastore: {line}")


def _has_database(services: Services) -> bool:
    return metastore.has_database(services, "perf")


def _choose(lake: Lake) -> Services:
    """The lake's services (services.json), created on the first `up` with the OS users
    the processes will run as; checks those users can reach what they need."""
    services = configured(lake) or planned(lake)
    if not services.file.exists():
        services = Services(services.root, pg_port=services.pg_port, sql_port=services.sql_port,
                            connect_port=services.connect_port, airflow_port=services.airflow_port,
                            query_timeout_s=services.query_timeout_s, max_rows=services.max_rows,
                            max_scratch_mb=services.max_scratch_mb, runaway_grace_s=services.runaway_grace_s,
                            pg_user=accounts.service_user(("postgres",), "perflake-pg"),
                            sql_user=accounts.service_user((), "perflake-sql"))
        services.root.mkdir(parents=True, exist_ok=True)
        os.chmod(services.root, 0o755)
    from pipelines.query import gate
    from pipelines.warehouse.session import spark_home

    for user, path, what in ((services.pg_user, services.root, "PostgreSQL's data directory"),
                             (services.sql_user, lake.warehouse, "the lake's tables"),
                             (services.sql_user, spark_home(), "Spark (pyspark in the venv)"),
                             (services.sql_user, gate.gate_jar().parent, "the SQL gate's jar")):
        blocked = accounts.can_reach(path, user)
        if blocked is not None:
            raise ServiceError(f"the services' OS user {user!r} cannot enter {blocked} on the way to {what} ({path}); "
                               f"put the lake (PERFLAKE_HOME) and the checkout where other users may traverse, "
                               f"or `chmod o+x {blocked}`")
    lake.warehouse.mkdir(parents=True, exist_ok=True)
    services.save()
    return services


def _write_writer_properties(services: Services) -> None:
    accounts.write_private(services.spark_properties(WRITER_ROLE),
                           f"spark.hadoop.javax.jdo.option.ConnectionPassword={services.password(WRITER_ROLE)}\n")


def _ensure_connect_token(services: Services) -> None:
    """Spark Connect's token, created once (0600, owned by the caller like the passwords):
    the service gets it in its environment at start, perflake's clients read this file."""
    if not services.connect_token_file.exists():
        accounts.write_private(services.connect_token_file, secrets.token_urlsafe(32) + "\n")


def _require_packages(echo) -> None:
    missing = [p for p, ok in (("postgresql", postgres.installed()), ("libpostgresql-jdbc-java",
                                                                       JDBC_DRIVER_JAR.exists())) if not ok]
    if not missing:
        return
    if accounts.is_root() and shutil.which("apt-get"):
        echo(f"installing {' '.join(missing)} (Debian packages)")
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
            if proc.returncode != 0:
                raise ServiceError(f"{' '.join(cmd)} failed: {(proc.stderr or proc.stdout)[-800:]}")
        if postgres.installed() and JDBC_DRIVER_JAR.exists():
            return
    raise ServiceError(f"the services need the Debian packages {' '.join(missing)} ({PG_BIN}, {JDBC_DRIVER_JAR}): "
                       f"sudo apt-get install -y {' '.join(DEBIAN_PACKAGES)}")


def _pg_health(services: Services) -> str:
    try:
        postgres.connect(services, timeout_s=3).close()
        return "healthy"
    except Exception:  # noqa: BLE001 (any failure to connect is "not answering")
        return "not answering"


def _sql_health(sql, services: Services) -> str:
    if not sql.running:
        return "stopped"
    import socket

    for port in (services.sql_port, services.connect_port):
        try:
            socket.create_connection((HOST, port), timeout=2).close()
        except OSError:
            return "not answering"
    return "healthy"


