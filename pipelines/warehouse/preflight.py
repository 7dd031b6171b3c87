"""What must hold before a Spark session can start, checked in Python so that a known
failure is one sentence instead of a JVM trace a minute later: Java is installed, and
the lake's embedded (Derby) metastore is not held by another process, or in services
mode the shared metastore's PostgreSQL answers."""
from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import time
from pathlib import Path

from pipelines.config.lake import Lake
from pipelines.config.services import HOST, configured


# How long a holder may take to let go before it counts as holding the metastore.
HOLDER_GRACE_S = 20.0


class SparkUnavailable(RuntimeError):
    """A Spark session cannot start here; the message says why and what to do."""


def java_binary() -> Path | None:
    """$JAVA_HOME/bin/java when JAVA_HOME is set (as spark-submit uses it), else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        p = Path(home) / "bin" / "java"
        return p if os.access(p, os.X_OK) else None
    found = shutil.which("java")
    return Path(found) if found else None


def metastore_holder(lake: Lake) -> int | None:
    """The pid of the process that holds the lake's Derby metastore (Derby keeps an
    exclusive POSIX lock on metastore_db/dbex.lck while it has the database open), or
    None when it is free."""
    lock = lake.metastore / "metastore_db" / "dbex.lck"
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return None  # never opened, or not ours to open: Spark will say
    try:
        # struct flock: l_type, l_whence, l_start, l_len, l_pid (native layout and padding).
        query = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        l_type, _, _, _, pid = struct.unpack("hhqqi4x", fcntl.fcntl(fd, fcntl.F_GETLK, query))
        return pid if l_type != fcntl.F_UNLCK and pid != os.getpid() else None
    except OSError:
        return None
    finally:
        os.close(fd)


def check_spark_can_start(lake: Lake) -> None:
    """SparkUnavailable when Java is missing or another process holds the metastore;
    nothing when this process already runs a session."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        return
    if java_binary() is None:
        where = f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java" if os.environ.get("JAVA_HOME") \
            else "no `java` on PATH"
        raise SparkUnavailable(f"Java not found ({where}): Spark needs Java 17; install it "
                               f"(Debian: apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME")
    down = services_down(lake)
    if down:
        raise SparkUnavailable(down)
    if configured(lake) is not None:
        return  # a shared metastore admits every process
    pid = _holder_after_grace(lake)
    if pid is not None:
        raise SparkUnavailable(f"the metastore {lake.metastore} is held by another process ({_describe(pid)}); "
                               f"the embedded metastore admits one process at a time: let that one finish or stop "
                               f"it, or query without Spark (perflake sql --engine duckdb)")


def services_down(lake: Lake) -> str | None:
    """Where this lake runs on shared services (`make up`) whose PostgreSQL (the
    metastore, Airflow's database) does not answer, the sentence saying so and what to
    do; else None. Asked before anything that needs them starts (Spark, an Airflow
    migration, the SQL server), so that the user reads this, not a connection error."""
    services = configured(lake)
    if services is None or _answers(HOST, services.pg_port):
        return None
    return (f"this lake runs on shared services ({services.file}) but their PostgreSQL ({HOST}:{services.pg_port}) "
            f"does not answer: start them with `make up` (or run embedded for one command with PERFLAKE_SERVICES=off)")


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False


def _holder_after_grace(lake: Lake) -> int | None:
    """The metastore's holder, waiting up to HOLDER_GRACE_S for it to let go: the JVM of a
    Spark process that has just ended keeps the lock for a few seconds while it exits."""
    deadline = time.monotonic() + HOLDER_GRACE_S
    while (pid := metastore_holder(lake)) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    return pid


def _describe(pid: int) -> str:
    """'pid N: command', naming the Python process that started the JVM when it is one."""
    from pipelines.config.processes import cmdline, stat

    def command(p: int) -> str:
        text = " ".join(cmdline(p).replace(b"\0", b" ").decode(errors="replace").split())
        return text if len(text) <= 100 else text[:100] + "..."

    what = command(pid)
    if "HiveThriftServer2" in what:
        return f"pid {pid}: the SQL server; perflake sql-server stop"
    parent = stat(pid)
    if what.split(" ", 1)[0].endswith("java") and parent and parent.ppid > 1:
        return f"pid {pid}, the Spark JVM of pid {parent.ppid}: {command(parent.ppid)}"
    return f"pid {pid}: {what or 'a process that has ended'}"
