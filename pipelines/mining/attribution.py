"""Attribution: what differs between the last good run and the first bad run of a
change, and the night's changes pooled by that difference ("torch 2.12.0 -> 2.13.0:
37 bf16 gemm series slower by 4.1 to 9.3 %").

A run's context is every perf-relevant attribute that perf.runs records: software
versions, harness commit, host, GPU, clocks, power limit, ECC/MIG and the perf
environment variables. A run spans shards (possibly on several hosts or GPUs of its
pool), so each attribute of a run is the sorted set of its shards' values.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# (perf.runs column, label in a cause), in the order a cause lists them: software first.
ATTRIBUTES = (
    ("driver_version", "driver"), ("cuda_version", "CUDA"), ("cudnn_version", "cuDNN"),
    ("nccl_version", "NCCL"), ("torch_version", "torch"), ("triton_version", "triton"),
    ("python_version", "Python"), ("harness_commit", "harness"), ("host", "host"), ("gpu_uuid", "GPU"),
    ("sm_clock_default_mhz", "SM clock MHz"), ("sm_clock_max_mhz", "max SM clock MHz"),
    ("power_limit_w", "power limit W"), ("ecc_enabled", "ECC"), ("mig_enabled", "MIG"),
)
# Which device index a shard leased says nothing about speed (gpu_uuid names the GPU).
IGNORED_ENV = ("CUDA_VISIBLE_DEVICES",)
NO_DIFFERENCE = "no recorded difference"
# A gradual change's cause starts with this: the detector cannot tell a step at the
# change run from a drift across the runs either side, so what differs between the two
# runs of the split is a lead, not the cause.
GRADUAL = "gradual, not tied to one run: "
_MISSING = "none"


def run_context(runs: DataFrame) -> DataFrame:
    """One row per run_id: each attribute as a string (the run's distinct shard values,
    sorted, comma-joined; null when no shard recorded it) and `env`, a map of the perf
    environment variables to their values."""
    def joined(c: str) -> Column:
        values = F.array_sort(F.collect_set(F.col(c).cast("string")))
        return F.when(F.size(values) > 0, F.array_join(values, ",")).alias(c)

    attrs = runs.groupBy("run_id").agg(*[joined(c) for c, _ in ATTRIBUTES])
    env = (runs.select("run_id", F.explode("env").alias("key", "value"))
           .where(~F.col("key").isin(*IGNORED_ENV))
           .groupBy("run_id", "key").agg(F.array_join(F.array_sort(F.collect_set("value")), ",").alias("value"))
           .groupBy("run_id").agg(F.map_from_entries(F.collect_list(F.struct("key", "value"))).alias("env")))
    return attrs.join(env, "run_id", "left")


def with_attribution(changes: DataFrame, context: DataFrame) -> DataFrame:
    """`changes` (with last_good_run_id and change_run_id) plus `attribution`, a map of
    each differing attribute to 'old -> new', and `cause`, the same as one line
    ('torch 2.12.0 -> 2.13.0; host a -> b', or NO_DIFFERENCE), after GRADUAL where
    detected_by is 'gradual'. A run missing from `context` counts as having recorded
    nothing."""
    ctx = [F.col(c).alias(c) for c, _ in ATTRIBUTES] + [F.col("env")]
    good = context.select(F.col("run_id").alias("_good_id"), F.struct(*ctx).alias("_good"))
    bad = context.select(F.col("run_id").alias("_bad_id"), F.struct(*ctx).alias("_bad"))
    joined = (changes.join(good, F.col("last_good_run_id") == F.col("_good_id"), "left")
              .join(bad, F.col("change_run_id") == F.col("_bad_id"), "left"))
    entries = F.concat(_attribute_diffs(), _env_diffs())
    cause = (F.when(F.size("_diff") > 0, F.array_join(
        F.transform("_diff", lambda e: F.concat_ws(" ", e["key"], e["value"])), "; "))
        .otherwise(F.lit(NO_DIFFERENCE)))
    gradual = F.col("detected_by") == "gradual" if "detected_by" in changes.columns else F.lit(False)
    return (joined.withColumn("_diff", entries)
            .withColumn("attribution", F.map_from_entries("_diff"))
            .withColumn("cause", F.when(gradual, F.concat(F.lit(GRADUAL), cause)).otherwise(cause))
            .drop("_good_id", "_good", "_bad_id", "_bad", "_diff"))


def _change(old: Column, new: Column) -> Column:
    return F.concat(F.coalesce(old, F.lit(_MISSING)), F.lit(" -> "), F.coalesce(new, F.lit(_MISSING)))


def _attribute_diffs() -> Column:
    diffs = [F.when(~F.col("_good")[c].eqNullSafe(F.col("_bad")[c]),
                    F.struct(F.lit(label).alias("key"), _change(F.col("_good")[c], F.col("_bad")[c]).alias("value")))
             for c, label in ATTRIBUTES]
    return F.filter(F.array(*diffs), lambda e: e.isNotNull())


def _env_diffs() -> Column:
    empty = F.array().cast("array<string>")
    old, new = F.col("_good")["env"], F.col("_bad")["env"]
    keys = F.array_sort(F.array_distinct(F.concat(F.coalesce(F.map_keys(old), empty),
                                                  F.coalesce(F.map_keys(new), empty))))
    differing = F.filter(keys, lambda k: ~old[k].eqNullSafe(new[k]))
    return F.transform(differing, lambda k: F.struct(F.concat(F.lit("env "), k).alias("key"),
                                                     _change(old[k], new[k]).alias("value")))


def changes(regressions: DataFrame, dt: str | None = None, *, include_cleared: bool = False) -> DataFrame:
    """The changes of one night (change_dt = dt; every night when dt is None), the cleared
    ones only when asked; `metric` latency where the row predates the column."""
    rows = regressions.withColumn("metric", F.coalesce(F.col("metric"), F.lit("latency")))
    if dt is not None:
        rows = rows.where(F.col("change_dt") == F.lit(dt))
    if not include_cleared:
        rows = rows.where(F.col("status") != "cleared")
    return rows


def pooled(rows: DataFrame) -> DataFrame:
    """`changes` grouped by cause, metric (latency or energy), direction, device kind,
    family and dtype: one row per group with the number of series, the range of
    |change_pct|, the GPUs and the statuses, largest group first. A series that changed
    in latency and in energy is in two groups."""
    size = F.abs(F.col("change_pct"))
    return (rows.groupBy("cause", "metric", "direction", "device_kind", "family", "dtype")
            .agg(F.countDistinct("series_key").alias("series"), F.min(size).alias("min_pct"),
                 F.max(size).alias("max_pct"), F.array_sort(F.collect_set("gpu_sku")).alias("gpus"),
                 F.array_sort(F.collect_set("status")).alias("statuses"),
                 F.array_sort(F.collect_set("change_dt")).alias("nights"))
            .orderBy(F.col("series").desc(), "cause", "metric", "direction", "family", "dtype"))


def describe(group) -> str:
    """One pooled group (a row of `pooled`) as a sentence."""
    what = " ".join(str(p) for p in (group["dtype"], group["family"]) if p)
    sim = " (simulated)" if group["device_kind"] == "simulated" else ""
    worse = group["direction"] == "regression"
    if group["metric"] == "energy":
        verb = "using more energy per call" if worse else "using less energy per call"
    else:
        verb = "slower" if worse else "faster"
    lo, hi = group["min_pct"], group["max_pct"]
    size = f"{lo:.1f} %" if round(lo, 1) == round(hi, 1) else f"{lo:.1f} to {hi:.1f} %"
    return (f"{group['cause']}: {group['series']} {what} series{sim} {verb} by {size} "
            f"on {', '.join(group['gpus'] or [])} [{', '.join(group['statuses'])}]")
