"""The Spark Thrift Server (HiveServer2 protocol: JDBC, ODBC, beeline, BI tools) over
the lake's catalog, run as a detached process with a pid file and a log under
`<lake>/run/`.

pip's pyspark ships no sbin/start-thriftserver.sh; the server is started the way that
script does it, `spark-submit --class ...HiveThriftServer2 spark-internal`, with the
same configuration as `pipelines.warehouse.session.spark_conf(lake)`.

The embedded Derby metastore admits ONE process at a time: while the server runs, no
other process can open a Spark session on the same lake (`perflake mine`, `perflake sql`
on the Spark engine), and the server cannot start while one is open. Query through the
server meanwhile, or use `--engine duckdb`, which reads the files and not the metastore.
A shared metastore database (`spark.hadoop.javax.jdo.option.ConnectionURL` pointing at
PostgreSQL or MySQL, or a Hive metastore service) lifts the limit.

The server is NOT read-only and has no authentication: whoever reaches the port can run
any SQL, DDL included. It binds to the loopback interface unless told otherwise.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pipelines.config import processes
from pipelines.config.lake import Lake
from pipelines.warehouse.session import spark_conf, spark_home

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 10000
MAIN_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


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


def run_dir(lake: Lake) -> Path:
    return lake.root / "run"


def pid_file(lake: Lake) -> Path:
    return run_dir(lake) / "sql-server.json"


def log_file(lake: Lake) -> Path:
    return run_dir(lake) / "sql-server.log"


def server_command(lake: Lake, host: str, port: int) -> list[str]:
    """The spark-submit command line that runs the server on `host:port` over `lake`."""
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", MAIN_CLASS,
           "--name", "perflake-sql-server", "--master", os.environ.get("PERFLAKE_SPARK_MASTER", "local[2]"),
           "--conf", "spark.sql.catalogImplementation=hive"]
    for k, v in spark_conf(lake).items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + ["spark-internal", "--hiveconf", f"hive.server2.thrift.bind.host={host}",
                  "--hiveconf", f"hive.server2.thrift.port={port}"]


def start(lake: Lake, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, timeout_s: float = 120.0,
          allow_remote: bool = False) -> ServerStatus:
    """Start the server detached and return once it accepts connections on host:port.
    Raises RuntimeError (with the log's tail) if it exits or does not listen in time;
    the half-started process is stopped first."""
    if host not in _LOOPBACK and not allow_remote:
        raise ValueError(f"host {host!r} is not loopback: the server has no authentication and accepts any SQL; "
                         f"pass allow_remote=True (--allow-remote) only on a trusted network")
    current = status(lake)
    if current.running:
        raise RuntimeError(f"a SQL server already runs for this lake (pid {current.pid}, {current.url}); "
                           f"stop it first with `perflake sql-server stop`")
    if _accepts(host, port):
        raise RuntimeError(f"port {port} on {host} is already in use by another program; choose another --port")
    run_dir(lake).mkdir(parents=True, exist_ok=True)
    lake.metastore.mkdir(parents=True, exist_ok=True)
    log = log_file(lake)
    offset = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        out.write(f"\n--- perflake sql-server start {time.strftime('%Y-%m-%dT%H:%M:%S')} ---\n".encode())
        out.flush()
        # A session of its own, so that stop() can end the JVM and any child by group.
        # The working directory is the lake, so stray Derby or Spark files land there.
        proc = subprocess.Popen(server_command(lake, host, port), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=lake.root, start_new_session=True)
    pid_file(lake).write_text(json.dumps({"pid": proc.pid, "host": host, "port": port}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _forget(lake)
            raise RuntimeError(f"the SQL server exited with code {proc.returncode} before listening"
                               f"{_diagnosis(log, offset)}; its log is {log}:\n{_tail(log, offset)}")
        if _accepts(host, port):
            return ServerStatus(True, proc.pid, host, port, log)
        time.sleep(0.5)
    stop(lake)
    raise RuntimeError(f"the SQL server did not listen on {host}:{port} within {timeout_s:.0f} s"
                       f"{_diagnosis(log, offset)}; it was stopped; its log is {log}:\n{_tail(log, offset)}")


def stop(lake: Lake, *, timeout_s: float = 30.0) -> bool:
    """Stop the lake's server and wait until its process is gone; False if none ran."""
    st = status(lake)
    if st.pid is None or not _is_server(st.pid):
        _forget(lake)
        return False
    _signal_group(st.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while processes.alive(st.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if processes.alive(st.pid):
        _signal_group(st.pid, signal.SIGKILL)
        while processes.alive(st.pid) and time.monotonic() < deadline + 10:
            time.sleep(0.2)
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


def query_via_beeline(sql: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
                      timeout_s: float = 120.0) -> tuple[list[str], list[list[str]]]:
    """Run `sql` with pyspark's beeline and return its output as (header, rows of
    strings); ([], []) when it printed nothing. Meant for one query per call: the
    outputs of several statements run together. Raises RuntimeError with beeline's
    output when a statement fails."""
    cmd = [str(spark_home() / "bin" / "beeline"), "-u", f"jdbc:hive2://{_connect_host(host)}:{port}",
           "-n", os.environ.get("USER", "perflake"), "--silent=true", "--showHeader=true",
           "--outputformat=csv2", "-e", sql]
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


def _signal_group(pid: int, sig: int) -> None:
    # The server leads its own session (start_new_session), so its group id is its pid.
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


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
