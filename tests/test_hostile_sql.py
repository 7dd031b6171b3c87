"""A hostile user against every SQL endpoint: the JDBC server (one per module, with
authentication), `perflake sql` on Spark (a session behind the gate, in a process of its
own as the CLI runs it) and `perflake sql` on DuckDB. The same corpus goes over Spark
Connect, the shared service's other endpoint, in tests/test_hostile_connect.py.

Every statement of the corpus must be refused with one sentence on every engine, the
server must stay up, the lake's tables and files must stay as they were, and nothing
outside the lake may be read: a canary file outside the lake holds a secret that must
never appear in any answer. Loopback only; every wait is bounded.

The lake is built by a subprocess with an ordinary Spark session (its embedded Derby
metastore admits one process at a time: the builder, the Spark CLI run and the server
take turns)."""
from __future__ import annotations

import json
import os
import secrets
import threading
import time
from pathlib import Path

import pytest

from kernels_bench.collectives import free_port
from pipelines.config.lake import Lake
from pipelines.query import server as sqlserver
from pipelines.query import users as sqlusers
from pipelines.query.sql import REFUSAL_PREFIX, refusal_in

from hostile import CORPUS, DQ_ROWS, ENV_CANARY, RUNAWAYS, at_once, _fill, _ids, _snapshot, _subprocess, assert_refused_by_spark

USER, PASSWORD = "analyst", "s3cret-" + secrets.token_hex(8)
QUERY_TIMEOUT_S, MAX_ROWS, MAX_SCRATCH_MB = 20, 100, 50
RUNAWAY_GRACE_S = 5  # how long a cancelled statement's task may run on here


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The lake, the paths the corpus names, each engine's answers, and the running
    server (stopped at the end, pass or fail)."""
    base = tmp_path_factory.mktemp("hostile")
    lake = Lake(base / "lake")
    outside = base / "outside"
    outside.mkdir()
    secret = "CANARY-" + secrets.token_hex(12)
    (outside / "secret.txt").write_text(secret + "\n")
    (outside / "geheim-ü.txt").write_text(secret + "\n")
    paths = {"canary": str(outside / "secret.txt"), "canary_unicode": str(outside / "geheim-ü.txt"),
             "outside": str(outside), "marker": str(base / "pwned"), "warehouse": str(lake.warehouse)}
    statements = [_fill(sql, paths) for sql, _ in CORPUS]
    # in the environment of the CLI's process and the server's, as a secret would be
    os.environ[ENV_CANARY] = secret
    try:
        yield from _hostile(base, lake, secret, paths, statements)
    finally:
        os.environ.pop(ENV_CANARY, None)


def _hostile(base, lake, secret, paths, statements):
    """The body of the `hostile` fixture: the lake built, the corpus through the Spark CLI,
    then the server started and the corpus through JDBC."""
    _subprocess(f"from tests.hostile import _build_lake; _build_lake({str(lake.root)!r})", timeout=300)
    before = _snapshot(lake)
    stmts_file = base / "statements.json"
    stmts_file.write_text(json.dumps(statements))
    out = _subprocess(f"from tests.hostile import _run_spark_cli; "
                      f"_run_spark_cli({str(lake.root)!r}, {str(stmts_file)!r})", timeout=600)
    spark_cli = [json.loads(ln[len("RESULT "):]) for ln in out.splitlines() if ln.startswith("RESULT ")]

    sqlusers.add_user(lake, USER, PASSWORD)
    port = free_port()
    st = sqlserver.start(lake, port=port, timeout_s=300, query_timeout_s=QUERY_TIMEOUT_S, max_rows=MAX_ROWS,
                         max_scratch_mb=MAX_SCRATCH_MB, runaway_grace_s=RUNAWAY_GRACE_S)
    try:
        jdbc = dict(port=port, user=USER, password=PASSWORD, timeout_s=300)
        warm = sqlserver.query_via_jdbc(["SELECT count(*) FROM perf.dq_results"], **jdbc)
        assert warm[0]["ok"], warm
        answers = sqlserver.query_via_jdbc(statements, **jdbc)
        yield dict(lake=lake, base=base, secret=secret, paths=paths, statements=statements, before=before,
                   spark_cli=spark_cli, jdbc=answers, server=st, conn=jdbc)
    finally:
        sqlserver.stop(lake)




@pytest.mark.parametrize("i", range(len(CORPUS)), ids=_ids())
def test_jdbc_refuses_each_hostile_statement_with_one_sentence(hostile, i):
    assert_refused_by_spark(hostile["jdbc"][i], i, hostile["statements"][i], hostile["secret"])


@pytest.mark.parametrize("i", range(len(CORPUS)), ids=_ids())
def test_the_spark_cli_refuses_each_hostile_statement_with_one_line(hostile, i):
    result = hostile["spark_cli"][i]
    if result["code"] == 0 and "inert:spark" in CORPUS[i][1]:
        assert hostile["secret"] not in result["out"] + result["err"]
        return
    assert result["code"] == 2 and result["out"] == "", (hostile["statements"][i], result)
    err = result["err"].strip()
    assert err.startswith("perflake sql: ") and "\n" not in err and "Traceback" not in err, err[:800]
    assert hostile["secret"] not in err


@pytest.mark.parametrize("i", range(len(CORPUS)), ids=_ids())
def test_the_duckdb_cli_refuses_each_hostile_statement_with_one_line(hostile, i, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("PERFLAKE_HOME", str(hostile["lake"].root))
    code = main(["sql", "--engine", "duckdb", hostile["statements"][i]])
    out, err = capsys.readouterr()
    if code == 0 and "inert:duckdb" in CORPUS[i][1]:
        assert hostile["secret"] not in out
        return
    assert code == 2 and out == "", (hostile["statements"][i], out, err)
    err = err.strip()
    assert err.startswith("perflake sql: ") and "\n" not in err and "Traceback" not in err, err[:800]
    assert hostile["secret"] not in err


def test_after_the_corpus_the_server_answers_and_the_lake_is_unchanged(hostile):
    lake = hostile["lake"]
    answers = sqlserver.query_via_jdbc(["SELECT suite, success FROM perf.dq_results ORDER BY suite",
                                        "SHOW TABLES IN perf", "SELECT count(*) FROM perf.samples"], **hostile["conn"])
    assert all(a["ok"] for a in answers), answers
    assert sorted(answers[0]["rows"]) == sorted([s, str(ok).lower()] for s, ok in DQ_ROWS)
    assert {r[1] for r in answers[1]["rows"]} == {"dq_results", "samples", "v_ok"}
    assert answers[2]["rows"] == [["2"]]
    assert sqlserver.status(lake).running
    assert _snapshot(lake) == hostile["before"]
    assert not Path(hostile["paths"]["marker"]).exists()
    assert not (hostile["base"] / "outside" / "evil.jar").exists()


def test_a_legitimate_query_still_runs_on_every_engine(hostile, monkeypatch, capsys):
    from pipelines.cli import main

    # a view, a subquery, and partitions asked for within the gate's bound
    q = ("SELECT /*+ REPARTITION(8) */ suite FROM perf.v_ok "
         "WHERE suite IN (SELECT suite FROM perf.dq_results WHERE success) ORDER BY suite")
    answer = sqlserver.query_via_jdbc([q], **hostile["conn"])[0]
    assert answer["ok"] and answer["rows"] == [["copy"], ["gemm"]], answer
    # IDENTIFIER with a literal name: the gate judges the table it names, and it is answered
    answer = sqlserver.query_via_jdbc(["SELECT count(IDENTIFIER('suite')) FROM IDENTIFIER('perf.dq_results')"],
                                      **hostile["conn"])[0]
    assert answer["ok"] and answer["rows"] == [["3"]], answer
    # within the gate's bounds on nesting: brackets, type brackets, CASE, prefix operators
    nested = ("SELECT " + "(" * 40 + "1" + ")" * 40 + " AS one, CAST(NULL AS struct<a: array<map<string, "
              "struct<b: int>>>>) AS t, from_json('{\"a\": 1}', 'a INT').a AS j, "
              "from_json('{\"a\": 2}', schema_of_json('{\"a\": 0}')).a AS k, "
              "CASE WHEN NOT NOT true THEN -(-3) END AS c, 8 >> 1 AS s")
    answer = sqlserver.query_via_jdbc([nested], **hostile["conn"])[0]
    assert answer["ok"] and answer["rows"] == [["1", None, "1", "2", "3", "4"]], answer
    monkeypatch.setenv("PERFLAKE_HOME", str(hostile["lake"].root))
    assert main(["sql", "--engine", "duckdb", "--format", "csv",
                 "SELECT suite FROM perf.dq_results WHERE success ORDER BY suite"]) == 0
    assert capsys.readouterr().out.split() == ["suite", "copy", "gemm"]


def test_settings_sent_when_connecting_cannot_reopen_path_reads(hostile):
    for conf in ({"spark.sql.runSQLOnFiles": "true"}, {"spark.sql.thriftServer.queryTimeout": "0"},
                 {"spark.perflake.gate.statementTimeout": "0"}):
        answer = sqlserver.query_via_jdbc([f"SELECT * FROM text.`{hostile['paths']['canary']}`",
                                           "SELECT count(*) FROM perf.dq_results"],
                                          session_conf=conf, **hostile["conn"])
        assert not answer[0]["ok"] and hostile["secret"] not in answer[0]["error"]
        assert not answer[1]["ok"] and "configuration" in refusal_in(answer[1]["error"]), answer[1]


def test_substitution_sent_when_connecting_reads_no_variable_into_a_parse_error(hostile):
    # Spark's parser substitutes ${env:...} when the session's spark.sql.variable.substitute
    # is on, and a statement that then fails to parse came back with the variable's value in
    # the error (measured): the session is judged before its statement is parsed.
    answer = sqlserver.query_via_jdbc([f"SELECT x FROM ${{env:{ENV_CANARY}}}"],
                                      session_conf={"spark.sql.variable.substitute": "true"}, **hostile["conn"])[0]
    assert not answer["ok"] and hostile["secret"] not in answer["error"], answer
    assert "a session whose configuration sets spark.sql.variable.substitute" in (refusal_in(answer["error"]) or ""), \
        answer


def test_hadoop_settings_sent_when_connecting_are_refused(hostile):
    # Not spark.sql. settings, but they reach every file reader of the session, and Parquet
    # instantiates the class this one names (measured: the read failed in that class).
    for conf in ({"parquet.crypto.factory.class": "java.lang.String"},
                 {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem"}):
        answer = sqlserver.query_via_jdbc(["SELECT count(*) FROM perf.dq_results"], session_conf=conf,
                                          **hostile["conn"])[0]
        assert not answer["ok"] and f"a session whose configuration sets {next(iter(conf))}" in answer["error"]


# --- authentication and audit --------------------------------------------------------

def test_wrong_or_missing_passwords_are_refused_and_audited(hostile):
    conn = {**hostile["conn"]}
    for user, password in ((USER, "wrong-password"), (USER, None), ("mallory", PASSWORD)):
        answer = sqlserver.query_via_jdbc(["SELECT 1"], **{**conn, "user": user, "password": password})[0]
        assert not answer["ok"] and "login" in answer["error"].lower(), answer
    audit = sqlserver.audit_log(hostile["lake"]).read_text()
    assert 'login-refused user="mallory"' in audit


def test_the_audit_log_names_the_user_of_every_statement_and_no_secret(hostile):
    lake = hostile["lake"]
    audit = sqlserver.audit_log(lake).read_text()
    queries = [ln for ln in audit.splitlines() if " query " in ln]
    assert len(queries) >= len(CORPUS)
    assert all(f'user="{USER}"' in ln for ln in queries)
    assert 'statement="DROP TABLE perf.dq_results"' in audit
    assert any(ln.split()[1] == "refused" and f'user="{USER}"' in ln and REFUSAL_PREFIX in ln
               for ln in audit.splitlines())
    for text in (audit, sqlserver.log_file(lake).read_text(errors="replace"),
                 sqlserver.properties_file(lake).read_text(), sqlserver.password_file(lake).read_text()):
        assert PASSWORD not in text
    assert oct(sqlserver.password_file(lake).stat().st_mode & 0o777) == "0o600"


def test_the_service_listens_on_loopback_only(hostile):
    """The JDBC port, and Spark's own driver ports (RPC, block manager: no authentication)
    that Spark binds to the host's network address unless told otherwise (found by a
    newcomer walking the docs)."""
    import psutil

    jvm = psutil.Process(hostile["server"].pid)
    listening = {(c.laddr.ip, c.laddr.port) for p in [jvm, *jvm.children(recursive=True)]
                 for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
    assert hostile["conn"]["port"] in {port for _, port in listening}
    assert len(listening) >= 3, listening
    assert all(ip in ("127.0.0.1", "::ffff:127.0.0.1", "::1") for ip, _ in listening), listening


def test_no_secret_on_the_servers_command_line(hostile):
    from pipelines.config import processes

    cmdline = processes.cmdline(hostile["server"].pid).decode(errors="replace")
    assert "hive.server2.authentication=CUSTOM" in cmdline
    assert PASSWORD not in cmdline and "ConnectionPassword" not in cmdline


# --- bounded statements --------------------------------------------------------------

def test_results_are_capped_at_max_rows(hostile):
    answer = sqlserver.query_via_jdbc(["SELECT id FROM range(100000)"], **{**hostile["conn"]}, max_rows=10 ** 6)[0]
    assert answer["ok"] and len(answer["rows"]) == MAX_ROWS


def test_a_heavy_query_times_out_while_a_light_one_is_answered(hostile):
    """Thousands of small tasks: the FAIR pool lets the light statement's tasks in
    between; the heavy one is cancelled at the statement timeout and its client told so
    in perflake's sentence (HiveServer2's own timeout left Hive's driver to print "Query
    timed out after 0 seconds"); the server stays up."""
    heavy = "SELECT count(*) FROM range(0, 100000000000, 1, 20000) a WHERE a.id % 7 = 3"
    result: dict = {}

    def run_heavy():
        t0 = time.monotonic()
        result["answer"] = sqlserver.query_via_jdbc([heavy], **hostile["conn"])[0]
        result["seconds"] = time.monotonic() - t0

    thread = threading.Thread(target=run_heavy)
    thread.start()
    time.sleep(5)
    t0 = time.monotonic()
    light = sqlserver.query_via_jdbc(["SELECT count(*) FROM perf.dq_results"], **hostile["conn"])[0]
    light_s = time.monotonic() - t0
    thread.join(timeout=QUERY_TIMEOUT_S + 120)
    assert not thread.is_alive()
    assert light["ok"] and light["rows"] == [["3"]]
    assert "seconds" in result and light_s < result["seconds"], (light_s, result)
    assert not result["answer"]["ok"], result
    assert (f"perflake stopped this statement: it timed out after {QUERY_TIMEOUT_S} s, the SQL service's limit "
            "for every statement") in result["answer"]["error"], result
    assert result["seconds"] < QUERY_TIMEOUT_S + 60
    assert sqlserver.query_via_jdbc(["SELECT 1"], **hostile["conn"])[0]["rows"] == [["1"]]
    assert any(" timed-out " in ln and "reason=" in ln for ln in sqlserver.audit_log(hostile["lake"]).read_text().splitlines())


def test_a_timed_out_statement_gives_its_cores_back(hostile):
    """Both of the service's task slots (local[2]) taken by rows that ignore interrupts, and
    a statement thread folding a constant that does. Before perflake.gate.RunawayTasks, all
    three timed out and their threads ran on: every later statement, this light one too,
    timed out behind them for minutes (measured). Now each thread is stopped
    RUNAWAY_GRACE_S after its statement was cancelled."""
    answers = at_once(lambda sql: sqlserver.query_via_jdbc([sql], **hostile["conn"])[0], RUNAWAYS,
                      QUERY_TIMEOUT_S + 120)
    assert set(answers) == set(RUNAWAYS)
    for sql, answer in answers.items():
        assert not answer["ok"] and "timed out" in answer["error"].lower(), (sql, answer)
    light = sqlserver.query_via_jdbc(["SELECT count(*) FROM perf.dq_results"], **hostile["conn"])[0]
    assert light["ok"] and light["rows"] == [["3"]], light
    # The light statement needed one slot; the other stops may come a tick or two later.
    deadline = time.monotonic() + RUNAWAY_GRACE_S + 15
    while True:
        stopped = [ln for ln in sqlserver.audit_log(hostile["lake"]).read_text().splitlines()
                   if " runaway-stopped " in ln]
        tasks = {ln.split(" task=")[1].split()[0] for ln in stopped if " task=" in ln}
        folded = [ln for ln in stopped if ' thread="HiveServer2-Background-Pool' in ln]
        if (len(tasks) >= 2 and folded) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(tasks) >= 2, stopped  # the two tasks
    assert folded, stopped  # the folding statement's own thread


def test_a_statement_filling_the_scratch_disk_is_stopped_before_its_timeout(hostile):
    """Shuffle and spill files are the service's disk: unbounded, this statement wrote 5 GB
    in 120 s on a 2-core machine (and the pipeline's writes to the lake share the disk).
    It is stopped once it has written more than the service's limit (50 MB here)."""
    distinct = ("SELECT count(DISTINCT s) FROM (SELECT concat(sha2(cast(id AS string), 512), "
                "sha2(cast(id + 1 AS string), 512)) AS s FROM range(0, 100000000000))")
    t0 = time.monotonic()
    answers = sqlserver.query_via_jdbc([distinct, "SELECT 1"], **hostile["conn"])
    assert time.monotonic() - t0 < QUERY_TIMEOUT_S + 10
    assert not answers[0]["ok"], answers[0]
    assert "perflake stopped this statement: it wrote" in answers[0]["error"], answers[0]["error"][:2000]
    assert "over the limit of 50 MB for one statement" in answers[0]["error"]
    assert answers[1]["ok"] and answers[1]["rows"] == [["1"]]
    assert "over-scratch" in sqlserver.audit_log(hostile["lake"]).read_text()


def test_a_query_that_exhausts_memory_fails_alone(hostile):
    answers = sqlserver.query_via_jdbc(["SELECT length(repeat('x', 2000000000))", "SELECT 1"], **hostile["conn"])
    assert not answers[0]["ok"]
    assert answers[1]["ok"] and answers[1]["rows"] == [["1"]]
    assert sqlserver.status(hostile["lake"]).running


def test_a_statement_that_fills_the_heap_is_stopped_before_the_service_runs_out(hostile):
    """Spark does not count what collect_list keeps: unguarded, this filled the service's
    1 GB heap, and the OutOfMemoryErrors landed on other threads (its client's connection,
    Spark's context cleaner and heartbeats, once the listener bus, which stopped the
    SparkContext). perflake.gate.MemoryGuard stops it at 80 % and its task with it (the task
    itself may still run out of memory, which fails only that task)."""
    log = sqlserver.status(hostile["lake"]).log
    offset = log.stat().st_size
    fills = "SELECT size(collect_list(repeat('x', 50000))) FROM range(0, 10000000, 1, 1)"
    answers = sqlserver.query_via_jdbc([fills, "SELECT count(*) FROM perf.dq_results"], **hostile["conn"])
    assert not answers[0]["ok"]
    assert "perflake stopped this statement: the SQL service's memory was" in answers[0]["error"], answers[0]
    assert answers[1]["ok"] and answers[1]["rows"] == [["3"]], answers[1]
    assert " out-of-memory " in sqlserver.audit_log(hostile["lake"]).read_text()
    with log.open("rb") as f:  # the statement's own task may run out; no other thread may
        f.seek(offset)
        since = f.read()
    for death in (b"Exception in thread", b"Uncaught exception in thread", b"UncaughtExceptionHandler"):
        assert death not in since, since[since.find(death) - 200:][:1000]
