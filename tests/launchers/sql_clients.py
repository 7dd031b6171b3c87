"""Long-lived SQL clients of the services' Spark SQL service, each in a process of its
own, for tests and benchmarks that need a session held open across a mine:

- `JdbcSession`: one HiveServer2 connection (the same Java client as
  `pipelines.query.server.query_via_jdbc`, fed one statement at a time);
- `ConnectSession`: one Spark Connect session (pyspark's Connect client; this file run
  as a script), so that the caller's process never holds a Spark session of either kind.

Both take a statement and answer {"ok": True, "columns": [...], "rows": [[str|None]]}
or {"ok": False, "error": "..."}, with the seconds the answer took as "s".
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pipelines.config.services import CONNECT_TOKEN_ENV


class _LineSession:
    """A child process that reads base64 statements on stdin and answers one JSON line each."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True)

    def query(self, sql: str) -> dict:
        t0 = time.monotonic()
        self.proc.stdin.write(base64.b64encode(sql.encode()).decode() + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the SQL client exited (code {self.proc.poll()}): {self.proc.stderr.read()[-2000:]}")
            if line.startswith("{"):
                return {**json.loads(line), "s": time.monotonic() - t0}

    def close(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class JdbcSession(_LineSession):
    """One JDBC connection to jdbc:hive2://host:port, held open until `close`."""

    def __init__(self, host: str, port: int, user: str = "perflake", max_rows: int = 1000):
        from pipelines.query import gate
        from pipelines.warehouse.session import spark_home

        java = shutil.which("java") or str(Path(os.environ.get("JAVA_HOME", "/usr")) / "bin" / "java")
        super().__init__([java, "-Xmx256m", "-cp", f"{spark_home() / 'jars'}/*:{gate.gate_jar()}", gate.CLIENT,
                          f"jdbc:hive2://{host}:{port}/default", user, "", str(int(max_rows))])


class ConnectSession(_LineSession):
    """One Spark Connect session to `url` (sc://host:port), held open until `close`,
    presenting `token` (None: none), which reaches the child in its environment."""

    def __init__(self, url: str, max_rows: int = 1000, token: str | None = None):
        env = {k: v for k, v in os.environ.items() if k != CONNECT_TOKEN_ENV}
        if token is not None:
            env[CONNECT_TOKEN_ENV] = token
        super().__init__([sys.executable, __file__, url, str(int(max_rows))], env=env)


def _serve_connect(url: str, max_rows: int) -> None:
    """The Connect child: one session, one answer line per statement line (pyspark sends
    $SPARK_CONNECT_AUTHENTICATE_TOKEN as the token when it is set)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    for line in sys.stdin:
        if not line.strip():
            continue
        sql = base64.b64decode(line).decode()
        try:
            df = spark.sql(sql)
            rows = [[None if v is None else str(v) for v in r] for r in df.limit(max_rows).collect()]
            out = {"ok": True, "columns": df.columns, "rows": rows}
        except Exception as e:  # noqa: BLE001 (every failure is an answer to the caller)
            out = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:2000]}"}
        print(json.dumps(out), flush=True)
    spark.stop()


if __name__ == "__main__":
    _serve_connect(sys.argv[1], int(sys.argv[2]))
