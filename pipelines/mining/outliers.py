"""Filter noise: throttled samples are excluded, outliers flagged with a robust rule.

A sample is an outlier when it lies more than `k` robust standard deviations
(1.4826 x MAD) from its case's median. Flags are kept on the rows; nothing is dropped.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.changepoint.noise import MAD_TO_SIGMA

GROUP = ("run_id", "case_id", "attempt")
OUTLIER_K = 5.0


def flag_outliers(samples: DataFrame, k: float = OUTLIER_K) -> DataFrame:
    """Adds `outlier` and `kept` (not throttled and not an outlier).

    The case's median and MAD of its unthrottled samples are exact (Spark's `percentile`:
    linear interpolation between order statistics, as numpy) and come from window
    aggregates over the case, so the samples are neither scanned twice nor joined back
    to per-case thresholds: on input already clustered and sorted by case
    (clean_samples, then latest_attempt) this adds no shuffle and no sort. Latencies are
    integers (latency_ns is bigint), so the median is a multiple of 1/2 and the MAD of
    1/4, both exact whichever way the interpolation is written."""
    lat = F.col("latency_ns").cast("double")
    case = Window.partitionBy(*GROUP)  # unbounded frame: each case's aggregate is computed once
    basis = F.when(~F.col("throttled"), lat)
    with_med = samples.withColumn("_med", F.percentile(basis, F.lit(0.5)).over(case))
    with_mad = with_med.withColumn("_mad", F.percentile(F.abs(basis - F.col("_med")), F.lit(0.5)).over(case))
    scale = F.greatest(F.col("_mad") * MAD_TO_SIGMA, F.col("_med") * 1e-4)
    outlier = F.coalesce(F.abs(lat - F.col("_med")) > k * scale, F.lit(False))
    return (with_mad.withColumn("outlier", outlier)
            .withColumn("kept", ~F.col("throttled") & ~F.col("outlier"))
            .drop("_med", "_mad"))
