"""The hostile corpus of tests/test_hostile_sql.py over Spark Connect, the shared Spark
SQL service's second endpoint (services mode, docs/deploy.md), and Connect's token.

One deployment for the module: `perflake services up --no-airflow` on a fresh lake
(PostgreSQL, the metastore, the Spark SQL service, no Airflow), the corpus's tables
created by a writer's Spark process, then every statement sent over one Connect session
that presents the service's token. Each must be refused with the gate's one sentence (as
over JDBC); afterwards the service still answers, and the lake's files are as they were.
A client without the token, or with a wrong one, gets nothing but the service's refusal.
A client with the token then tries what reaches the service without becoming a plan the
gate judges (artifacts, a Scala UDF's payload, the cache, a Python UDF, a read by path):
the guard (perflake.gate.ConnectGuard) refuses each with one sentence, nothing lands on
the service's disk, a legitimate query is still answered, and the audit log names each
Connect statement with its self-declared user, its session and its outcome. The service's
bounds hold over Connect too: a short statement timeout (set for this deployment) stops a
heavy query with one sentence while a light one on another session is answered, and the
result-row cap cuts a long result.

A canary file outside the lake, readable by the service's OS user, holds a secret that
must never appear in an answer. Loopback only; every wait is bounded."""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from pipelines.config import processes
from pipelines.config.services import CONNECT_TOKEN_ENV
from pipelines.query import server as sqlserver
from pipelines.query.sql import REFUSAL_PREFIX, refusal_in

from launchers.services_lake import REPO, ServicesLake, require_packages
from launchers.sql_clients import ConnectSession
from hostile import CORPUS, DQ_ROWS, RUNAWAYS, at_once, _fill, _ids, _snapshot, _subprocess, assert_refused_by_spark

MAX_ROWS = 100            # the service's row cap here, and the corpus client's own limit
QUERY_TIMEOUT_S = 12      # the service's statement timeout here (JDBC's and Connect's)
MAX_SCRATCH_MB = 50       # the shuffle and spill files one statement may write here
RUNAWAY_GRACE_S = 3       # how long a cancelled statement's task may run on here
LEGIT = "SELECT suite, success FROM perf.dq_results ORDER BY suite"


def _outside() -> Path:
    """A folder outside the lake that the service's OS user may read (so that a refusal,
    not a permission, is what keeps the canary out of an answer)."""
    folder = Path(tempfile.mkdtemp(prefix="perflake-hostile-outside-"))
    os.chmod(folder, 0o755)
    return folder


@pytest.fixture(scope="module")
def connect_corpus():
    """The services on a fresh lake with the corpus's tables, and the corpus's answers
    over one Connect session; everything stopped and deleted at the end."""
    require_packages()
    outside = _outside()
    try:
        secret = "CANARY-" + secrets.token_hex(12)
        for name in ("secret.txt", "geheim-ü.txt"):
            (outside / name).write_text(secret + "\n")
            os.chmod(outside / name, 0o644)
        limits = {"PERFLAKE_SQL_QUERY_TIMEOUT_S": str(QUERY_TIMEOUT_S), "PERFLAKE_SQL_MAX_ROWS": str(MAX_ROWS),
                  "PERFLAKE_SQL_MAX_SCRATCH_MB": str(MAX_SCRATCH_MB),
                  "PERFLAKE_SQL_RUNAWAY_GRACE_S": str(RUNAWAY_GRACE_S)}
        with ServicesLake.create(prefix="perflake-hostile-connect-", with_airflow=False, settings=limits) as dep:
            lake = dep.lake
            paths = {"canary": str(outside / "secret.txt"), "canary_unicode": str(outside / "geheim-ü.txt"),
                     "outside": str(outside), "marker": str(outside / "pwned"), "warehouse": str(lake.warehouse)}
            statements = [_fill(sql, paths) for sql, _ in CORPUS]
            # The tables, by a writer's own Spark process on the shared metastore (the
            # service is read-only).
            _subprocess(f"from tests.hostile import _build_lake; _build_lake({str(lake.root)!r})",
                        timeout=300)
            before = _snapshot(lake)
            with dep.connect(max_rows=MAX_ROWS) as session:
                answers = [session.query(s) for s in statements]
            yield dict(dep=dep, secret=secret, paths=paths, statements=statements, before=before, connect=answers)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.parametrize("i", range(len(CORPUS)), ids=_ids())
def test_connect_refuses_each_hostile_statement_with_one_sentence(connect_corpus, i):
    assert_refused_by_spark(connect_corpus["connect"][i], i, connect_corpus["statements"][i], connect_corpus["secret"])


def test_after_the_corpus_over_connect_the_service_answers_and_the_lake_is_unchanged(connect_corpus):
    dep, outside = connect_corpus["dep"], Path(connect_corpus["paths"]["outside"])
    assert sqlserver.status(dep.lake).running
    with dep.connect() as session:
        answer = session.query(LEGIT)
    assert answer["ok"] and answer["rows"] == sorted([s, str(ok)] for s, ok in DQ_ROWS), answer
    assert dep.jdbc_rows("SELECT count(*) FROM perf.samples") == [["2"]]
    assert _snapshot(dep.lake) == connect_corpus["before"]
    assert not Path(connect_corpus["paths"]["marker"]).exists() and not (outside / "evil.jar").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["geheim-ü.txt", "secret.txt"]


# --- Spark Connect's token ------------------------------------------------------------

def test_a_connect_client_without_the_token_or_with_a_wrong_one_is_refused(connect_corpus):
    dep = connect_corpus["dep"]
    url = dep.services.connect_url
    for token, why in ((None, "No authentication token provided"),
                       ("wrong-" + secrets.token_urlsafe(16), "Invalid authentication token")):
        with ConnectSession(url, token=token) as session:
            answer = session.query(LEGIT)
        assert not answer["ok"] and "UNAUTHENTICATED" in answer["error"] and why in answer["error"], answer
        assert "dq_results" not in answer["error"] and "gemm" not in answer["error"]
    with dep.connect() as session:
        assert session.query(LEGIT)["ok"]


# `perflake sql` as a user who may not read the token file: root reads every file, so the
# child takes that permission away from itself before the CLI runs.
_WITHOUT_THE_TOKEN_FILE = """
import sys
from pipelines.config import services
def denied(self):
    raise PermissionError(13, "Permission denied", str(self.connect_token_file))
services.Services.connect_token = denied
from pipelines.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_perflake_sql_presents_the_token_and_without_it_says_so_in_one_line(connect_corpus):
    dep = connect_corpus["dep"]
    ok = dep.perflake("sql", "SELECT count(*) AS n FROM perf.dq_results", "--format", "csv", timeout=180)
    assert ok.stdout.split() == ["n", str(len(DQ_ROWS))]
    # A mistake in the query: one line (pyspark logged a JSON line of kB before it, found
    # walking the docs).
    typo = dep.perflake("sql", "SELECT * FROM perf.dq_result", timeout=180, check=False)
    err = typo.stderr.strip()
    assert typo.returncode == 2 and err.startswith("perflake sql: ") and "\n" not in err, err[-1500:]
    assert "TABLE_OR_VIEW_NOT_FOUND" in err, err
    env = {k: v for k, v in dep.env.items() if k != CONNECT_TOKEN_ENV}
    for extra, why in (({}, "may not read"), ({CONNECT_TOKEN_ENV: "wrong-" + secrets.token_urlsafe(16)}, "refused")):
        proc = subprocess.run([sys.executable, "-c", _WITHOUT_THE_TOKEN_FILE, "sql", LEGIT], env={**env, **extra},
                              capture_output=True, text=True, timeout=180, cwd=REPO)
        err = proc.stderr.strip()
        assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, err)
        assert err.startswith("perflake sql: ") and "\n" not in err and "Traceback" not in err, err[-1500:]
        assert why in err and CONNECT_TOKEN_ENV in err, err


# --- the guard: what the gate never sees as a plan -------------------------------------

# A Connect client with the token (perflake's own, reader_session) tries, on one session,
# what reaches the service without becoming a plan the gate judges; each answer is
# printed as one JSON line. The Scala UDF is a hand-made request (pyspark has no API for
# one) carrying harmless bytes, plain and inside a compressed plan.
_HOSTILE_CALLS = r"""
import json, sys
import grpc, zstandard
from pyspark.sql.connect import functions as F  # perflake's session is Connect without SPARK_REMOTE set
from pyspark.sql.connect.client import DefaultChannelBuilder
from pyspark.sql.connect.proto import base_pb2, expressions_pb2, relations_pb2
from pyspark.sql.connect.session import SparkSession as RemoteSparkSession
from pyspark.sql.types import StringType
from pipelines.config.lake import Lake
from pipelines.config.services import configured
from pipelines.warehouse.session import reader_session

artifact, canary, legit = sys.argv[1:4]
spark = reader_session(Lake.from_env())
client = spark.client

def scala_udf(compressed):
    udf = expressions_pb2.Expression(common_inline_user_defined_function=expressions_pb2.CommonInlineUserDefinedFunction(
        function_name="harmless", scalar_scala_udf=expressions_pb2.ScalarScalaUDF(payload=b"not Java", nullable=True)))
    relation = relations_pb2.Relation(project=relations_pb2.Project(
        input=relations_pb2.Relation(sql=relations_pb2.SQL(query="SELECT 1 AS x")), expressions=[udf]))
    req = client._execute_plan_request_with_metadata()
    if compressed:
        req.plan.compressed_operation.CopyFrom(base_pb2.Plan.CompressedOperation(
            data=zstandard.compress(relation.SerializeToString()), compression_codec=base_pb2.COMPRESSION_CODEC_ZSTD,
            op_type=base_pb2.Plan.CompressedOperation.OP_TYPE_RELATION))
    else:
        req.plan.root.CopyFrom(relation)
    client._execute_and_fetch(req, {})

def hadoop_setting(key, value):
    spark.conf.set(key, value)  # a class Parquet or Hadoop would load and instantiate
    try:
        return spark.table("perf.dq_results").count()
    finally:
        spark.conf.unset(key)

def without_token():
    other = RemoteSparkSession.builder.channelBuilder(DefaultChannelBuilder(configured(Lake.from_env()).connect_url))
    other.create().addArtifacts(artifact, file=True)

calls = {
    "artifact": lambda: spark.addArtifacts(artifact, file=True),
    "artifact_status": lambda: client.cache_artifact(b"perflake"),
    "artifact_without_token": without_token,
    "scala_udf": lambda: scala_udf(False),
    "scala_udf_compressed": lambda: scala_udf(True),
    "cache_table": lambda: spark.catalog.cacheTable("perf.dq_results"),
    "dataframe_cache": lambda: spark.table("perf.dq_results").cache().count(),
    "clear_cache": lambda: spark.catalog.clearCache(),
    "refresh_table": lambda: spark.catalog.refreshTable("perf.dq_results"),
    "python_udf": lambda: spark.table("perf.dq_results").select(F.udf(lambda s: s, StringType())("suite")).collect(),
    "read_by_path": lambda: spark.read.text(canary).collect(),
    "table_options": lambda: spark.read.option("fs.file.impl.disable.cache", "true").option(
        "fs.file.impl", "java.lang.String").table("perf.dq_results").count(),
    "drop_table": lambda: spark.sql("DROP TABLE perf.dq_results").collect(),
    # expression strings are parsed on the service (Spark's parseExpression) and analysed
    # there: without the gate's judgment of them, reflect's class was loaded and the
    # subquery's table listed with its options before the analyzed plan was judged
    "expr_reflect": lambda: spark.range(1).selectExpr("reflect('no.such.Klass', 'm')").collect(),
    "expr_options": lambda: spark.range(1).selectExpr(
        "(SELECT count(*) FROM perf.dq_results WITH ('fs.file.impl' = 'java.lang.String'))").collect(),
    "deep_expression": lambda: spark.table("perf.dq_results").selectExpr("(" * 20000 + "1" + ")" * 20000).collect(),
    "computed_schema": lambda: spark.table("perf.dq_results").select(F.from_json("suite", F.concat(
        F.repeat(F.lit("struct<a:"), F.lit(20000)), F.lit("int"), F.repeat(F.lit(">"), F.lit(20000))))).collect(),
    "env_token": lambda: [[str(v) for v in r] for r in spark.sql(
        "SELECT '${env:SPARK_CONNECT_AUTHENTICATE_TOKEN}' AS t").collect()],
    "hadoop_setting": lambda: hadoop_setting("parquet.crypto.factory.class", "java.lang.String"),
    # a DataFrame read is analysed (its files listed) without being parsed: this setting was
    # instantiated before the gate's check of the session's settings could refuse the plan
    "hadoop_listing_setting": lambda: (spark.conf.set("fs.file.impl.disable.cache", "true"),
                                       hadoop_setting("fs.file.impl", "java.lang.String")),
    "many_partitions": lambda: spark.range(0, 10, 1, 3000000).count(),
    "repartition": lambda: spark.table("perf.dq_results").repartition(3000000).count(),
    "legit": lambda: [[str(v) for v in r] for r in spark.sql(legit).collect()],
}
for name, call in calls.items():
    try:
        answer = {"ok": True, "rows": call()}
    except grpc.RpcError as e:  # a call pyspark does not wrap
        answer = {"ok": False, "code": e.code().name, "error": e.details()}
    except Exception as e:
        code = getattr(e, "getGrpcStatusCode", None)
        answer = {"ok": False, "code": code().name if code else "", "error": str(e)}
    print(json.dumps({"call": name, **answer}), flush=True)
print(json.dumps({"session": client._session_id}), flush=True)
"""
GUARDED = ["artifact", "artifact_status", "scala_udf", "scala_udf_compressed", "cache_table", "dataframe_cache",
           "clear_cache", "refresh_table", "python_udf", "read_by_path", "table_options", "computed_schema",
           "hadoop_setting", "hadoop_listing_setting"]


@pytest.fixture(scope="module")
def hostile_calls(connect_corpus):
    """The calls above over one Connect session as user `mallory-...` (self-declared), after
    the corpus; their answers, the session id, the artifact's name and the user."""
    dep, user = connect_corpus["dep"], "mallory-" + secrets.token_hex(4)
    artifact = Path(connect_corpus["paths"]["outside"]) / f"artifact-{secrets.token_hex(6)}.txt"
    artifact.write_text("uploaded " + connect_corpus["secret"] + "\n")
    try:
        proc = subprocess.run([sys.executable, "-c", _HOSTILE_CALLS, str(artifact), connect_corpus["paths"]["canary"],
                               LEGIT], env={**dep.env, "SPARK_USER": user}, capture_output=True, text=True,
                              timeout=300, cwd=REPO)
    finally:
        artifact.unlink()
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines and "session" in lines[-1], (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    return dict(answers={ln["call"]: ln for ln in lines[:-1]}, session=lines[-1]["session"], user=user,
                artifact=artifact.name)


@pytest.mark.parametrize("call", GUARDED)
def test_the_guard_refuses_what_the_gate_never_sees_with_one_sentence(hostile_calls, call):
    answer = hostile_calls["answers"][call]
    assert not answer["ok"] and answer["code"] == "PERMISSION_DENIED", answer
    assert answer["error"].startswith(REFUSAL_PREFIX) and refusal_in(answer["error"]) == answer["error"], answer
    assert "\n" not in answer["error"] and "Exception" not in answer["error"], answer


def test_the_guard_names_what_it_refused(hostile_calls):
    said = {call: hostile_calls["answers"][call]["error"] for call in GUARDED}
    assert "uploading artifacts" in said["artifact"] and "artifacts" in said["artifact_status"]
    assert "a Scala user-defined function" in said["scala_udf"] == said["scala_udf_compressed"]
    assert "catalog.cacheTable" in said["cache_table"] and "DataFrame.cache" in said["dataframe_cache"]
    assert "catalog.clearCache" in said["clear_cache"] and "catalog.refreshTable" in said["refresh_table"]
    assert "a Python user-defined function" in said["python_udf"] and "by format, path" in said["read_by_path"]
    assert "from_json with a type computed by an expression" in said["computed_schema"]
    assert "reading a table with options" in said["table_options"]
    assert "changing a setting of the session" in said["hadoop_setting"] == said["hadoop_listing_setting"]


def test_an_uploaded_artifact_lands_nowhere_and_the_token_check_still_comes_first(hostile_calls, connect_corpus):
    dep = connect_corpus["dep"]
    landed = [p for p in dep.lake.root.rglob("*") if p.name == hostile_calls["artifact"]]
    assert landed == []
    without = hostile_calls["answers"]["artifact_without_token"]
    assert not without["ok"] and without["code"] == "UNAUTHENTICATED", without


def test_after_the_guards_refusals_the_gate_still_refuses_and_a_legit_query_is_answered(hostile_calls):
    answers = hostile_calls["answers"]
    drop = answers["drop_table"]  # the gate's sentence, and nothing more: no Java stack trace
    assert not drop["ok"] and refusal_in(drop["error"]) == drop["error"], drop
    # judged as parsed ("the function reflect"), not after analysis ("reflect/java_method")
    said = {call: refusal_in(answers[call].get("error", "")) or "" for call in ("expr_reflect", "expr_options")}
    assert "the function reflect calls Java methods" in said["expr_reflect"], answers["expr_reflect"]
    assert "with the option fs.file.impl" in said["expr_options"], answers["expr_options"]
    deep = answers["deep_expression"]  # an expression's text is bounded before Spark parses it
    assert not deep["ok"] and refusal_in(deep["error"]) == deep["error"] and "levels deep" in deep["error"], deep
    # Spark's ${env:...} substitution is off: the service's environment holds this token
    assert answers["env_token"] == {"call": "env_token", "ok": True,
                                    "rows": [["${env:SPARK_CONNECT_AUTHENTICATE_TOKEN}"]]}, answers["env_token"]
    # partitions asked for by number (3,000,000 ran the driver's scheduler out of memory)
    for call in ("many_partitions", "repartition"):
        asked = answers[call]
        assert not asked["ok"] and "asks for 3,000,000 partitions" in (refusal_in(asked["error"]) or ""), asked
    assert answers["legit"] == {"call": "legit", "ok": True, "rows": sorted([s, str(ok)] for s, ok in DQ_ROWS)}


def _audit(lake) -> list[tuple[str, dict]]:
    """The audit log's lines as (event, fields)."""
    out = []
    for line in sqlserver.audit_log(lake).read_text().splitlines():
        parts = line.split(" ", 2)
        fields = re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', parts[2] if len(parts) > 2 else "")
        out.append((parts[1], {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in fields}))
    return out


def test_the_audit_log_names_each_connect_statement_its_user_session_and_outcome(hostile_calls, connect_corpus):
    lines = _audit(connect_corpus["dep"].lake)
    mine = [f for event, f in lines if event == "connect-query" and f.get("user") == hostile_calls["user"]]
    assert mine and {f["session"] for f in mine} == {hostile_calls["session"]}
    outcome = {f["id"]: event for event, f in lines if event in ("finished", "refused", "failed") and f.get("id")}

    def ended(fragment: str) -> set[str]:
        """How the user's statements whose plan holds `fragment` ended."""
        queries = [f for f in mine if fragment in f["plan"]]
        assert queries, fragment
        return {outcome[f["id"]] for f in queries}

    assert ended("scalar_scala_udf") == ended("cache_table") == {"refused"}
    assert ended("DROP TABLE perf.dq_results") == {"refused"}  # by the gate, after the guard
    # The legitimate statement was answered (pyspark's client may retry an attempt that a
    # busy service answered late, so an earlier attempt may have failed): never refused.
    assert "finished" in ended(LEGIT) and "refused" not in ended(LEGIT)
    refused_calls = {f.get("rpc") for event, f in lines if event == "connect-refused"}
    assert {"AddArtifacts", "ArtifactStatus", "AnalyzePlan"} <= refused_calls


def test_the_token_is_private_and_on_no_command_line_log_or_session_setting(connect_corpus):
    dep = connect_corpus["dep"]
    token = dep.services.connect_token()
    assert len(token) >= 32
    assert oct(dep.services.connect_token_file.stat().st_mode & 0o777) == "0o600"
    shown = [st.pid for st in processes.all_stats() if token.encode() in processes.cmdline(st.pid)]
    assert shown == []
    for text in (sqlserver.log_file(dep.lake).read_text(errors="replace"),
                 sqlserver.properties_file(dep.lake).read_text()):
        assert token not in text
    # A Connect client reads the service's Spark settings (spark.conf.get): the token is not among them.
    settings = subprocess.run(
        [sys.executable, "-c", "import json; from pipelines.config.lake import Lake; "
         "from pipelines.warehouse.session import reader_session; "
         "print(json.dumps(reader_session(Lake.from_env()).conf.getAll))"],
        env=dep.env, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert settings.returncode == 0 and "spark.app.name" in settings.stdout, settings.stderr[-1500:]
    assert token not in settings.stdout


# --- bounded statements over Connect ---------------------------------------------------

def test_a_heavy_connect_query_is_stopped_at_the_timeout_while_a_light_one_is_answered(connect_corpus):
    """The watchdog (perflake.gate.ConnectTimeout) interrupts the heavy operation at the
    service's statement timeout; the light one, on another session, shares the cores
    meanwhile (Connect's FAIR pool) and is answered first."""
    dep = connect_corpus["dep"]
    heavy = "SELECT count(*) FROM range(0, 100000000000, 1, 20000) a WHERE a.id % 7 = 3"
    result: dict = {}
    with dep.connect() as heavy_session, dep.connect() as light_session:
        for session in (heavy_session, light_session):  # both sessions open before the clock starts
            assert session.query("SELECT 1")["ok"]

        def run_heavy():
            result["answer"] = heavy_session.query(heavy)
            result["done"] = time.monotonic()

        thread = threading.Thread(target=run_heavy)
        thread.start()
        time.sleep(3)
        light = light_session.query("SELECT count(*) FROM perf.dq_results")
        light_done = time.monotonic()
        thread.join(timeout=QUERY_TIMEOUT_S + 60)
        assert not thread.is_alive()
        after = light_session.query("SELECT 1")
    assert light["ok"] and light["rows"] == [[str(len(DQ_ROWS))]], light
    answer = result["answer"]
    assert not answer["ok"] and QUERY_TIMEOUT_S <= answer["s"] < QUERY_TIMEOUT_S + 15, answer
    sentence = answer["error"].split(": ", 1)[1]
    assert sentence.startswith(f"perflake stopped this statement: it timed out after {QUERY_TIMEOUT_S} s"), answer
    assert "narrow it" in sentence and "\n" not in sentence and "Exception" not in sentence, answer
    assert light_done < result["done"] and after["ok"]
    timed_out = [f for event, f in _audit(dep.lake) if event == "timed-out"]
    assert timed_out and timed_out[-1]["reason"] == sentence


def test_a_timed_out_connect_operation_gives_its_cores_back(connect_corpus):
    """Rows that ignore interrupts on both of the service's task slots, an operation's own
    thread folding a constant, and an `explain()` of that statement (an AnalyzePlan call,
    which no operation timeout covered: it ran on for minutes), over Connect. The watchdog
    interrupts each at the timeout, and perflake.gate.RunawayTasks stops its threads
    RUNAWAY_GRACE_S later, so a light statement after them is answered (without it, it
    timed out behind them: tests/test_hostile_sql.py measured it over JDBC)."""
    dep = connect_corpus["dep"]
    explain = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pyspark.sql import SparkSession; "
         "SparkSession.builder.remote(sys.argv[1]).getOrCreate().sql(sys.argv[2]).explain(mode='extended')",
         dep.services.connect_url, RUNAWAYS[2]],
        env={**dep.env, CONNECT_TOKEN_ENV: dep.services.connect_token()}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)

    def run(sql):
        with dep.connect() as session:
            return session.query(sql)

    answers = at_once(run, RUNAWAYS, QUERY_TIMEOUT_S + 120)
    assert set(answers) == set(RUNAWAYS)
    for sql, answer in answers.items():
        assert not answer["ok"] and "perflake stopped this statement: it timed out" in answer["error"], (sql, answer)
    with dep.connect() as session:
        light = session.query("SELECT count(*) FROM perf.dq_results")
    assert light["ok"] and light["rows"] == [[str(len(DQ_ROWS))]], light
    out = explain.communicate(timeout=60)[0]
    assert explain.returncode != 0 and "perflake stopped this statement: it timed out" in out, out[-2000:]
    assert any(f.get("rpc") == "AnalyzePlan" for event, f in _audit(dep.lake) if event == "timed-out")
    # The light statement needed one slot; the other stops may come a tick or two later.
    deadline = time.monotonic() + RUNAWAY_GRACE_S + 15
    while True:
        stopped = [f for event, f in _audit(dep.lake) if event == "runaway-stopped"]
        tasks = {f["task"] for f in stopped if "task" in f}
        threads = [f["thread"] for f in stopped if "thread" in f]
        if (len(tasks) >= 2 and len(threads) >= 2) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(tasks) >= 2, stopped  # the two tasks
    assert any(t.startswith("SparkConnectExecuteThread") for t in threads), stopped  # the folding operation's
    assert len(threads) >= 2, stopped  # ...and the explain's


def test_a_connect_statement_filling_the_scratch_disk_is_stopped(connect_corpus):
    """perflake.gate.ScratchBound sees Connect's statements too: 2,000 short tasks, each
    writing its distinct strings to a shuffle, pass the service's 50 MB within seconds."""
    distinct = ("SELECT count(DISTINCT s) FROM (SELECT concat(sha2(cast(id AS string), 512), "
                "sha2(cast(id + 1 AS string), 512)) AS s FROM range(0, 200000000, 1, 2000))")
    with connect_corpus["dep"].connect() as session:
        answer = session.query(distinct)
        after = session.query("SELECT 1")
    assert not answer["ok"] and "perflake stopped this statement: it wrote" in answer["error"], answer
    assert answer["s"] < QUERY_TIMEOUT_S and after["ok"], answer


def test_results_over_connect_are_capped_at_the_services_max_rows(connect_corpus):
    with connect_corpus["dep"].connect(max_rows=10 ** 6) as session:
        answer = session.query("SELECT id FROM range(100000)")
    assert answer["ok"] and len(answer["rows"]) == MAX_ROWS, {**answer, "rows": len(answer.get("rows", []))}
