"""Filter noise: throttled samples are excluded, outliers flagged with a robust rule.

A sample is an outlier when it lies more than `k` robust standard deviations
(1.4826 x MAD) from its case's median. Flags are kept on the rows; nothing is dropped.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.mining.order_stats import quantile

GROUP = ("run_id", "case_id", "attempt")
OUTLIER_K = 5.0
MAD_TO_SIGMA = 1.4826


def flag_outliers(samples: DataFrame, k: float = OUTLIER_K) -> DataFrame:
    """Adds `outlier` and `kept` (not throttled and not an outlier)."""
    lat = F.col("latency_ns").cast("double")
    # One sorted collect per case gives both the median and the MAD; the per-case
    # thresholds are small and are joined back to the samples (broadcast by AQE).
    basis = (samples.where(~F.col("throttled")).groupBy(*GROUP)
             .agg(F.sort_array(F.collect_list(lat)).alias("_sorted")))
    n = F.size("_sorted")
    with_med = basis.select(*GROUP, "_sorted", quantile(F.col("_sorted"), n, 0.5).alias("_med"))
    deviations = F.array_sort(F.transform("_sorted", lambda x: F.abs(x - F.col("_med"))))
    thresholds = with_med.select(*GROUP, "_med", quantile(deviations, n, 0.5).alias("_mad"))
    flagged = samples.join(thresholds, list(GROUP), "left")
    scale = F.greatest(F.col("_mad") * MAD_TO_SIGMA, F.col("_med") * 1e-4)
    outlier = F.coalesce(F.abs(lat - F.col("_med")) > k * scale, F.lit(False))
    return (flagged.withColumn("outlier", outlier)
            .withColumn("kept", ~F.col("throttled") & ~F.col("outlier"))
            .drop("_med", "_mad"))
