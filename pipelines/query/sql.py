"""Ad-hoc, read-only SQL over the published tables, on Spark or on DuckDB.

The same query text runs on both engines as long as it names tables `perf.<table>` and
uses functions both dialects share (see docs/queries.md):

- Spark runs behind the gate (`pipelines/query/gate`, docs/security.md): in a process of
  its own (`perflake sql`) the session is created with the gate's extension, which
  judges every parsed and analyzed plan inside the JVM; a process that already has its
  own Spark session (a job, the tests) uses it as it is.
- DuckDB opens an in-memory database with one view per table found under
  `<lake>/warehouse/<table>/`, over the files Spark would read: the partitions of a
  partitioned table (Hive layout), the live snapshot of an unpartitioned one
  (pipelines/warehouse/snapshots.py), never a write in progress. The partition columns (`dt`,
  `pool`, ...) are strings, as they are in Spark. DuckDB's own parser must read the
  text as one SELECT or EXPLAIN, and the connection cannot reach files outside the
  warehouse, load extensions or change its configuration.

`check_read_only` is a friendly pre-check on the text (one SELECT, WITH, SHOW, DESCRIBE
or EXPLAIN statement, no write keyword outside literals and comments) that answers the
common mistakes before an engine starts; it is not the security boundary, the gate and
DuckDB's lockdown are. Every refusal is a ReadOnlyError and every other failure of a
query a QueryError, each one sentence.
"""
from __future__ import annotations

import contextlib
import csv
import datetime
import io
import json
import logging
import re
import signal
import threading
from decimal import Decimal

from pipelines.config.lake import Lake
from pipelines.config.services import configured
from pipelines.warehouse.duck import duckdb_connection

ENGINES = ("spark", "duckdb")
FORMATS = ("table", "csv", "json")
MAX_ROWS = 100_000

_FIRST_WORDS = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN"}
# Statements that write, change the session, run code or reach outside the lake. Any of
# these words outside a literal or comment rejects the query (quote a column that has
# one of these names). REFLECT/JAVA_METHOD call Java from Spark SQL.
_FORBIDDEN = {
    "INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "DROP", "CREATE", "ALTER", "TRUNCATE", "COPY",
    "ATTACH", "DETACH", "INSTALL", "LOAD", "SET", "RESET", "CALL", "EXPORT", "IMPORT", "PRAGMA",
    "VACUUM", "CHECKPOINT", "GRANT", "REVOKE", "MSCK", "REFRESH", "CACHE", "UNCACHE", "ADD", "USE",
    "ANALYZE", "COMMENT", "RENAME", "BEGIN", "COMMIT", "ROLLBACK", "DECLARE", "EXECUTE", "PREPARE",
    "DEALLOCATE", "OVERWRITE", "DIRECTORY", "OPTIMIZE", "REPAIR", "REFLECT", "JAVA_METHOD", "TRY_REFLECT",
}
# Hive's script transform, `SELECT TRANSFORM(...) USING 'command'`, runs a shell command.
_SCRIPT_TRANSFORM = re.compile(r"\bUSING\s*['\"]", re.IGNORECASE)


class ReadOnlyError(ValueError):
    """The query is not a single read-only statement (refused, one sentence)."""


class QueryError(ValueError):
    """The engine could not run the query (syntax, unknown table or column, ...): the
    engine's message in one line; the original exception is chained."""


REFUSAL_PREFIX = "perflake refused this statement: "
_REFUSAL = re.compile(re.escape(REFUSAL_PREFIX) + r".*?\.(?=;|\s*$|\n)", re.DOTALL)


def refusal_in(message: str) -> str | None:
    """The gate's one-sentence refusal inside an engine's or a driver's error message
    (which may wrap it in a class name, a plan or a stack trace); None if there is none."""
    m = _REFUSAL.search(message or "")
    return m.group(0) if m else None


def error_summary(message: str) -> str:
    """An engine's error message as one line: its first non-empty line, without a JVM
    class-name prefix."""
    for line in (message or "").splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(?:[\w$]+\.)+[\w$]*(?:Exception|Error): ", "", line)
    return "(no message)"


def run_query(query: str, engine: str = "spark", lake: Lake | None = None, *,
              max_rows: int = MAX_ROWS) -> tuple[list[str], list[tuple]]:
    """Run one read-only statement; returns (column names, rows as tuples).

    Values are plain Python: timestamps are timezone-aware UTC datetimes, maps are
    dicts, structs are dicts, arrays are lists, on both engines. Raises ReadOnlyError
    for anything but a single read-only statement, and ValueError when the result has
    more than `max_rows` rows (aggregate or add a LIMIT)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    statement = check_read_only(query)
    lake = lake or Lake.from_env()
    run = _run_spark if engine == "spark" else _run_duckdb
    columns, rows = run(statement, lake, max_rows + 1)
    if len(rows) > max_rows:
        raise ValueError(f"the query returned more than {max_rows} rows; aggregate, add a LIMIT, "
                         f"or read the tables from a Spark job")
    return columns, rows


def check_read_only(query: str) -> str:
    """The single statement of `query` (trailing ';' removed) if it is read-only;
    otherwise ReadOnlyError saying what was found."""
    if not isinstance(query, str) or not query.strip():
        raise ReadOnlyError("the query is empty; give one SELECT, WITH, SHOW, DESCRIBE or EXPLAIN statement")
    # Spark reads a backslash before a quote as an escape, DuckDB does not. Lexing both
    # ways and requiring the same result means no literal can hide code from either.
    code = _strip_literals(query, backslash_escapes=True)
    if code != _strip_literals(query, backslash_escapes=False):
        raise ReadOnlyError("the query has a backslash before a quote inside a literal, which Spark and DuckDB "
                            "read differently; write a quote inside a string as '' instead")
    body = code.rstrip()
    if body.endswith(";"):
        body = body[:-1]
    if ";" in body:
        raise ReadOnlyError("the query holds more than one statement; run one read-only statement at a time")
    words = [w.upper() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body)]
    if not words or words[0] not in _FIRST_WORDS:
        first = words[0] if words else body.strip()[:20]
        raise ReadOnlyError(f"only SELECT, WITH, SHOW, DESCRIBE and EXPLAIN are allowed here, not {first!r}; "
                            f"the ad-hoc SQL path is read-only (write tables through the pipeline jobs)")
    if words[:2] in (["EXPLAIN", "ANALYZE"], ["SHOW", "CREATE"]):
        words = words[2:]  # EXPLAIN ANALYZE runs the query and SHOW CREATE TABLE prints DDL: both only read
    bad = sorted({w for w in words if w in _FORBIDDEN})
    if bad:
        raise ReadOnlyError(f"the query contains {', '.join(bad)}; the ad-hoc SQL path is read-only and accepts "
                            f"no DDL, DML or session commands (quote a column of that name, e.g. `{bad[0].lower()}`)")
    if _SCRIPT_TRANSFORM.search(body):
        raise ReadOnlyError("TRANSFORM ... USING 'command' runs a program and is not allowed here")
    return query[:len(body)].strip()


def _strip_literals(query: str, *, backslash_escapes: bool) -> str:
    """`query` with the inside of every string literal and quoted identifier blanked
    and every comment turned into spaces, keeping each character's position. An
    unterminated literal or comment runs to the end, as it would in the engine."""
    out, i, n = list(query), 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if backslash_escapes and query[j] == "\\" and c != "`":
                    j += 2
                    continue
                if query[j] == c:
                    if j + 1 < n and query[j + 1] == c:  # doubled quote: an escaped quote
                        j += 2
                        continue
                    break
                j += 1
            end = min(j, n)
            out[i + 1:end] = " " * (end - i - 1)
            i = end + 1
        elif query.startswith("--", i):
            j = query.find("\n", i)
            end = n if j < 0 else j
            out[i:end] = " " * (end - i)
            i = end
        elif query.startswith("/*", i):
            j = query.find("*/", i + 2)
            end = n if j < 0 else j + 2
            if "/*" in query[i + 2:end]:
                # Spark nests block comments; a lexer that does not would see other code.
                raise ReadOnlyError("nested block comments are not allowed; use -- comments")
            out[i:end] = " " * (end - i)
            i = end
        else:
            i += 1
    return "".join(out)


# --- Spark --------------------------------------------------------------------------

def _run_spark(statement: str, lake: Lake, limit: int) -> tuple[list[str], list[tuple]]:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

    spark = SparkSession.getActiveSession()
    if spark is None and configured(lake) is not None:
        from pipelines.warehouse.session import reader_session

        spark = reader_session(lake)  # the shared service, over Spark Connect: no JVM here
    elif spark is None:
        _refuse_if_server_holds_metastore(lake)
        spark = gated_session(lake)
    else:
        from pipelines.warehouse.session import get_spark

        spark = get_spark(lake)  # the process's own session (a job, a test): checks it is this lake's
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    with _noting_interrupts() as interrupted:
        try:
            df = spark.sql(statement)
            # Spark hands an instant (TimestampType) back as naive local time; make it aware UTC.
            instant = [isinstance(f.dataType, T.TimestampType) for f in df.schema.fields]
            rows = df.limit(limit).collect()
        except (PySparkException, Py4JError) as e:
            if interrupted:  # Ctrl-C: pyspark cancelled the job, or py4j lost its call; not the query's fault
                raise KeyboardInterrupt from e
            raise _spark_error(e) from e
    return list(df.columns), [tuple(_utc(v) if ts else _plain(v) for ts, v in zip(instant, r)) for r in rows]


@contextlib.contextmanager
def _noting_interrupts():
    """A list that holds SIGINT when one arrived inside the block. pyspark's own handler
    still runs (it cancels the session's jobs and raises KeyboardInterrupt); but the
    cancelled job, or the py4j call it cut short, can surface as a Spark error instead,
    which the list tells apart from a query that failed. Signals reach the main thread
    only: elsewhere the list stays empty."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    before = signal.getsignal(signal.SIGINT)

    def note(signum, frame):
        seen.append(signum)
        if callable(before):
            before(signum, frame)
        elif before != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, before)


def _spark_error(e: Exception) -> ValueError:
    status = getattr(e, "getGrpcStatusCode", None)  # Spark Connect: the service refused the call itself
    if status is not None and status().name == "UNAUTHENTICATED":
        from pipelines.config.services import CONNECT_TOKEN_ENV

        return QueryError(f"the Spark SQL service refused this client's Spark Connect token (none, or a wrong one): "
                          f"set {CONNECT_TOKEN_ENV} to the token in <lake>/services/secrets/spark-connect-token "
                          f"that the lake's operator gives you, or query over JDBC with a user")
    message = str(e)
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            message = java.toString()
        except Exception:  # the JVM is gone: keep the Python side's text
            pass
    refusal = refusal_in(message)
    if refusal:
        return ReadOnlyError(refusal)
    return QueryError(f"Spark could not run the query: {error_summary(message)}")


def gated_session(lake: Lake):
    """A new Spark session for `lake` behind the gate (perflake.gate.Extension judges every
    statement inside the JVM, docs/security.md): the session `perflake sql` runs on."""
    import os
    import sys

    from pyspark.sql import SparkSession

    from pipelines.query.gate import session_conf
    from pipelines.warehouse.session import merged_conf, spark_conf

    lake.metastore.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("perflake-sql").master(os.environ.get("PERFLAKE_SPARK_MASTER", "local[2]"))
    for k, v in merged_conf(spark_conf(lake), session_conf()).items():
        builder = builder.config(k, v)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # PySpark logs a failed query's context as JSON on stderr; the CLI says it in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return spark


def _utc(v):
    return None if v is None else v.astimezone(datetime.timezone.utc)


def _plain(v):
    if hasattr(v, "asDict"):  # pyspark Row (a struct)
        return {k: _plain(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _refuse_if_server_holds_metastore(lake: Lake) -> None:
    from pipelines.query import server as sqlserver
    from pipelines.warehouse.preflight import SparkUnavailable

    st = sqlserver.status(lake)
    if st.running:
        raise SparkUnavailable(f"the SQL server (pid {st.pid}, {st.host}:{st.port}) holds this lake's embedded Derby "
                           f"metastore, which admits one process; query it over JDBC "
                           f"(jdbc:hive2://{st.host}:{st.port}), use --engine duckdb, "
                           f"or stop it with `perflake sql-server stop`")


# --- DuckDB -------------------------------------------------------------------------

def _run_duckdb(statement: str, lake: Lake, limit: int) -> tuple[list[str], list[tuple]]:
    import duckdb

    con = duckdb_connection(lake)
    try:
        parsed = con.extract_statements(statement)
        allowed = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
        if len(parsed) != 1 or parsed[0].type not in allowed:
            kinds = ", ".join(str(s.type).split(".")[-1] for s in parsed) or "nothing"
            raise ReadOnlyError(f"DuckDB reads this as {kinds}, not one SELECT; the ad-hoc SQL path is read-only "
                                f"and runs one query at a time")
        cur = con.execute(statement)
        columns = [d[0] for d in cur.description]
        rows = cur.fetchmany(limit)
    except duckdb.PermissionException as e:
        raise ReadOnlyError(f"DuckDB refused it ({error_summary(str(e))}); the ad-hoc SQL path reads only the "
                            f"tables of perf, with no file access, extensions or settings") from e
    except duckdb.Error as e:
        raise QueryError(f"DuckDB could not run the query: {error_summary(str(e))}") from e
    finally:
        con.close()
    return columns, [tuple(_duck_value(v) for v in r) for r in rows]


def _duck_value(v):
    # TIMESTAMP columns written by Spark hold UTC instants; DuckDB hands them back naive.
    if isinstance(v, datetime.datetime) and v.tzinfo is None:
        return v.replace(tzinfo=datetime.timezone.utc)
    if isinstance(v, dict):
        return {k: _duck_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_duck_value(x) for x in v]
    return v


# --- Output -------------------------------------------------------------------------

def format_rows(columns: list[str], rows: list[tuple], fmt: str = "table") -> str:
    """Rows as an aligned text table (numbers right-aligned, NULL for missing, a row
    count below), as CSV with a header, or as a JSON list of objects."""
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        w.writerows([["" if v is None else _text(v, full=True) for v in r] for r in rows])
        return buf.getvalue().rstrip("\n")
    if fmt == "json":
        keys = _unique(columns)
        return json.dumps([dict(zip(keys, map(_json_value, r))) for r in rows], indent=2)
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if len(rows) == 1 and any(isinstance(v, str) and "\n" in v for v in rows[0]):
        # An EXPLAIN plan or similar: print it as it is, one column after the other.
        if len(columns) == 1:
            return rows[0][0]
        return "\n".join(f"{c}:\n{_text(v, full=True)}" for c, v in zip(columns, rows[0]))
    cells = [[_text(v) for v in r] for r in rows]
    right = [_numeric_column([r[i] for r in rows]) for i in range(len(columns))]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values):
        return " | ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()

    out = [line(columns), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _numeric_column(values: list) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in present)


def _text(v, *, full: bool = False) -> str:
    if v is None:
        s = "NULL"
    elif isinstance(v, bool):
        s = "true" if v else "false"
    elif isinstance(v, float):
        s = repr(v) if full else _number(v)  # CSV keeps every digit
    elif isinstance(v, datetime.datetime):
        s = v.isoformat(sep=" ")
    elif isinstance(v, (dict, list)):
        s = json.dumps(_json_value(v), sort_keys=isinstance(v, dict))
    else:
        s = str(v)
    if full:
        return s
    s = s.replace("\n", "\\n")
    return s if len(s) <= 80 else s[:79] + "…"


def _number(v: float) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if v == 0 or 1e-4 <= abs(v) < 1e15:
        return f"{v:.4f}".rstrip("0").rstrip(".")
    return f"{v:.6g}"


def _json_value(v):
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def _unique(columns: list[str]) -> list[str]:
    """Column names made unique (x, x_2, ...) so that JSON objects keep every value."""
    seen: dict[str, int] = {}
    out = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        out.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return out
