"""The ad-hoc SQL path: the same answers from Spark and DuckDB, a read-only guard, and
every query in docs/queries.md running on both engines over a small published dataset.

The dataset: the gemm-demo suite on the simulated H100 and H200 pools for two nights
(2039-06-01 and -02), run ids `sqltest-*`. The second night runs under a newer software
fingerprint, one H100 case fails on it, and one H200 case is made noisy, so that the
software, failure and instability questions have answers.
"""
from __future__ import annotations

import datetime
import math
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipelines.query.sql import ReadOnlyError, check_read_only, format_rows, run_query

# Later than any other test's dates, so that "last night" in the docs' queries is ours.
DATES = ["2039-06-01", "2039-06-02"]
POOLS = {"sim-h100": "H100-SXM5-80GB", "sim-h200": "H200-SXM-141GB"}
NEW_TORCH = "9.9.0+sqltest"
FAILED_ERROR = "CUDA error: an illegal memory access was encountered (staged by test_sql)"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "queries.md"
OURS = "run_id LIKE 'sqltest-%'"


def _run_id(dt: str, pool: str) -> str:
    return f"sqltest-{dt}-{pool}"


def _stage_changes(staging: Path, dt: str, pool: str) -> None:
    """Edit a harness output the way real nights differ: new software on the last night,
    a failing case on the H100 and a bimodal (noisy) case on the H200."""
    if dt != DATES[-1]:
        return
    results = pq.read_table(staging / "case_results.parquet")
    samples = pq.read_table(staging / "samples.parquet")
    run = pq.read_table(staging / "run.parquet")
    victim = sorted(results.column("case_id").to_pylist())[0]
    if pool == "sim-h100":
        rows = results.to_pylist()
        for r in rows:
            if r["case_id"] == victim:
                r.update(status="failed", error=FAILED_ERROR, correct=None, n_samples=0, stop_reason=None)
        results = pa.Table.from_pylist(rows, schema=results.schema)
        samples = samples.filter(pc.not_equal(samples.column("case_id"), victim))
        run = run.set_column(run.schema.get_field_index("status"), "status", pa.array(["partial"]))
        ok = run.schema.get_field_index("cases_ok")
        run = run.set_column(ok, "cases_ok", pa.array([run.column("cases_ok")[0].as_py() - 1], pa.int32()))
    else:
        rows = samples.to_pylist()
        for r in rows:
            if r["case_id"] == victim and r["iteration"] % 2:
                r["latency_ns"] = int(r["latency_ns"] * 1.4)
        samples = pa.Table.from_pylist(rows, schema=samples.schema)
    for name, value in (("torch_version", NEW_TORCH), ("software_fingerprint", f"sqltest-software-{NEW_TORCH}")):
        run = run.set_column(run.schema.get_field_index(name), name, pa.array([value]))
    pq.write_table(results, staging / "case_results.parquet")
    pq.write_table(samples, staging / "samples.parquet")
    pq.write_table(run, staging / "run.parquet")


@pytest.fixture(scope="module")
def published(spark, lake, tmp_path_factory):
    """Two nights on two simulated pools, landed and mined into the perf tables; the
    lake and the number of rows this dataset has in perf.case_stats."""
    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.suite import load_suite
    from pipelines.landing.files import land_shard
    from jobs.mine import mine

    suite = load_suite("gemm-demo")
    for dt in DATES:
        for pool, sku in POOLS.items():
            staging = tmp_path_factory.mktemp(f"staging-{dt}-{pool}")
            spec = ShardSpec(run_id=_run_id(dt, pool), shard=0, num_shards=1, pool=pool, device=f"sim:{sku}",
                             dt=dt, reason="nightly", seed=0)
            run_shard(suite, spec, staging, progress=lambda *_: None)
            _stage_changes(staging, dt, pool)
            land_shard(staging, lake, dt=dt, pool=pool, run_id=spec.run_id, shard=0)
        mine(spark, lake, dt, list(POOLS))
    return lake, len(DATES) * len(POOLS) * len(suite.cases)


def _docs_queries() -> list[tuple[str, str]]:
    """(title, sql) of every `### title` followed by a ```sql block in docs/queries.md."""
    text = DOCS.read_text()
    found = re.findall(r"^### (.+?)\n.*?^```sql\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return [(title.strip(), sql.strip()) for title, sql in found]


def _normal(rows: list[tuple]) -> list[tuple]:
    """Rows in a canonical order, floats rounded to 9 significant digits, so that two
    engines' answers compare equal when they agree up to summation order."""
    def value(v):
        if isinstance(v, float):
            return None if math.isnan(v) else float(f"{v:.9g}")
        if isinstance(v, dict):
            return tuple(sorted((k, value(x)) for k, x in v.items()))
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        return v
    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def _both(query: str, lake) -> tuple[tuple, tuple]:
    return run_query(query, engine="spark", lake=lake), run_query(query, engine="duckdb", lake=lake)


# --- same answer on both engines ----------------------------------------------------

def test_spark_and_duckdb_give_the_same_rows_for_the_same_query(published):
    lake, n_stats = published
    q = (f"SELECT run_id, pool, dt, case_id, status, n, n_kept, median_ns, rel_noise, stable "
         f"FROM perf.case_stats WHERE {OURS}")
    (sc, srows), (dc, drows) = _both(q, lake)
    assert sc == dc
    assert len(srows) == n_stats
    assert _normal(srows) == _normal(drows)


def test_aggregates_timestamps_and_maps_agree_between_engines(published):
    lake, _ = published
    q = (f"SELECT pool, dt, count(*) AS shards, min(started_at) AS first_start, max(torch_version) AS torch "
         f"FROM perf.runs WHERE {OURS} GROUP BY pool, dt")
    (sc, srows), (_, drows) = _both(q, lake)
    assert _normal(srows) == _normal(drows)
    assert all(isinstance(r[3], datetime.datetime) and r[3].utcoffset() == datetime.timedelta(0) for r in srows)
    q = "SELECT sku, peak_tflops, memory_bandwidth_gbps FROM perf.hardware WHERE sku LIKE 'H%'"
    (_, srows), (_, drows) = _both(q, lake)
    assert srows and _normal(srows) == _normal(drows)
    assert isinstance(srows[0][1], dict)


def test_every_column_comment_fits_the_hive_metastore():
    """The metastore's schema holds a column comment in 256 characters (COLUMNS_V2.COMMENT,
    on Derby and on PostgreSQL). A longer one fails the table's creation in the Hive
    format: Spark logs the metastore's stack trace and keeps the table in its own format,
    which Hive-compatible readers cannot read."""
    from schemas.tables import ALL_TABLES

    too_long = [(t.name, c.name, len(c.doc)) for t in ALL_TABLES.values() for c in t.columns if len(c.doc) > 256]
    assert too_long == []


def test_partition_columns_are_strings_on_both_engines(published):
    lake, _ = published
    q = f"SELECT dt, pool FROM perf.case_stats WHERE {OURS} AND dt = '{DATES[0]}' LIMIT 1"
    for engine in ("spark", "duckdb"):
        _, rows = run_query(q, engine=engine, lake=lake)
        assert rows == [(DATES[0], rows[0][1])] and isinstance(rows[0][0], str)


# --- read-only ----------------------------------------------------------------------

@pytest.mark.parametrize("query", [
    "DROP TABLE perf.case_stats",
    "INSERT INTO perf.cases SELECT * FROM perf.cases",
    "SELECT 1; DROP TABLE perf.case_stats",
    "WITH x AS (SELECT 1) INSERT INTO perf.cases SELECT * FROM perf.cases",
    "CREATE TABLE perf.t AS SELECT 1 AS x",
    "COPY (SELECT 1) TO '/tmp/x.csv'",
    "ATTACH '/tmp/x.db'",
    "SET spark.sql.warehouse.dir=/tmp",
    "SELECT 'a\\'; DROP TABLE perf.case_stats; --'",
])
@pytest.mark.parametrize("engine", ["spark", "duckdb"])
def test_the_guard_rejects_writes_and_several_statements_and_the_table_survives(published, engine, query):
    with pytest.raises(ReadOnlyError, match="read-only|more than one statement|backslash"):
        run_query(query, engine=engine, lake=published[0])
    lake, n_stats = published
    _, rows = run_query(f"SELECT count(*) FROM perf.case_stats WHERE {OURS}", engine=engine, lake=lake)
    assert rows[0][0] == n_stats


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('/etc/hostname')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM 'https://example.invalid/x.parquet'",
    "SELECT getenv('HOME')",
])
def test_duckdb_refuses_reads_outside_the_lake_in_one_sentence(published, query):
    with pytest.raises(ValueError) as refused:
        run_query(query, engine="duckdb", lake=published[0])
    message = str(refused.value)
    assert "\n" not in message and "Traceback" not in message
    assert "/etc/hostname" not in message or "refused" in message or "could not run" in message


def test_the_cli_answers_a_refusal_with_one_line_and_no_traceback(published, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("PERFLAKE_HOME", str(published[0].root))
    assert main(["sql", "--engine", "duckdb", "SELECT * FROM read_csv('/etc/hostname')"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("perflake sql: DuckDB refused it") and err.count("\n") == 1
    assert main(["sql", "--engine", "duckdb", "-v", "SELECT * FROM read_csv('/etc/hostname')"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_the_guard_ignores_keywords_inside_literals_and_comments():
    q = "SELECT 'drop; insert' AS note, `update` -- delete everything;\nFROM perf.cases;"
    assert check_read_only(q) == q.rstrip(";")
    assert check_read_only("/* CREATE */ SELECT 1 ;") == "/* CREATE */ SELECT 1"


def test_an_unknown_engine_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="spark, duckdb"):
        run_query("SELECT 1", engine="postgres")


def test_too_many_rows_fail_loudly_instead_of_being_cut(published):
    lake, _ = published
    with pytest.raises(ValueError, match="more than 5 rows"):
        run_query(f"SELECT * FROM perf.case_stats WHERE {OURS}", engine="duckdb", lake=lake, max_rows=5)


# --- docs/queries.md ----------------------------------------------------------------

def test_the_docs_hold_the_promised_questions():
    titles = [t for t, _ in _docs_queries()]
    for wanted in ("Latest results per GPU", "trend over time", "Two GPUs side by side",
                   "Two software versions side by side", "roofline", "Unstable cases", "What failed last night"):
        assert any(wanted.lower() in t.lower() for t in titles), wanted


@pytest.mark.parametrize("title,query", _docs_queries(), ids=[t for t, _ in _docs_queries()])
def test_each_documented_query_returns_the_same_rows_on_both_engines(published, title, query):
    lake, _ = published
    (sc, srows), (dc, drows) = _both(query, lake)
    assert sc == dc
    assert srows, f"{title}: no rows on Spark"
    a, b = _normal(srows), _normal(drows)
    assert len(a) == len(b) and all(_same_row(x, y) for x, y in zip(a, b)), (a, b)


def _same_row(x: tuple, y: tuple) -> bool:
    """Equal, except that a value the query rounded may differ by one unit in its last
    decimal: on a tie (17.775) Spark rounds the decimal text up and DuckDB the binary
    double (17.77499...) down."""
    def last_unit(v: float) -> float:
        text = repr(v)
        return 10.0 ** -len(text.split(".")[1]) if "." in text and "e" not in text else 0.0

    def same(u, v) -> bool:
        if isinstance(u, float) and isinstance(v, float):
            return math.isclose(u, v, rel_tol=1e-9) or abs(u - v) <= 1.0001 * max(last_unit(u), last_unit(v))
        return u == v
    return len(x) == len(y) and all(same(u, v) for u, v in zip(x, y))


def test_the_failure_and_software_queries_find_what_was_staged(published):
    lake, _ = published
    queries = dict(_docs_queries())
    cols, rows = run_query(queries["What failed last night"], engine="duckdb", lake=lake)
    failed = [dict(zip(cols, r)) for r in rows if r[cols.index("run_id")].startswith("sqltest-")]
    assert [(f["pool"], f["status"], f["error"]) for f in failed] == [("sim-h100", "failed", FAILED_ERROR)]
    cols, rows = run_query(queries["Two software versions side by side"], engine="duckdb", lake=lake)
    assert {r[cols.index("new_torch")] for r in rows if r[0] in POOLS.values()} == {NEW_TORCH}
    cols, rows = run_query(queries["Unstable cases"], engine="duckdb", lake=lake)
    assert "sim-h200" in {r[cols.index("pool")] for r in rows}


# --- output -------------------------------------------------------------------------

def test_the_table_format_aligns_columns_and_counts_rows():
    text = format_rows(["kernel", "median_ns"], [("matmul", 1234.5), ("softmax", None)])
    lines = text.splitlines()
    assert lines[0] == "kernel  | median_ns"
    assert lines[2] == "matmul  |    1234.5"
    assert lines[3] == "softmax |      NULL"
    assert lines[-1] == "(2 rows)"


def test_csv_and_json_formats_keep_every_value():
    rows = [("a,b", 1.5, {"m": "128"}, datetime.datetime(2031, 1, 1, tzinfo=datetime.timezone.utc))]
    assert format_rows(["x", "y", "p", "t"], rows, fmt="csv").splitlines() == [
        "x,y,p,t", '"a,b",1.5,"{""m"": ""128""}",2031-01-01 00:00:00+00:00']
    assert format_rows(["x", "x"], [(1, 2)], fmt="json").replace(" ", "").replace("\n", "") == '[{"x":1,"x_2":2}]'
