"""The mining job for one date: landing -> clean -> filter noise -> aggregate -> publish.

Re-running it for the same date gives the same tables (each partition is recomputed
from everything landed for it and replaced whole).
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import catalog
from pipelines.intake import split_files
from pipelines.lake import Lake, safe_date
from pipelines.mining.aggregate import case_stats
from pipelines.mining.clean import clean_samples, latest_attempt, to_quarantine
from pipelines.mining.history import series_points, series_table
from pipelines.mining.noise import flag_outliers
from pipelines.spark import DATABASE
from schemas.spark import ordered_columns, spark_schema
from schemas.tables import CASE_RESULTS, CASE_STATS, CASES, HARDWARE, QUARANTINE, RUNS, SAMPLES, SERIES, Table


@dataclass(frozen=True)
class MineSummary:
    dt: str
    files: int
    files_rejected: int
    samples: int
    rows_quarantined: int
    case_stats: int


def landed_files(lake: Lake, kind: str, dt: str, pools: list[str] | None = None) -> list[Path]:
    base = lake.landing / kind / f"dt={safe_date(dt)}"
    files = sorted(base.glob("pool=*/run_id=*/shard-*.parquet"))
    if pools:
        files = [f for f in files if f.parent.parent.name.removeprefix("pool=") in pools]
    return files


def read_landed(spark: SparkSession, files: list[Path], table: Table) -> DataFrame:
    """Landing files with `dt` and `pool` taken from their paths."""
    src = F.input_file_name()
    df = spark.read.schema(spark_schema(table, with_partitions=False)).parquet(*[str(f) for f in files])
    return (df.withColumn("dt", F.regexp_extract(src, r"/dt=([^/]+)/", 1))
              .withColumn("pool", F.regexp_extract(src, r"/pool=([^/]+)/", 1))
              .withColumn("_source", src))


def hardware_frame(spark: SparkSession) -> DataFrame:
    from kernels_bench.hardware import load_catalog

    rows = [{"sku": h.sku, "name": h.name, "device_kind": h.device_kind,
             "peak_tflops": {k: str(v) for k, v in h.peak_tflops.items()},
             "memory_bandwidth_gbps": h.memory_bandwidth_gbps, "l2_bytes": h.l2_bytes, "sm_count": h.sm_count,
             "memory_bytes": h.memory_bytes, "board_power_w": h.board_power_w, "source": h.source}
            for h in load_catalog().values()]
    return spark.createDataFrame(rows, spark_schema(HARDWARE))


def mine(spark: SparkSession, lake: Lake, dt: str, pools: list[str] | None = None) -> MineSummary:
    now = dt_now()
    inputs: dict[str, list[Path]] = {}
    rejected_files: list[tuple[Path, str]] = []
    for kind, table in (("samples", SAMPLES), ("case_results", CASE_RESULTS), ("runs", RUNS)):
        good, bad = split_files(landed_files(lake, kind, dt, pools), table)
        inputs[kind] = good
        rejected_files += bad
    if not inputs["runs"]:
        raise FileNotFoundError(f"nothing landed for dt={dt} pools={pools or 'all'} under {lake.landing}")

    hardware = hardware_frame(spark)
    catalog.replace_by_key(spark, lake, hardware, HARDWARE)

    runs = read_landed(spark, inputs["runs"], RUNS).drop("_source")
    results = latest_attempt(read_landed(spark, inputs["case_results"], CASE_RESULTS).drop("_source"))
    samples = read_landed(spark, inputs["samples"], SAMPLES) if inputs["samples"] else None

    quarantined = [_file_rejects(spark, rejected_files, dt, now)]
    if samples is not None:
        good, bad = clean_samples(samples)
        quarantined.append(to_quarantine(bad, F.col("_source"), F.lit(now), F.lit(dt)))
        flagged = flag_outliers(latest_attempt(good.drop("_source"))).cache()
    else:
        flagged = spark.createDataFrame([], spark_schema(SAMPLES)).withColumn("kept", F.lit(True))
    stats = case_stats(flagged, results, runs, hardware).cache()

    catalog.write_partitions(spark, lake, runs, RUNS)
    catalog.write_partitions(spark, lake, flagged.select(*ordered_columns(SAMPLES)), SAMPLES)
    catalog.write_partitions(spark, lake, stats, CASE_STATS)
    catalog.replace_by_key(spark, lake, _cases(results), CASES)
    update_history(spark, lake)
    q = quarantined[0]
    for extra in quarantined[1:]:
        q = q.unionByName(extra)
    q = q.withColumn("stage", F.lit("mine")).cache()
    n_quarantined = q.count()
    if n_quarantined:
        catalog.write_partitions(spark, lake, q, QUARANTINE)
    summary = MineSummary(dt=dt, files=sum(map(len, inputs.values())), files_rejected=len(rejected_files),
                          samples=flagged.count(), rows_quarantined=n_quarantined, case_stats=stats.count())
    flagged.unpersist()
    stats.unpersist()
    return summary


def update_history(spark: SparkSession, lake: Lake) -> None:
    """Recompute perf.series from the whole published history."""
    points = series_points(spark.table(f"{DATABASE}.case_stats"), spark.table(f"{DATABASE}.runs"))
    catalog.overwrite(spark, lake, series_table(points), SERIES)


def _cases(results: DataFrame) -> DataFrame:
    p = F.col("params")
    return results.select(
        "case_id", "family", "kernel", "backend", "dtype", "params",
        p.getItem("m").cast("bigint").alias("m"), p.getItem("n").cast("bigint").alias("n"),
        p.getItem("k").cast("bigint").alias("k"), p.getItem("batch").cast("bigint").alias("batch"),
        "flops_per_call", "bytes_per_call")


def _file_rejects(spark: SparkSession, rejected: list[tuple[Path, str]], dt: str, now) -> DataFrame:
    rows = [{"source": str(p), "reason": reason, "record": "{}", "ingested_at": now, "dt": dt}
            for p, reason in rejected]
    schema = spark_schema(QUARANTINE)
    return spark.createDataFrame(rows, schema.__class__([f for f in schema.fields if f.name != "stage"]))


def dt_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)
