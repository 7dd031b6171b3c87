"""The hostile corpus and what every endpoint's tests share: the statements, the lake
they run against, and how a refusal must read. Used by tests/test_hostile_sql.py (JDBC,
both CLIs) and tests/test_hostile_connect.py (Spark Connect); `_build_lake` and
`_run_spark_cli` also run in subprocesses, imported as `tests.hostile`."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from pipelines.config.lake import Lake
from pipelines.query.sql import REFUSAL_PREFIX, refusal_in

REPO = Path(__file__).resolve().parents[1]
ENV_CANARY = "PERFLAKE_HOSTILE_CANARY"

DQ_ROWS = [("gemm", True), ("softmax", False), ("copy", True)]
# Work that takes minutes in a loop of its own, which never looks for the interrupt a
# cancelled statement's threads get: quadratic edit distance of two 1.2-million-character
# strings, and Java's backtracking on a pattern that matches nothing. The first two are
# one task each (one partition; built from `id`, so the optimizer cannot fold them); the
# optimizer folds the third, on the statement's own thread, before any task exists.
RUNAWAYS = [
    "SELECT levenshtein(repeat('gemm', 300000 + id), repeat('gemmx', 300000 + id)) FROM range(0, 1, 1, 1)",
    "SELECT regexp_count(concat(repeat('a', 40 + id), 'gemm'), '(.*a){12}x') FROM range(0, 1, 1, 1)",
    "SELECT levenshtein(repeat('gemm', 300000), repeat('gemmx', 300000))",
]

# (statement, flags). Flags: "native": Spark's own parser or analyzer refuses it before
# the gate judges a plan (any refusal will do); "inert:spark" / "inert:duckdb": that
# engine (Spark: over JDBC and Spark Connect alike) reads the text as a harmless query (a
# literal, a comment, an unused CTE) and may answer it, as long as nothing changes and
# nothing outside the lake is read. The CLIs' pre-check refuses them all. {canary} is a
# file outside the lake holding a secret, {outside} its folder, {marker} a path that must
# never be created, {warehouse} the lake's warehouse.
CORPUS: list[tuple[str, str]] = [
    # writes
    ("DROP TABLE perf.dq_results", ""),
    ("drop table perf.dq_results", ""),
    ("DROP TABLE IF EXISTS perf.samples PURGE", ""),
    ("TRUNCATE TABLE perf.dq_results", ""),
    ("INSERT INTO perf.dq_results VALUES ('evil', true)", ""),
    ("INSERT OVERWRITE TABLE perf.dq_results SELECT * FROM perf.dq_results WHERE false", ""),
    ("DELETE FROM perf.dq_results", ""),
    ("UPDATE perf.dq_results SET success = false", ""),
    ("MERGE INTO perf.dq_results t USING perf.dq_results s ON t.suite = s.suite WHEN MATCHED THEN DELETE", ""),
    ("INSERT OVERWRITE DIRECTORY '{marker}' USING parquet SELECT * FROM perf.dq_results", ""),
    ("INSERT OVERWRITE LOCAL DIRECTORY '{marker}' SELECT * FROM perf.dq_results", ""),
    ("LOAD DATA LOCAL INPATH '{canary}' INTO TABLE perf.dq_results", ""),
    ("FROM perf.dq_results INSERT INTO perf.dq_results SELECT *", ""),
    # DDL
    ("CREATE TABLE perf.evil (x INT) USING parquet", ""),
    ("CREATE TABLE perf.evil USING text LOCATION '{outside}'", ""),
    ("CREATE TABLE perf.evil AS SELECT * FROM perf.dq_results", ""),
    ("ALTER TABLE perf.dq_results RENAME TO perf.dq_old", ""),
    ("ALTER TABLE perf.dq_results SET LOCATION '{outside}'", ""),
    ("ALTER TABLE perf.dq_results ADD COLUMNS (evil STRING)", ""),
    ("ALTER TABLE perf.dq_results SET TBLPROPERTIES ('owner' = 'evil')", "native"),
    ("ALTER TABLE perf.dq_results SET TBLPROPERTIES ('note' = 'evil')", ""),
    ("CREATE DATABASE evil", ""),
    ("DROP DATABASE perf CASCADE", ""),
    ("MSCK REPAIR TABLE perf.dq_results", ""),
    ("ANALYZE TABLE perf.dq_results COMPUTE STATISTICS", ""),
    ("CACHE TABLE perf.dq_results", ""),
    ("UNCACHE TABLE perf.dq_results", ""),
    ("CLEAR CACHE", ""),
    ("REFRESH TABLE perf.dq_results", ""),
    ("COMMENT ON TABLE perf.dq_results IS 'pwned'", ""),
    # views
    ("CREATE VIEW perf.v_evil AS SELECT * FROM text.`{canary}`", ""),
    ("CREATE OR REPLACE TEMPORARY VIEW dq AS SELECT * FROM perf.dq_results", ""),
    ("CREATE GLOBAL TEMPORARY VIEW dq AS SELECT 1 AS x", ""),
    ("ALTER VIEW perf.v_ok AS SELECT * FROM default.other", ""),
    ("DROP VIEW perf.v_ok", ""),
    # files and the environment
    ("SELECT * FROM text.`{canary}`", ""),
    ("SELECT * FROM TEXT.`{canary}`", ""),
    ("SELECT * FROM csv.`file://{canary}`", ""),
    ("SELECT * FROM json.`{outside}`", ""),
    ("SELECT * FROM binaryFile.`{canary}`", ""),
    ("SELECT * FROM `org.apache.spark.sql.execution.datasources.text.TextFileFormat`.`{canary}`", ""),
    ("SELECT * FROM parquet.`{warehouse}/dq_results`", ""),
    ("SELECT * FROM (SELECT * FROM text.`{canary}`) t", ""),
    ("SELECT * FROM perf.dq_results WHERE EXISTS (SELECT * FROM csv.`{canary}`)", ""),
    ("SELECT in_file('x', '{canary}')", ""),
    ("SELECT * FROM read_csv('{canary}')", ""),
    ("SELECT * FROM read_text('{canary}')", ""),
    ("SELECT * FROM default.other", ""),
    ("SELECT * FROM spark_catalog.default.other", ""),
    ("SELECT (SELECT count(*) FROM default.other) AS n", ""),
    ("SELECT java_method('java.lang.System', 'getenv', 'HOME')", ""),
    # a table read with options of its own: they reach the file readers as Hadoop and Parquet
    # settings (measured: Parquet and Hadoop loaded and instantiated the class named here)
    ("SELECT * FROM perf.dq_results WITH ('parquet.crypto.factory.class' = 'java.lang.String')", ""),
    ("SELECT count(*) FROM perf.dq_results WITH ('fs.file.impl.disable.cache' = 'true', "
     "'fs.file.impl' = 'java.lang.String')", ""),
    ("SELECT * FROM IDENTIFIER('perf.dq_results') WITH ('parquet.crypto.factory.class' = 'java.lang.String')", ""),
    # a Java-serialised Parquet filter predicate (gzip, base64), which Parquet deserialises
    ("SELECT * FROM perf.dq_results WITH ('parquet.private.read.filter.predicate' = 'H4sIAAAAAAACA1vzloE1PbEoKTE9FQDV+unbCwAAAA==')", ""),
    # IDENTIFIER(...): Spark builds the table or function it names only during analysis
    ("SELECT * FROM IDENTIFIER('text.`{canary}`')", ""),
    ("SELECT * FROM IDENTIFIER(concat('text.`', '{canary}', '`'))", ""),
    ("SELECT IDENTIFIER('reflect')('java.lang.System', 'exit', 3)", ""),
    ("SELECT IDENTIFIER('java_' || 'method')('java.lang.System', 'getenv', 'HOME')", ""),
    ("SELECT xpath_string('<!DOCTYPE a [<!ENTITY x SYSTEM \"file://{canary}\">]><a>&x;</a>', '/a')", ""),
    ("SELECT from_xml('<a>1</a>', 'a INT')", ""),
    # JVM reflection and code
    ("SELECT reflect('java.lang.System', 'exit', 3)", ""),
    ("SELECT REFLECT('java.lang.System', 'exit', 3)", ""),
    ("SELECT `reflect`('java.lang.System', 'exit', 3)", ""),
    ("SELECT try_reflect('java.lang.System', 'getProperty', 'user.home')", ""),
    ("SELECT system.builtin.reflect('java.lang.System', 'exit', 3)", ""),
    ("SELECT * FROM perf.dq_results WHERE suite = reflect('java.lang.System', 'getenv', 'HOME')", ""),
    ("SELECT * FROM perf.dq_results LATERAL VIEW explode(array(reflect('java.lang.System', 'exit', 3))) t AS r",
     ""),
    ("WITH x AS (SELECT reflect('java.lang.System', 'exit', 3) AS r) SELECT * FROM x", ""),
    ("SELECT suite FROM perf.dq_results UNION ALL SELECT java_method('java.lang.System', 'getenv', 'PATH')", ""),
    ("SELECT TRANSFORM(suite) USING 'touch {marker}' FROM perf.dq_results", ""),
    ("SELECT TRANSFORM(suite) USING 'cat' AS (s STRING) FROM perf.dq_results", ""),
    ("CREATE TEMPORARY FUNCTION evil AS 'org.apache.hadoop.hive.ql.udf.generic.GenericUDFReflect'", ""),
    ("CREATE FUNCTION perf.evil AS 'x.Evil' USING JAR '{outside}/evil.jar'", ""),
    ("ADD JAR {outside}/evil.jar", ""),
    ("ADD FILE {canary}", ""),
    ("ADD ARCHIVE {outside}/evil.zip", ""),
    ("LIST FILES", ""),
    ("LIST JARS", ""),
    # configuration
    ("SET spark.sql.runSQLOnFiles=true", ""),
    ("SET spark.sql.thriftServer.queryTimeout=0", ""),
    ("SET spark.sql.thriftserver.scheduler.pool=default", ""),
    ("SET spark.perflake.gate.maxRows=1000000000", ""),
    ("SET spark.sql.optimizer.excludedRules=perflake", ""),
    ("SET -v", ""),
    ("set", ""),
    ("RESET", ""),
    ("RESET spark.sql.runSQLOnFiles", ""),
    ("DECLARE VARIABLE evil INT DEFAULT 1", ""),
    ("USE evil_db", ""),
    # multiple statements, comments, scripts
    ("SELECT 1; DROP TABLE perf.dq_results", "native"),
    ("SELECT 1 -- a comment\n; DROP TABLE perf.dq_results", "native"),
    ("/* SELECT */ DROP TABLE perf.dq_results", ""),
    ("SELECT 'a\\'; DROP TABLE perf.dq_results; --'", "inert:spark"),
    ("SELECT 1 /* ; */ ; DROP TABLE perf.dq_results", "native"),
    ("/* nested /* */ DROP TABLE perf.dq_results */ SELECT 1", "inert:spark"),
    ("BEGIN DROP TABLE perf.dq_results; END", "native"),
    ("EXECUTE IMMEDIATE 'DROP TABLE perf.dq_results'", ""),
    ("EXECUTE IMMEDIATE 'SELECT reflect(''java.lang.System'', ''exit'', 3)'", ""),
    ("EXPLAIN DROP TABLE perf.dq_results", ""),
    ("EXPLAIN SELECT * FROM text.`{canary}`", ""),
    ("EXPLAIN SELECT reflect('java.lang.System', 'exit', 3)", ""),
    # DESCRIBE QUERY analyses its query: files listed, classes loaded before the analyzed check
    ("DESCRIBE QUERY SELECT * FROM perf.dq_results WITH ('fs.file.impl.disable.cache' = 'true', "
     "'fs.file.impl' = 'java.lang.String')", ""),
    ("DESCRIBE QUERY SELECT reflect('java.lang.System', 'exit', 3)", ""),
    ("DESCRIBE QUERY SELECT * FROM text.`{canary}`", ""),
    # case, whitespace, unicode
    ("DrOp\tTaBlE\n  perf.dq_results", ""),
    ("\u00a0DROP TABLE perf.dq_results", "native"),
    ("DROP TABLE perf.`dq_results`", ""),
    ("SELECT ｒｅｆｌｅｃｔ('java.lang.System', 'exit', 3)", "native"),
    ("ＤＲＯＰ TABLE perf.dq_results", "native"),
    ("SELECT * FROM text.`{canary_unicode}`", ""),
    # CTEs and subqueries hiding a write
    ("WITH x AS (SELECT 1) INSERT INTO perf.dq_results SELECT 'z', true", ""),
    ("WITH x AS (SELECT * FROM csv.`{canary}`) SELECT * FROM perf.dq_results", "inert:duckdb"),
    ("SELECT * FROM perf.dq_results WHERE suite IN (SELECT value FROM text.`{canary}`)", ""),
    # Spark's ${...} substitution: the service's environment and JVM properties
    ("SELECT '${env:PERFLAKE_HOSTILE_CANARY}' AS e, '${system:perflake.audit.log}' AS p", "inert:spark inert:duckdb"),
    ("SELECT getenv('PERFLAKE_HOSTILE_CANARY')", "native"),
    # too deep or too long to parse: Spark's parser would take the service's whole heap
    # (20,000 nested parentheses left it up but deaf to every new connection)
    ("SELECT " + "(" * 20_000 + "1" + ")" * 20_000, ""),
    ("SELECT " + "NOT " * 20_000 + "true", ""),
    ("SELECT CAST(NULL AS " + "struct<a:" * 20_000 + "int" + ">" * 20_000 + ")", ""),
    ("SELECT from_json('{}', concat(repeat('struct<a:', 20000), 'int', repeat('>', 20000)))", ""),
    ("SELECT count(*) FROM perf.dq_results WHERE suite IN (" + ",".join(f"'{i}'" for i in range(200_000)) + ")",
     "inert:duckdb"),
    # more partitions than the driver can plan: 3,000,000 ran the DAG scheduler's thread out
    # of memory, which stopped the SparkContext (every later statement failed)
    ("SELECT /*+ REPARTITION(3000000) */ count(*) FROM perf.dq_results", "inert:duckdb"),
    ("SELECT count(*) FROM range(0, 10, 1, 2000000000)", ""),
    ("WITH t AS (SELECT /*+ REPARTITION(15000) */ * FROM perf.dq_results) "
     "SELECT count(*) FROM t a JOIN t b ON a.suite = b.suite", "inert:duckdb"),
]


def _fill(sql: str, paths: dict[str, str]) -> str:
    for k, v in paths.items():
        sql = sql.replace("{" + k + "}", v)
    return sql


def _build_lake(root: str) -> None:
    """Runs in a subprocess: tables perf.dq_results and perf.samples at their warehouse
    paths, a view perf.v_ok, and default.other outside perf."""
    from pipelines.warehouse.session import get_spark

    lake = Lake(Path(root))
    spark = get_spark(lake)
    for name, cols in (("dq_results", "suite STRING, success BOOLEAN"), ("samples", "run_id STRING, latency_ns BIGINT")):
        spark.sql(f"CREATE TABLE perf.{name} ({cols}) USING parquet LOCATION '{lake.table_path(name).as_uri()}'")
    values = ", ".join(f"('{s}', {str(ok).lower()})" for s, ok in DQ_ROWS)
    spark.sql(f"INSERT INTO perf.dq_results VALUES {values}")
    spark.sql("INSERT INTO perf.samples VALUES ('r1', 100), ('r1', 101)")
    spark.sql("CREATE VIEW perf.v_ok AS SELECT suite FROM perf.dq_results")
    spark.sql("CREATE TABLE default.other (x INT) USING parquet")
    spark.sql("INSERT INTO default.other VALUES (42)")
    spark.stop()


def _run_spark_cli(root: str, statements_file: str) -> None:
    """Runs in a subprocess: every statement through `perflake sql --engine spark` (the
    CLI's main, one JVM for all), printing one JSON line per statement."""
    from pipelines.cli import main

    os.environ["PERFLAKE_HOME"] = root
    for sql in json.loads(Path(statements_file).read_text()):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["sql", "--engine", "spark", sql])
        print("RESULT " + json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}), flush=True)


def _subprocess(code: str, *args: str, timeout: float) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _snapshot(lake: Lake) -> dict[str, str]:
    """Every file under the warehouse with its content hash."""
    return {str(p.relative_to(lake.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(lake.warehouse.rglob("*")) if p.is_file()}

def _ids():
    return [f"{i:02d}-" + "".join(c if c.isalnum() else "_" for c in sql[:40]) for i, (sql, _) in enumerate(CORPUS)]


def assert_refused_by_spark(answer: dict, i: int, statement: str, secret: str) -> None:
    """Corpus statement `i` over a Spark endpoint (JDBC, Connect): refused with the gate's
    one sentence (or Spark's own refusal where flagged `native`), or answered harmlessly
    where flagged `inert:spark`; the canary's secret in neither."""
    if answer["ok"] and "inert:spark" in CORPUS[i][1]:
        assert secret not in json.dumps(answer)
        return
    assert not answer["ok"], (statement, answer)
    if "native" not in CORPUS[i][1]:  # the gate's own sentence, naming what and why
        sentence = refusal_in(answer["error"])
        assert sentence and sentence.startswith(REFUSAL_PREFIX) and "\n" not in sentence, answer["error"][:500]
    assert secret not in answer["error"]


def at_once(send: Callable[[str], dict], statements: list[str], timeout_s: float) -> dict[str, dict]:
    """Each statement sent with `send` (statement -> answer) on a thread of its own, all at
    once, as several users would; the answers by statement (each thread waited on for at
    most `timeout_s`)."""
    answers: dict[str, dict] = {}

    def one(sql: str) -> None:
        answers[sql] = send(sql)

    threads = [threading.Thread(target=one, args=(sql,)) for sql in statements]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    return answers
