"""Filter noise: throttled samples are excluded, outliers flagged with a robust rule.

A sample is an outlier when it lies more than `k` robust standard deviations
(1.4826 x MAD) from its case's median. Flags are kept on the rows; nothing is dropped.

Where the MAD is 0 (more than half the samples equal the median) the robust standard
deviation is read from the mean absolute deviation instead (sqrt(pi / 2) x MeanAD, the
modified z-score's rule, Iglewicz and Hoaglin): GPU timers tick in steps (CUDA events in
about 0.5 us), so a short kernel's samples often sit on two or three values, and with
the MAD at 0 every sample off the median was an outlier (60 samples at 5120 ns and 40 at
5632 ns kept the 60 only: IQR 0, "stable"). Both give way to a floor of 1e-4 of the
median.
"""
from __future__ import annotations

import math

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines.changepoint.noise import MAD_TO_SIGMA

GROUP = ("run_id", "case_id", "attempt")
OUTLIER_K = 5.0
MEANAD_TO_SIGMA = math.sqrt(math.pi / 2)  # a normal law's sigma over its mean absolute deviation
REL_FLOOR = 1e-4  # the scale is at least this share of the median


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
    deviation = F.abs(basis - F.col("_med"))
    with_mad = (with_med.withColumn("_mad", F.percentile(deviation, F.lit(0.5)).over(case))
                .withColumn("_meanad", F.avg(deviation).over(case)))
    robust = F.when(F.col("_mad") > 0, F.col("_mad") * MAD_TO_SIGMA).otherwise(F.col("_meanad") * MEANAD_TO_SIGMA)
    scale = F.greatest(robust, F.col("_med") * REL_FLOOR)
    outlier = F.coalesce(F.abs(lat - F.col("_med")) > k * scale, F.lit(False))
    return (with_mad.withColumn("outlier", outlier)
            .withColumn("kept", ~F.col("throttled") & ~F.col("outlier"))
            .drop("_med", "_mad", "_meanad"))
