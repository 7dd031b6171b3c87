"""Every known failure of a command is one sentence and a non-zero exit, without a
traceback (issue #20); -v adds the traceback. No test here starts Spark: each check
happens before a JVM would."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PERFLAKE = Path(sys.executable).parent / "perflake"


def perflake(*args: str, lake: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {**os.environ, "PERFLAKE_HOME": str(lake), **(env or {})}
    return subprocess.run([str(PERFLAKE), *args], capture_output=True, text=True, env=full, timeout=timeout,
                          cwd=REPO)


def one_sentence(proc: subprocess.CompletedProcess, command: str) -> str:
    """The error line, after checking the exit and that nothing else (no traceback) was said."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith(f"perflake {command}: error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def test_metastore_held_by_another_process_is_named_with_its_pid(tmp_path):
    lock = tmp_path / "metastore" / "metastore_db" / "dbex.lck"
    lock.parent.mkdir(parents=True)
    lock.write_bytes(b"")
    # Derby holds an exclusive POSIX lock on dbex.lck while the database is open.
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(lock)!r}, os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX)\n"
                               "print('locked', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        line = one_sentence(perflake("regressions", lake=tmp_path), "regressions")
        assert "held by another process" in line and f"pid {holder.pid}" in line
    finally:
        holder.kill()
        holder.wait()


def test_java_not_found_says_how_to_install_it(tmp_path):
    env = {"PATH": str(tmp_path / "no-java-here"), "JAVA_HOME": ""}
    line = one_sentence(perflake("regressions", lake=tmp_path, env=env), "regressions")
    assert "Java not found" in line and "JAVA_HOME" in line


def test_mining_a_date_with_nothing_landed_says_so_before_spark(tmp_path):
    started = time.monotonic()
    line = one_sentence(perflake("mine", "--date", "2020-01-01", lake=tmp_path), "mine")
    assert "nothing landed for 2020-01-01" in line
    assert time.monotonic() - started < 60  # no JVM was started


def test_a_report_for_a_date_without_runs_says_to_mine_it(tmp_path):
    line = one_sentence(perflake("report", "--date", "2020-01-01", lake=tmp_path), "report")
    assert "no published runs" in line


def test_unknown_pool_lists_the_known_ones(tmp_path):
    line = one_sentence(perflake("mine", "--date", "2020-01-01", "--pool", "no-such-pool", lake=tmp_path), "mine")
    assert "unknown pool 'no-such-pool'" in line and "sim-h100" in line


def test_unknown_gpu_sku_lists_the_catalog(tmp_path):
    line = one_sentence(perflake("project", "--target", "NO-SUCH-GPU", lake=tmp_path), "project")
    assert "unknown GPU SKU 'NO-SUCH-GPU'" in line and "H100-SXM5-80GB" in line


def test_unknown_suite_lists_the_known_ones():
    proc = subprocess.run([sys.executable, "-m", "kernels_bench", "list", "--suite", "no-such-suite"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no suite 'no-such-suite'; known suites:" in proc.stderr and "gemm-demo" in proc.stderr


def test_port_in_use_names_the_port_and_the_way_out(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_sentence(perflake("web", "--port", str(port), lake=tmp_path), "web")
    assert f"port {port} on 127.0.0.1 is in use" in line and "--port" in line


def test_verbose_adds_the_traceback_to_the_sentence(tmp_path):
    proc = perflake("-v", "report", "--date", "2020-01-01", lake=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "perflake report: error: no published runs" in proc.stderr


def test_an_unknown_error_keeps_its_traceback():
    from pipelines.cli.failures import known_failure

    assert known_failure(ZeroDivisionError("a bug")) is None
    assert known_failure(KeyError("unknown pool 'x'")) == "unknown pool 'x'"


@pytest.mark.parametrize("text", ["java.sql.SQLException: Another instance of Derby may have already booted the "
                                  "database /lake/metastore/metastore_db."])
def test_a_derby_lock_inside_a_jvm_error_is_the_metastore_sentence(text):
    from pipelines.cli.failures import known_failure

    try:
        try:
            raise RuntimeError(text)
        except RuntimeError as inner:
            raise RuntimeError("An error occurred while calling o42.sql") from inner
    except RuntimeError as outer:
        assert "held by another process" in known_failure(outer)


@pytest.mark.parametrize("argv", [["mine", "--date", "2026-11-2"], ["regressions", "--date", "yesterday"],
                                  ["report", "--date", "2026-13-01"], ["ingest", "x", "--pool", "cpu", "--date", "1"],
                                  ["report", "compare", "--sku-a", "A", "--sku-b", "B", "--date-a", "2026-02-30"],
                                  ["triage", "list", "--today", "x"], ["model", "llama-8b", "--date", "11/22"]])
def test_a_date_that_is_not_a_night_is_refused_before_any_work(argv, capsys):
    from pipelines.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)  # nothing has run yet: no Spark session, no report step
    assert exit_.value.code == 2
    assert re.search(r"error: argument --(date|date-a|today): date '.*' is not (YYYY-MM-DD|a calendar date)",
                     capsys.readouterr().err)


@pytest.mark.parametrize("argv, code", [(["pools"], 2), (["sql-server", "start"], 1)])  # 1: "did not come up"
def test_a_lake_on_services_that_are_down_says_make_up(tmp_path, argv, code):
    # a lake that `make up` set up, its PostgreSQL stopped (a port where nothing listens)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "services.json").write_text(json.dumps({"pg_port": free}))
    proc = perflake(*argv, lake=tmp_path, timeout=60)
    assert proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr
    assert f"perflake {argv[0]}: error: this lake runs on shared services" in proc.stderr
    assert f"their PostgreSQL (127.0.0.1:{free}) does not answer: start them with `make up`" in proc.stderr


def test_every_commands_help_renders():
    # argparse formats help with %: a stray "%" in a help text breaks `--help` of that command
    import argparse

    from pipelines.cli import build_parser

    def walk(parser, path):
        parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, [*path, name])
        yield path

    assert len(list(walk(build_parser(), ["perflake"]))) > 20


def test_perflake_airflow_reaches_the_lakes_own_airflow_or_says_how_to_start_it(tmp_path):
    # A bare `airflow` would use ~/airflow; `perflake airflow` sets the lake's home,
    # database and DAG folder (`make airflow`'s), whatever the shell exports.
    shell = {"AIRFLOW_HOME": str(tmp_path / "elsewhere"), "AIRFLOW__CORE__DAGS_FOLDER": "/nowhere"}
    conn = perflake("airflow", "config", "get-value", "database", "sql_alchemy_conn", lake=tmp_path, env=shell)
    dags = perflake("airflow", "config", "get-value", "core", "dags_folder", lake=tmp_path, env=shell)
    assert conn.stdout.strip() == f"sqlite:///{tmp_path}/airflow/airflow.db", conn.stderr
    assert dags.stdout.strip() == str(REPO / "dags"), dags.stderr
    line = one_sentence(perflake("airflow", "dags", "list", lake=tmp_path, env=shell), "airflow")
    assert f"has no Airflow yet ({tmp_path}/airflow/airflow.db does not exist)" in line and "make airflow" in line
    assert perflake("airflow", "db", "migrate", lake=tmp_path, env=shell).returncode == 0
    listed = perflake("airflow", "dags", "list", "-o", "json", lake=tmp_path, env=shell)
    assert listed.returncode == 0 and "graphviz" not in listed.stdout + listed.stderr, listed.stdout
    assert not (tmp_path / "elsewhere").exists()  # the shell's AIRFLOW_HOME was never used
