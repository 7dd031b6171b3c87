"""History: every successful run-level measurement placed in its series, and one row
per series with its first and latest run and a robust baseline.

A series is one case on one kind of hardware in one perf-affecting hardware context
(SKU, clocks, power limit: the hardware fingerprint). Software versions are not part of
the key, so a torch or driver upgrade shows up as a change within the series, which is
what regression detection and attribution look for.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from schemas.spark import ordered_columns
from schemas.tables import SERIES

BASELINE_RUNS = 7


def series_key() -> F.Column:
    parts = [F.coalesce(F.col(c).cast("string"), F.lit("")) for c in
             ("case_id", "gpu_sku", "hardware_fingerprint", "device_kind")]
    return F.substring(F.sha2(F.concat_ws("|", *parts), 256), 1, 16)


def series_points(case_stats: DataFrame, runs: DataFrame) -> DataFrame:
    """One point per series x run: the run's median latency and, where the device has
    an energy counter, its energy per call (first-attempt reruns excluded: a
    confirmation rerun is its own run id and counts as a point of its own)."""
    run_ctx = (runs.select("run_id", "hardware_fingerprint", "software_fingerprint", "started_at", "reason",
                           "driver_version", "cuda_version", "torch_version", "triton_version", "harness_commit",
                           "host")
               .groupBy("run_id").agg(*[F.first(c, ignorenulls=True).alias(c) for c in (
                   "hardware_fingerprint", "software_fingerprint", "reason", "driver_version", "cuda_version",
                   "torch_version", "triton_version", "harness_commit", "host")],
                   F.min("started_at").alias("started_at")))
    ok = case_stats.where((F.col("status") == "ok") & F.col("median_ns").isNotNull())
    return (ok.join(run_ctx, "run_id", "left")
            .withColumn("series_key", series_key())
            .select("series_key", "case_id", "pool", "gpu_sku", "hardware_fingerprint", "device_kind", "family",
                    "kernel", "backend", "dtype", "run_id", "dt", "started_at", "reason", "median_ns",
                    "median_ci_low_ns", "median_ci_high_ns", "rel_noise", "stable", "energy_per_call_j",
                    "avg_power_w", "software_fingerprint", "driver_version",
                    "cuda_version", "torch_version", "triton_version", "harness_commit", "host"))


def series_table(points: DataFrame, baseline_runs: int = BASELINE_RUNS) -> DataFrame:
    order = Window.partitionBy("series_key").orderBy(F.col("started_at").desc(), F.col("run_id").desc())
    ranked = points.withColumn("_rank", F.row_number().over(order))
    prior = ranked.where((F.col("_rank") > 1) & (F.col("_rank") <= baseline_runs + 1))
    baseline = prior.groupBy("series_key").agg(F.percentile("median_ns", 0.5).alias("baseline_ns"))
    mad = (prior.join(baseline, "series_key")
           .groupBy("series_key").agg(F.percentile(F.abs(F.col("median_ns") - F.col("baseline_ns")), 0.5)
                                      .alias("baseline_mad_ns")))
    first_order = Window.partitionBy("series_key").orderBy("started_at", "run_id")
    firsts = (points.withColumn("_r", F.row_number().over(first_order)).where(F.col("_r") == 1)
              .select("series_key", F.col("run_id").alias("first_run_id"), F.col("dt").alias("first_dt")))
    counts = points.groupBy("series_key").agg(F.count(F.lit(1)).alias("n_runs"))
    latest = ranked.where(F.col("_rank") == 1).select(
        "series_key", "case_id", "pool", "gpu_sku", "hardware_fingerprint", "device_kind", "family", "kernel",
        "dtype", F.col("run_id").alias("last_run_id"), F.col("dt").alias("last_dt"),
        F.col("median_ns").alias("last_median_ns"))
    return (latest.join(firsts, "series_key").join(counts, "series_key")
            .join(baseline, "series_key", "left").join(mad, "series_key", "left")
            .select(*ordered_columns(SERIES)))
