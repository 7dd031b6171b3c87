"""The Spark Thrift Server (HiveServer2 protocol: JDBC, ODBC, beeline, BI tools) over
the lake's catalog, run as a detached process with a pid file and a log under
`<lake>/run/`, and its users, audit log and scheduler pools under
`<lake>/services/sql-server/`.

pip's pyspark ships no sbin/start-thriftserver.sh; the server is started the way that
script does it, `spark-submit --class ...HiveThriftServer2 spark-internal`, with the
same configuration as `pipelines.warehouse.session.spark_conf(lake)`, read from a
properties file (never from the command line, which `ps` shows to everyone).

The server is read-only for its users and bounded (docs/security.md):
- the gate (`pipelines/query/gate`, a Spark session extension inside the server's JVM)
  refuses every statement that is not a read-only query over the tables of `perf`;
- every statement has a timeout (`query_timeout_s`; over Spark Connect the gate's
  watchdog, perflake.gate.ConnectTimeout, enforces the same setting) and at most `max_rows`
  result rows, and runs in a FAIR scheduler pool (`adhoc` over JDBC, `default`, declared
  FAIR, over Spark Connect);
- with users in the password file (`perflake sql-server add-user NAME`) it requires a
  user name and password (HiveServer2 CUSTOM authentication); without, it accepts anyone
  and so listens on loopback only. The audit log names the user of every statement.

Embedded, the Derby metastore admits ONE process at a time: while the server runs, no
other process can open a Spark session on the same lake, and the server cannot start
while one is open; query through the server meanwhile, or use `--engine duckdb`. In
services mode (`make up`, docs/deploy.md) the metastore is the shared PostgreSQL one: the
server (also answering Spark Connect, to clients that present the lake's Connect token,
behind the Connect guard `perflake.gate.ConnectGuard`) connects with a read-only role, runs as an OS user that cannot write the lake, and mines
run beside it.
"""
from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipelines.config import accounts, processes
from pipelines.config.lake import Lake
from pipelines.config.services import CONNECT_TOKEN_ENV, HOST, READER_ROLE, configured
from pipelines.query import gate
from pipelines.query.files import (audit_log, log_file, password_file, pid_file, pools_file, properties_file,
                                  run_dir, service_dir, tls_configured, tls_dir)
from pipelines.query.users import users
from pipelines.warehouse.preflight import services_down
from pipelines.warehouse.session import merged_conf, spark_conf, spark_home

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10000
MAIN_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
QUERY_TIMEOUT_S = 300
JDBC_BACKSTOP_S = 5  # HiveServer2's own timeout comes this much later (perflake.gate.JdbcTimeout)
MAX_ROWS = 100_000
MAX_SCRATCH_MB = 10_240  # shuffle and spill files one statement may write (perflake.gate.ScratchBound)
RUNAWAY_GRACE_S = 20  # how long a cancelled statement's task may run on (perflake.gate.RunawayTasks)
POOL = "adhoc"
METADATA_TTL_S = 2


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    host: str
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"jdbc:hive2://{_connect_host(self.host)}:{self.port}"



def server_conf(lake: Lake, *, query_timeout_s: int = QUERY_TIMEOUT_S, max_rows: int = MAX_ROWS,
                max_scratch_mb: int = MAX_SCRATCH_MB, runaway_grace_s: int = RUNAWAY_GRACE_S,
                auth: bool = False) -> dict[str, str]:
    """The server's Spark configuration: the lake's (`spark_conf`), the gate, the bounds on
    every statement, the ad-hoc scheduler pool and the audit listener."""
    services = configured(lake)
    conf = merged_conf({"spark.sql.catalogImplementation": "hive"}, spark_conf(lake, READER_ROLE), gate.session_conf())
    java_options = [conf.get("spark.driver.extraJavaOptions", ""), f"-Dperflake.audit.log={audit_log(lake)}"]
    if auth:
        java_options.append(f"-D{'perflake.auth.passwd.file'}={password_file(lake)}")
    conf.update({
        "spark.driver.extraJavaOptions": " ".join(o for o in java_options if o),
        "spark.extraListeners": ",".join([gate.AUDIT_LISTENER, gate.JDBC_TIMEOUT, gate.SCRATCH_BOUND,
                                          gate.RUNAWAY_TASKS, gate.MEMORY_GUARD]),
        "spark.perflake.gate.maxRows": str(int(max_rows)),
        "spark.perflake.gate.maxScratchBytes": f"{int(max_scratch_mb)}m",
        "spark.perflake.gate.runawayGraceSeconds": f"{int(runaway_grace_s)}s",
        # The limit on every statement: JdbcTimeout and ConnectTimeout stop a statement
        # that outlives it, in a sentence of their own. HiveServer2's timeout, whose
        # client reads only "Query timed out after 0 seconds", is a backstop a little
        # later, for a JDBC statement that has no job to cancel.
        "spark.perflake.gate.statementTimeout": f"{int(query_timeout_s)}s",
        "spark.sql.thriftServer.queryTimeout": f"{int(query_timeout_s) + JDBC_BACKSTOP_S if query_timeout_s else 0}s",
        # Ad-hoc statements share the service's cores fairly among themselves and with
        # other pools, instead of queueing behind one heavy statement (FIFO).
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(pools_file(lake)),
        "spark.sql.thriftserver.scheduler.pool": POOL,
        # A task that runs out of memory fails its statement, not the whole service.
        "spark.executor.killOnFatalError.depth": "0",
    })
    if tls_configured(lake):
        # HiveServer2's own TLS on the binary transport; the keystore's password travels
        # in the properties file like every other setting.
        conf.update({
            "spark.hadoop.hive.server2.use.SSL": "true",
            "spark.hadoop.hive.server2.keystore.path": str(tls_dir(lake) / "keystore.p12"),
            "spark.hadoop.hive.server2.keystore.password": (tls_dir(lake) / "keystore.password").read_text().strip(),
        })
    if services is not None:
        scratch = service_dir(lake) / "scratch"
        conf.update({
            # The same application answers Spark Connect (perflake sql, compare, project),
            # behind the same gate: plans from Connect clients pass the same rule.
            "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(services.connect_port),
            # ...and behind the guard, which refuses what the gate never sees as a plan
            # (artifacts, Scala UDF payloads, cache calls) before Spark's planner reads it.
            "spark.connect.grpc.interceptor.classes": gate.CONNECT_GUARD,
            # A refusal or a failed statement reaches a Connect client as its message,
            # without the service's Java stack trace (pyspark shows it when this is on).
            "spark.sql.connect.serverStacktrace.enabled": "false",
            # Readers see writers: a held-open session re-reads a table's location and
            # partition files from the metastore at most this many seconds after a mine
            # publishes (a snapshot publish moves the location; the old snapshot stays
            # readable meanwhile, pipelines/warehouse/snapshots.py).
            "spark.sql.metadataCacheTTLSeconds": str(METADATA_TTL_S),
            # ...and lists a partition's files afresh for every query (no file cache); a
            # listing made just before a publish still reads a whole version, since the
            # replaced snapshot's files stay a while (pipelines/warehouse/snapshots.py).
            "spark.sql.hive.filesourcePartitionFileCacheSize": "0",
            # Hive's scratch space, the service's own (it may not write elsewhere).
            "spark.hadoop.hive.exec.scratchdir": str(scratch / "hdfs"),
            "spark.hadoop.hive.exec.local.scratchdir": str(scratch / "local"),
            "spark.hadoop.hive.downloaded.resources.dir": str(scratch / "resources"),
            "spark.local.dir": str(scratch / "spark"),
            "spark.hadoop.javax.jdo.option.ConnectionPassword": services.password(READER_ROLE),
        })
    return conf


def server_command(lake: Lake, host: str, port: int, *, auth: bool = False) -> list[str]:
    """The spark-submit command line that runs the server on `host:port` over `lake`; its
    configuration is in `properties_file(lake)` (written by `start`), not on the line."""
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", MAIN_CLASS,
           "--name", "perflake-sql-server", "--master", os.environ.get("PERFLAKE_SPARK_MASTER", "local[2]"),
           "--properties-file", str(properties_file(lake)), "spark-internal",
           "--hiveconf", f"hive.server2.thrift.bind.host={host}", "--hiveconf", f"hive.server2.thrift.port={port}",
           "--hiveconf", f"hive.server2.authentication={'CUSTOM' if auth else 'NONE'}"]
    if auth:
        cmd += ["--hiveconf", f"hive.server2.custom.authentication.class={gate.AUTHENTICATOR}"]
    return cmd


def _write_pools(lake: Lake) -> None:
    pools_file(lake).write_text(f"""<?xml version="1.0"?>
<!-- perflake sql-server: ad-hoc statements run in pool {POOL}; Spark Connect's operations,
     which name no pool, in pool "default", with the same weight and as FAIR inside (Spark's
     own default pool is FIFO: one heavy operation would hold every core until it ends); a
     job sharing this Spark application (pool "pipeline") gets twice the share and at least
     one core. -->
<allocations>
  <pool name="{POOL}"><schedulingMode>FAIR</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
  <pool name="default"><schedulingMode>FAIR</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
  <pool name="pipeline"><schedulingMode>FAIR</schedulingMode><weight>2</weight><minShare>1</minShare></pool>
</allocations>
""")


def _write_properties(lake: Lake, conf: dict[str, str], run_as: str = "") -> None:
    """The server's configuration, readable by the server's user only (it holds the
    metastore password in services mode)."""
    accounts.write_private(properties_file(lake), "".join(f"{k}={_property(v)}\n" for k, v in conf.items()),
                           owner=run_as)


def _property(value: str) -> str:
    """A value in java.util.Properties syntax (backslashes and line breaks escaped)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def start(lake: Lake, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, timeout_s: float = 120.0,
          query_timeout_s: int = QUERY_TIMEOUT_S, max_rows: int = MAX_ROWS,
          max_scratch_mb: int = MAX_SCRATCH_MB, runaway_grace_s: int = RUNAWAY_GRACE_S,
          run_as: str = "") -> ServerStatus:
    """Start the server detached and return once it accepts connections on host:port.
    With users in `password_file(lake)` it authenticates every connection; without, it
    may listen on loopback only (ValueError otherwise). Raises RuntimeError (with the
    log's tail) if it exits or does not listen in time; the half-started process is
    stopped first. `run_as` names the OS user the server runs as (root only; services
    mode: a user that may read the lake but not write it)."""
    auth = bool(users(lake))
    if host not in _LOOPBACK and not auth:
        raise ValueError(f"host {host!r} is not loopback and the server has no users to authenticate: add one with "
                         f"`perflake sql-server add-user NAME` first (an unauthenticated port lets anyone who reaches "
                         f"it query the lake)")
    down = services_down(lake)
    if down:
        raise RuntimeError(down)
    current = status(lake)
    if current.running:
        raise RuntimeError(f"a SQL server already runs for this lake (pid {current.pid}, {current.url}); "
                           f"stop it first with `perflake sql-server stop`")
    if _accepts(host, port):
        raise RuntimeError(f"port {port} on {host} is already in use by another program; choose another --port")
    service_dir(lake).mkdir(parents=True, exist_ok=True)
    run_dir(lake).mkdir(parents=True, exist_ok=True)
    _write_pools(lake)
    _write_properties(lake, server_conf(lake, query_timeout_s=query_timeout_s, max_rows=max_rows,
                                        max_scratch_mb=max_scratch_mb, runaway_grace_s=runaway_grace_s,
                                        auth=auth), run_as)
    services = configured(lake)
    if services is None:
        lake.metastore.mkdir(parents=True, exist_ok=True)
        workdir = lake.root  # stray Derby or Spark files land in the lake
    else:
        workdir = service_dir(lake)
        for sub in ("scratch", "scratch/hdfs", "scratch/local", "scratch/resources", "scratch/spark"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)
            accounts.give(workdir / sub, run_as, mode=0o700)
        # The server writes its audit log here and reads the password file.
        accounts.give(workdir, run_as, mode=0o700)
        for f in (password_file(lake), pools_file(lake), tls_dir(lake) / "keystore.p12"):
            if f.exists():
                accounts.give(f, run_as, mode=0o600)
        if tls_dir(lake).is_dir():
            accounts.give(tls_dir(lake), run_as, mode=0o700)
    env = _server_env(services, workdir if run_as else None)
    log = log_file(lake)
    offset = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        out.write(f"\n--- perflake sql-server start {time.strftime('%Y-%m-%dT%H:%M:%S')} ---\n".encode())
        out.flush()
        # A session of its own, so that stop() can end the JVM and any child by group.
        proc = subprocess.Popen(server_command(lake, host, port, auth=auth), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True, env=env,
                                **accounts.popen_user(run_as))
    pid_file(lake).write_text(json.dumps({"pid": proc.pid, "host": host, "port": port}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _forget(lake)
            raise RuntimeError(f"the SQL server exited with code {proc.returncode} before listening"
                               f"{_diagnosis(log, offset)}; its log is {log}:\n{_tail(log, offset)}")
        if _accepts(host, port) and (services is None or _accepts(HOST, services.connect_port)):
            return ServerStatus(True, proc.pid, host, port, log)
        time.sleep(0.5)
    stop(lake)
    raise RuntimeError(f"the SQL server did not listen on {host}:{port} within {timeout_s:.0f} s"
                       f"{_diagnosis(log, offset)}; it was stopped; its log is {log}:\n{_tail(log, offset)}")


def _server_env(services, home: Path | None) -> dict[str, str]:
    """The server's environment: this process's, with `home` as HOME (another OS user's),
    and in services mode Spark Connect's token, which the server reads at start. Not in its
    properties: a Connect client reads the service's Spark settings with spark.conf.get
    (Spark hides only the names it takes for secrets); nor on its command line (`ps`)."""
    env = {k: v for k, v in os.environ.items() if k != CONNECT_TOKEN_ENV}
    if home is not None:
        env["HOME"] = str(home)
    if services is not None:
        env[CONNECT_TOKEN_ENV] = services.connect_token()
    return env


def stop(lake: Lake, *, timeout_s: float = 30.0) -> bool:
    """Stop the lake's server and wait until its process is gone; False if none ran."""
    st = status(lake)
    if st.pid is None or not _is_server(st.pid):
        _forget(lake)
        return False
    processes.stop_group(st.pid, timeout_s=timeout_s)  # it leads its own session (start_new_session)
    _forget(lake)
    return True


def status(lake: Lake) -> ServerStatus:
    """What the pid file says, checked against the live process (a stale file reads as
    not running)."""
    f = pid_file(lake)
    try:
        info = json.loads(f.read_text())
        pid, host, port = int(info["pid"]), str(info["host"]), int(info["port"])
    except FileNotFoundError:
        return ServerStatus(False, None, DEFAULT_HOST, DEFAULT_PORT, log_file(lake))
    except (ValueError, KeyError, TypeError) as e:
        raise RuntimeError(f"{f} is not a valid pid file ({e}); delete it if no server runs") from None
    running = _is_server(pid)
    return ServerStatus(running, pid if running else None, host, port, log_file(lake))


# --- clients -------------------------------------------------------------------------

def query_via_jdbc(statements: list[str], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
                   user: str | None = None, password: str | None = None, timeout_s: float = 300.0,
                   max_rows: int = 1000, session_conf: dict[str, str] | None = None,
                   truststore: Path | None = None, truststore_password: str | None = None) -> list[dict]:
    """Send each statement, exactly as written, over one JDBC connection (Hive's own
    driver, through perflake.gate.SqlClient) and return one result per statement:
    {"ok": True, "columns": [...], "rows": [[str | None, ...], ...]} or
    {"ok": False, "error": "..."}. The password travels in a private temporary file,
    never on a command line. `session_conf` is sent in the URL as a client may (the
    server refuses statements in a session whose settings differ from its own). With
    `truststore` the connection is TLS, the server's certificate checked against it
    (its password, which guards public certificates only, goes in the URL). Raises
    RuntimeError if the client itself fails."""
    java = shutil.which("java") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin" / "java")
    url = f"jdbc:hive2://{_connect_host(host)}:{port}/default"
    if truststore is not None:  # TLS: the server's certificate must chain to this trust store
        url += f";ssl=true;sslTrustStore={truststore}"
        if truststore_password:
            url += f";trustStorePassword={truststore_password}"
    if session_conf:
        url += "?" + ";".join(f"{k}={v}" for k, v in session_conf.items())
    with tempfile.TemporaryDirectory(prefix="perflake-jdbc-") as tmp:
        secret = ""
        if password is not None:
            secret = str(Path(tmp) / "password")
            accounts.write_private(Path(secret), password)
        cmd = [java, "-Xmx512m", "-cp", f"{spark_home() / 'jars'}/*:{gate.gate_jar()}", gate.CLIENT, url,
               user or os.environ.get("USER", "perflake"), secret, str(int(max_rows))]
        lines = "".join(base64.b64encode(s.encode()).decode() + "\n" for s in statements)
        proc = subprocess.run(cmd, input=lines, capture_output=True, text=True, timeout=timeout_s)
    results = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if len(results) != len(statements):
        raise RuntimeError(f"the JDBC client answered {len(results)} of {len(statements)} statements "
                           f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return results


def query_via_beeline(sql: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
                      timeout_s: float = 120.0, user: str | None = None,
                      password_file: Path | None = None) -> tuple[list[str], list[list[str]]]:
    """Run `sql` with pyspark's beeline and return its output as (header, rows of
    strings); ([], []) when it printed nothing. Meant for one query per call: the
    outputs of several statements run together. The password, if any, is read by
    beeline from `password_file` (-w), never passed on the command line. Raises
    RuntimeError with beeline's output when a statement fails."""
    cmd = [str(spark_home() / "bin" / "beeline"), "-u", f"jdbc:hive2://{_connect_host(host)}:{port}",
           "-n", user or os.environ.get("USER", "perflake"), "--silent=true", "--showHeader=true",
           "--outputformat=csv2", "-e", sql]
    if password_file is not None:
        cmd[5:5] = ["-w", str(password_file)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    # beeline can exit 0 after a failed statement in -e mode; its error lines say so.
    if proc.returncode != 0 or "Error:" in proc.stderr or "Error:" in proc.stdout:
        raise RuntimeError(f"beeline failed (exit {proc.returncode}) on {sql!r}:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    # Even when silent, beeline prefixes the first output line with its prompt.
    text = re.sub(r"^\d+: jdbc:hive2://\S*> ?", "", proc.stdout.lstrip("\n"))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return [], []
    # csv2 quotes a field that needs it with NUL, not '"', unless quoting is configured.
    table = list(csv.reader(io.StringIO("\n".join(lines)), quotechar="\0"))
    return table[0], table[1:]


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((_connect_host(host), port), timeout=1.0):
            return True
    except OSError:
        return False


def _is_server(pid: int) -> bool:
    """The pid is alive and is our server, not a process that reused a stale pid."""
    return processes.alive(pid) and MAIN_CLASS.encode() in processes.cmdline(pid)


def _forget(lake: Lake) -> None:
    pid_file(lake).unlink(missing_ok=True)


def _read_from(path: Path, offset: int) -> str:
    """The log written since `offset` (this start's part of an appended log)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(path: Path, offset: int, lines: int = 40) -> str:
    return "\n".join(_read_from(path, offset).splitlines()[-lines:]) or "(empty log)"


def _diagnosis(log: Path, offset: int) -> str:
    text = _read_from(log, offset)
    if "Another instance of Derby may have already booted the database" in text:
        return (" because another process (a Spark session or a SQL server) holds this lake's embedded Derby "
                "metastore, which admits one process; stop it, or configure a shared metastore database")
    if "Address already in use" in text:
        return " because the port is in use"
    return ""
