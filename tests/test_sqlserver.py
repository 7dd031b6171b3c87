"""The SQL server (Spark Thrift Server) over a lake: start, query through beeline (the
gate refuses DDL and path reads), stop. The hostile corpus, authentication, the audit
log and the bounds are in test_hostile_sql.py.

It runs on a lake of its own: the embedded Derby metastore admits one process, and the
test session's Spark already holds the shared test lake's."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kernels_bench.collectives import free_port

from pipelines.config import processes
from pipelines.config.lake import Lake
from pipelines.query import server as sqlserver




def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


@pytest.fixture
def server_lake(tmp_path):
    """A separate lake with one Parquet file; whatever server a test starts on it is
    stopped afterwards, pass or fail."""
    lake = Lake(tmp_path / "lake")
    data = lake.root / "external" / "t"
    data.mkdir(parents=True)
    pq.write_table(pa.table({"x": pa.array([3, 4, 5], pa.int64())}), data / "part-0.parquet")
    yield lake
    sqlserver.stop(lake)


def test_the_server_answers_sql_over_jdbc_refuses_ddl_and_stops_cleanly(server_lake):
    port = free_port()
    st = sqlserver.start(server_lake, port=port, timeout_s=180)
    assert st.running and st.host == "127.0.0.1" and _listening(port)
    assert sqlserver.status(server_lake).pid == st.pid
    with pytest.raises(RuntimeError, match="already runs for this lake"):
        sqlserver.start(server_lake, port=free_port())

    header, rows = sqlserver.query_via_beeline("SELECT count(*) AS n, sum(id) AS total FROM range(4)", port=port)
    assert header == ["n", "total"] and rows == [["4", "6"]]
    location = (server_lake.root / "external" / "t").as_uri()
    with pytest.raises(RuntimeError, match="this statement: CREATE NAMESPACE is a command"):
        sqlserver.query_via_beeline("CREATE DATABASE IF NOT EXISTS perf", port=port)
    with pytest.raises(RuntimeError, match="this statement: reading .* by path"):
        sqlserver.query_via_beeline(f"SELECT * FROM parquet.`{location}`", port=port)

    # The embedded engine cannot open the lake the server holds: one sentence, not a traceback.
    cli = subprocess.run([str(Path(sys.executable).parent / "perflake"), "sql", "SELECT 1"], capture_output=True, text=True,
                         env={**os.environ, "PERFLAKE_HOME": str(server_lake.root)}, timeout=120)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr, cli.stderr
    assert "the SQL server (pid" in cli.stderr and "use --engine duckdb" in cli.stderr, cli.stderr

    assert sqlserver.stop(server_lake) is True
    assert not _listening(port)
    assert not processes.alive(st.pid)
    assert not sqlserver.status(server_lake).running
    assert sqlserver.stop(server_lake) is False


def test_a_non_loopback_host_needs_users_to_authenticate(tmp_path):
    with pytest.raises(ValueError, match="add-user"):
        sqlserver.start(Lake(tmp_path), host="0.0.0.0")


def test_a_port_taken_by_another_program_is_reported_before_starting(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(RuntimeError, match="already in use"):
            sqlserver.start(Lake(tmp_path), port=s.getsockname()[1])
    assert not sqlserver.pid_file(Lake(tmp_path)).exists()


def test_the_cli_has_start_stop_and_status_on_loopback_by_default():
    from pipelines.cli import build_parser

    args = build_parser().parse_args(["sql-server", "start", "--port", "10001"])
    assert (args.action, args.host, args.port) == ("start", "127.0.0.1", 10001)
    args = build_parser().parse_args(["sql-server", "add-user", "alice"])
    assert (args.action, args.name) == ("add-user", "alice")
    assert build_parser().parse_args(["sql-server", "status"]).func.__name__ == "_cmd_sql_server"


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args], check=True, capture_output=True)


def test_with_a_certificate_the_endpoint_speaks_tls_and_a_plain_client_gets_nothing(server_lake, tmp_path):
    """A keystore in <lake>/services/sql-server/tls turns TLS on: a client that trusts the
    certificate gets answers; a plain-text client gets no answer from the server."""
    tls = sqlserver.tls_dir(server_lake)
    tls.mkdir(parents=True)
    keystore, trust, cert = tls / "keystore.p12", tmp_path / "trust.p12", tmp_path / "server.crt"
    _keytool("-genkeypair", "-alias", "perflake", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
             "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1", "-storetype", "PKCS12",
             "-keystore", str(keystore), "-storepass", "keystore-secret", "-keypass", "keystore-secret")
    (tls / "keystore.password").write_text("keystore-secret\n")
    _keytool("-exportcert", "-alias", "perflake", "-keystore", str(keystore), "-storepass", "keystore-secret",
             "-file", str(cert))
    _keytool("-importcert", "-noprompt", "-alias", "perflake", "-file", str(cert), "-storetype", "PKCS12",
             "-keystore", str(trust), "-storepass", "trust-pass")
    assert sqlserver.tls_configured(server_lake)
    port = free_port()
    sqlserver.start(server_lake, port=port, timeout_s=180)
    (answer,) = sqlserver.query_via_jdbc(["SELECT count(*) AS n FROM range(3)"], port=port, truststore=trust,
                                         truststore_password="trust-pass", timeout_s=180)
    assert answer["ok"] and answer["rows"] == [["3"]], answer
    try:  # no TLS on the client: the handshake never completes, nothing is answered
        plain = sqlserver.query_via_jdbc(["SELECT 1"], port=port, timeout_s=60)
    except (RuntimeError, subprocess.TimeoutExpired):
        plain = [{"ok": False}]
    assert not plain[0]["ok"], plain
    assert "keystore-secret" not in processes.cmdline(sqlserver.status(server_lake).pid).decode(errors="replace")
