"""Clean: enforce the landing schema, reject invalid rows with a reason, deduplicate."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

SAMPLE_KEYS = ("run_id", "case_id", "attempt", "iteration")


def _sample_reject_reason() -> Column:
    lat = F.col("latency_ns")
    return (F.when(F.col("run_id").isNull() | F.col("case_id").isNull(), F.lit("missing run_id or case_id"))
            # without it the sample belongs to no try of its shard: latest_attempt would drop it unseen
            .when(F.col("attempt").isNull(), F.lit("missing attempt"))
            .when(F.col("iteration").isNull() | (F.col("iteration") < 0), F.lit("missing or negative iteration"))
            .when(lat.isNull(), F.lit("latency_ns is null"))
            .when(F.isnan(lat.cast("double")) | (F.abs(lat.cast("double")) == float("inf")),
                  F.lit("latency_ns is not finite"))
            .when(lat <= 0, F.concat(F.lit("latency_ns is not positive: "), lat.cast("string"))))


def clean_samples(samples: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Split samples into (good, rejected). Good rows are unique on (run, case, attempt,
    iteration); a duplicate keeps one copy, without the `_source` file name. Rejected rows
    carry `reason` (and `_source`, when the input has it, for the quarantine)."""
    tagged = samples.withColumn("_reason", _sample_reject_reason())
    rejected = tagged.where(F.col("_reason").isNotNull()).withColumnRenamed("_reason", "reason")
    # Cluster by case once: deduplication, the latest-attempt window and every per-case
    # aggregation downstream reuse this partitioning instead of shuffling again, and sort
    # it once by the natural key: the deduplication then streams through a sort aggregate
    # (no hash table of every key) and the per-case windows and aggregations downstream
    # find their order already there. The file name is dropped first: it would double the
    # bytes shuffled.
    good = (tagged.where(F.col("_reason").isNull()).drop("_reason", "_source")
            .repartition("run_id", "case_id").sortWithinPartitions(*SAMPLE_KEYS)
            .dropDuplicates(list(SAMPLE_KEYS)))
    return good, rejected


def latest_attempt(df: DataFrame, keys: tuple[str, ...] = ("run_id", "case_id")) -> DataFrame:
    """Keep only the highest attempt per key: a rerun of a shard supersedes the earlier try.

    The window is ordered by attempt (its frame still the whole key), so its sort also
    serves the per-attempt windows and aggregations downstream (flag_outliers,
    sample_stats) instead of each sorting the samples again."""
    w = (Window.partitionBy(*keys).orderBy("attempt")
         .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    return df.withColumn("_max_attempt", F.max("attempt").over(w)).where(
        F.col("attempt") == F.col("_max_attempt")).drop("_max_attempt")


def to_quarantine(rejected: DataFrame, source: Column, ingested_at: Column, dt: Column) -> DataFrame:
    """Rows in the quarantine table's shape: the whole raw record as JSON, and why."""
    payload = [c for c in rejected.columns if c not in ("reason", "_source")]
    return rejected.select(
        source.alias("source"), F.col("reason"),
        F.to_json(F.struct(*[F.col(c) for c in payload])).alias("record"),
        ingested_at.alias("ingested_at"), dt.alias("dt"))
