"""Aggregate: one `case_stats` row per run x case x attempt, failures included.

Quantiles interpolate linearly between order statistics (numpy's default), computed
from each case's sorted kept samples; the 95 % confidence interval of the median is the
distribution-free order-statistic interval (ranks n/2 -+ 1.96 sqrt(n)/2).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kernels_bench.hardware import roofs_ns
from pipelines.mining.outliers import GROUP
from pipelines.mining.order_stats import at as _at, quantile
from schemas.spark import ordered_columns, spark_type
from schemas.tables import CASE_STATS

STABLE_REL_IQR = 0.05  # IQR / median at or under this is a stable measurement
Z95 = 1.959964


def sample_stats(flagged: DataFrame) -> DataFrame:
    """Per (run, case, attempt): n, n_kept and the robust statistics of kept samples."""
    lat = F.col("latency_ns").cast("double")
    agg = flagged.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col("kept").cast("long")).alias("n_kept"),
        F.sort_array(F.collect_list(F.when(F.col("kept"), lat))).alias("_sorted"),
        F.avg(F.when(F.col("kept"), lat)).alias("mean_ns"),
        F.stddev_samp(F.when(F.col("kept"), lat)).alias("stdev_ns"),
    )
    n, arr = F.col("n_kept"), F.col("_sorted")
    half_width = F.lit(Z95) * F.sqrt(n) / 2
    ci_lo_rank = F.greatest(F.floor(n / 2 - half_width), F.lit(1))
    ci_hi_rank = F.least(F.ceil(n / 2 + half_width) + 1, n)
    return (agg
            .withColumn("median_ns", quantile(arr, n, 0.5))
            .withColumn("p10_ns", quantile(arr, n, 0.1))
            .withColumn("p90_ns", quantile(arr, n, 0.9))
            .withColumn("iqr_ns", quantile(arr, n, 0.75) - quantile(arr, n, 0.25))
            .withColumn("median_ci_low_ns", F.when(n > 0, _at(arr, ci_lo_rank)))
            .withColumn("median_ci_high_ns", F.when(n > 0, _at(arr, ci_hi_rank)))
            .drop("_sorted"))


def roofline_ns(flops: Column, bytes_: Column, peak_tflops: Column, bandwidth_gbps: Column) -> Column:
    """The lower bound of a call: the slower of its compute and its memory traffic."""
    compute, memory = roofs_ns(flops, bytes_, peak_tflops, bandwidth_gbps)
    compute, memory = F.when(peak_tflops > 0, compute), F.when(bandwidth_gbps > 0, memory)
    return F.greatest(F.coalesce(compute, F.lit(0.0)), F.coalesce(memory, F.lit(0.0)))


def case_stats(flagged: DataFrame, case_results: DataFrame, runs: DataFrame, hardware: DataFrame) -> DataFrame:
    """Join each attempted case with its statistics, its run's hardware and that
    hardware's peaks. Cases without samples (failed, skipped) keep null statistics."""
    stats = sample_stats(flagged)
    run_info = runs.select("run_id", "shard", "attempt", "device_kind", "gpu_sku")
    hw = hardware.select(F.col("sku").alias("gpu_sku"), F.col("peak_tflops"), F.col("memory_bandwidth_gbps"))
    joined = (case_results
              .join(stats, list(GROUP), "left")
              .join(run_info, ["run_id", "shard", "attempt"], "left")
              .join(hw, "gpu_sku", "left"))
    med = F.col("median_ns")
    peak = F.element_at(F.col("peak_tflops"), F.col("dtype")).cast("double")
    bound = roofline_ns(F.col("flops_per_call"), F.col("bytes_per_call"), peak, F.col("memory_bandwidth_gbps"))
    out = (joined
           .withColumn("n", F.coalesce(F.col("n"), F.lit(0)))
           .withColumn("n_kept", F.coalesce(F.col("n_kept"), F.lit(0)))
           .withColumn("rel_noise", F.col("iqr_ns") / med)
           .withColumn("tflops", F.when(med > 0, F.col("flops_per_call") / med / 1e3))
           .withColumn("gbps", F.when(med > 0, F.col("bytes_per_call") / med))
           .withColumn("pct_of_peak", F.when((med > 0) & (bound > 0), bound / med * 100.0))
           .withColumn("stable", F.col("rel_noise") <= STABLE_REL_IQR)
           .withColumn("tflops_per_watt", F.when(F.col("energy_per_call_j") > 0,
                                                 F.col("flops_per_call") / F.col("energy_per_call_j") / 1e12))
           .withColumn("joules_per_tflop", F.when((F.col("flops_per_call") > 0) & (F.col("energy_per_call_j") > 0),
                                                  F.col("energy_per_call_j") / (F.col("flops_per_call") / 1e12))))
    return out.select(*[F.col(c).cast(spark_type(CASE_STATS.column(c).type)) for c in ordered_columns(CASE_STATS)])
