"""Data-quality gates: real Great Expectations validations of Spark DataFrames, their
results in perf.dq_results, and the hard/soft policy."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pipelines.mining.quality import DataQualityError, blocked, enforce, validate, validate_by_pool, write_dq_results
from schemas.expectations import SUITES, build_suite, severity_of
from schemas.spark import spark_schema
from schemas.tables import CASE_STATS, RUNS, SAMPLES

T0 = dt.datetime(2032, 4, 1, 10, 0, tzinfo=dt.timezone.utc)


def frame(spark, table, rows: list[dict]):
    """A DataFrame in `table`'s Spark schema, only the columns the rows name filled in
    (others null), non-nullable columns relaxed so that tests can hold bad rows."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in spark_schema(table)])
    return spark.createDataFrame([tuple(r.get(f.name) for f in schema) for r in rows], schema)


def samples(spark, latencies, pool="dq-q", throttled=False, device_kind="gpu"):
    return frame(spark, SAMPLES, [{"run_id": "q1", "case_id": "c1", "attempt": 1, "iteration": i, "latency_ns": v,
                                   "throttled": throttled, "device_kind": device_kind, "dt": "2032-04-01",
                                   "pool": pool} for i, v in enumerate(latencies)])


def stats(spark, **overrides):
    row = {"run_id": "q1", "case_id": "c1", "attempt": 1, "status": "ok", "n": 100, "n_kept": 95,
           "median_ns": 1000.0, "p10_ns": 900.0, "p90_ns": 1200.0, "rel_noise": 0.05, "dt": "2032-04-01",
           "pool": "dq-q"}
    failed = {"run_id": "q1", "case_id": "c2", "attempt": 1, "status": "failed", "n": 0, "n_kept": 0,
              "dt": "2032-04-01", "pool": "dq-q"}  # no statistics at all: must not trip the gates
    return frame(spark, CASE_STATS, [{**row, **overrides}, failed])


def test_every_expectation_of_every_suite_is_tagged_hard_or_soft():
    for name in SUITES:
        suite = build_suite(name)
        assert suite.expectations, name
        assert {e.meta.get("severity") for e in suite.expectations} <= {"hard", "soft"}
        assert all(severity_of(e) == e.meta["severity"] for e in suite.expectations)


def test_good_samples_pass(spark):
    r = validate(samples(spark, [1000, 1010, 990]), "samples", "samples good")
    assert (r.success, r.hard_failures, r.soft_failures, r.rows) == (True, 0, 0, 3)
    assert r.evaluated == len(build_suite("samples").expectations)


def test_negative_latencies_fail_the_hard_latency_gate_with_the_values_observed(spark):
    r = validate(samples(spark, [1000, -5, 1010]), "samples", "samples dt=2032-04-01 pool=dq-q")
    assert not r.success and r.hard_failures == 1
    assert r.failed_expectations == ["expect_column_values_to_be_between(latency_ns)"]
    assert "-5" in r.failures[0].observed and "1 of 3 rows" in r.failures[0].observed
    with pytest.raises(DataQualityError) as e:
        enforce([r])
    msg = str(e.value)
    assert "samples [samples dt=2032-04-01 pool=dq-q]" in msg and "expect_column_values_to_be_between(latency_ns)" in msg


def test_a_soft_failure_is_reported_but_enforce_lets_it_through(spark):
    r = validate(samples(spark, [1000, 1010], throttled=None), "samples", "samples soft")
    assert (r.success, r.hard_failures, r.soft_failures) == (False, 0, 1)
    assert r.failures[0].column == "throttled"
    enforce([r])  # warnings only


def test_case_stats_out_of_order_quantiles_are_hard_and_high_noise_is_soft(spark):
    r = validate(stats(spark, p10_ns=1100.0, rel_noise=0.9), "case_stats", "case_stats bad")
    assert r.hard_failures == 1 and r.soft_failures == 1
    by_severity = {f.severity: f"{f.expectation}({f.column})" for f in r.failures}
    assert by_severity == {"hard": "expect_column_pair_values_a_to_be_greater_than_b(median_ns,p10_ns)",
                           "soft": "expect_column_values_to_be_between(rel_noise)"}


def test_runs_with_an_unknown_status_fail_hard(spark):
    row = {"run_id": "q1", "shard": 0, "attempt": 1, "reason": "import", "started_at": T0, "finished_at": T0,
           "device_kind": "gpu", "status": "exploded", "dt": "2032-04-01", "pool": "dq-q"}
    r = validate(frame(spark, RUNS, [row]), "runs", "runs bad")
    assert r.failed_expectations == ["expect_column_values_to_be_in_set(status)"] and r.hard_failures == 1


def test_validation_by_pool_withholds_only_the_broken_pool_and_builds_data_docs(spark, lake):
    df = samples(spark, [1000, 1010], pool="dq-q1").unionByName(samples(spark, [-1, -2], pool="dq-q2"))
    results = validate_by_pool(df, "samples", "2032-04-02", lake=lake)
    assert [r.batch for r in results] == ["samples dt=2032-04-02 pool=dq-q1", "samples dt=2032-04-02 pool=dq-q2"]
    assert blocked(results) == {"dq-q2"}
    assert all(Path(r.docs).is_file() for r in results)
    assert (lake.root / "dq" / "docs" / "index.html").is_file()


def test_results_are_published_to_dq_results_and_a_revalidated_batch_replaces_its_row(spark, lake):
    good = validate(stats(spark), "case_stats", "case_stats dt=2032-04-03 pool=dq-q")
    bad = validate(stats(spark, median_ns=-1.0, p10_ns=-2.0), "case_stats", "case_stats dt=2032-04-03 pool=dq-r")
    write_dq_results(spark, lake, [good, bad], "2032-04-03")
    write_dq_results(spark, lake, [good], "2032-04-03")  # the same batch validated again
    rows = spark.sql("SELECT * FROM perf.dq_results WHERE dt = '2032-04-03' ORDER BY batch").collect()
    assert [(r.batch, r.success, r.hard_failures) for r in rows] == [
        ("case_stats dt=2032-04-03 pool=dq-q", True, 0), ("case_stats dt=2032-04-03 pool=dq-r", False, 1)]
    failed = json.loads(rows[1].failed_expectations)
    assert failed[0]["expectation"] == "expect_column_values_to_be_between" and failed[0]["column"] == "median_ns"


def test_the_spark_and_pandas_engines_give_the_same_verdicts_and_observations(spark):
    """Small batches are validated locally (GX's pandas engine), large ones on Spark: the
    same batch must get the same result on both, failures, severities and quotes included."""
    run = {"run_id": "q1", "shard": 0, "attempt": 1, "reason": "import", "started_at": T0, "finished_at": T0,
           "device_kind": "gpu", "status": "ok", "dt": "2032-04-01", "pool": "dq-q"}
    batches = [  # integers with a null, a soft and a hard set, pairs of floats and of integers, timestamps
        (samples(spark, [1000, -5, 1010, None], device_kind="tpu"), "samples"),
        (stats(spark, p10_ns=1100.0, rel_noise=0.9, n_kept=101), "case_stats"),
        (frame(spark, RUNS, [run, {**run, "status": "exploded", "reason": None,
                                   "finished_at": T0 - dt.timedelta(seconds=1)}]), "runs"),
    ]
    for df, suite in batches:
        on = {engine: validate(df, suite, f"{suite} engines", engine=engine) for engine in ("spark", "pandas")}
        seen = {engine: (r.success, r.rows, r.evaluated, sorted((f.expectation, f.column, f.severity, f.observed)
                                                                for f in r.failures)) for engine, r in on.items()}
        assert seen["spark"] == seen["pandas"], suite
        assert not on["pandas"].success
