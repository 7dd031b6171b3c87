"""History: every successful run-level measurement placed in its series, and one row
per series with its first and latest run and a robust baseline.

A night's mine does not read a series' whole history again: the row carries what needs
it (the run count, the first run, and a summary of the runs before its history cut), and
the night's update combines that with the runs of the WINDOW_DAYS days before the night.
The result is the row the whole history gives (`series_table`); a series whose carried
summary cannot decide it (measured too rarely for the window to hold its baseline runs,
a row from before the carried columns, a night older than the cut) is recomputed from
its whole history.

A series is one case on one kind of hardware in one perf-affecting hardware context
(SKU, clocks, power limit: the hardware fingerprint). Software versions are not part of
the key, so a torch or driver upgrade shows up as a change within the series, which is
what regression detection and attribution look for.
"""
from __future__ import annotations

import datetime
from typing import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from schemas.spark import ordered_columns
from schemas.tables import SERIES

BASELINE_RUNS = 7
# The days of runs before a night that its mine reads per series: twice the
# BASELINE_RUNS + 1 runs a row needs, for a series measured nightly.
WINDOW_DAYS = 16


def series_key() -> F.Column:
    parts = [F.coalesce(F.col(c).cast("string"), F.lit("")) for c in
             ("case_id", "gpu_sku", "hardware_fingerprint", "device_kind")]
    return F.substring(F.sha2(F.concat_ws("|", *parts), 256), 1, 16)


RUN_CONTEXT = ("hardware_fingerprint", "software_fingerprint", "reason", "driver_version", "cuda_version",
               "torch_version", "triton_version", "harness_commit", "host")


def series_points(case_stats: DataFrame, runs: DataFrame, *, measured_only: bool = True) -> DataFrame:
    """One point per series x run: the run's median latency and, where the device has
    an energy counter, its energy per call (first-attempt reruns excluded: a
    confirmation rerun is its own run id and counts as a point of its own).
    `measured_only=False` keeps the rows without a median too (failed, all throttled):
    for the series a night's rows belong to, not for their values."""
    # The context of the shard that measured each case: a run's shards may run on other
    # hardware or software of the pool, and the fingerprint is part of the series key.
    # Rows mined before case_stats kept its shard take their run's first shard's.
    by_shard = runs.select("run_id", "shard", "attempt", *[F.col(c).alias("_s_" + c) for c in RUN_CONTEXT],
                           F.lit(True).alias("_by_shard")).dropDuplicates(["run_id", "shard", "attempt"])
    by_run = runs.groupBy("run_id").agg(*[F.first(c, ignorenulls=True).alias("_r_" + c) for c in RUN_CONTEXT],
                                        F.min("started_at").alias("started_at"))
    run_ctx = [F.when(F.col("_by_shard"), F.col("_s_" + c)).otherwise(F.col("_r_" + c)).alias(c) for c in RUN_CONTEXT]
    ok = case_stats.where((F.col("status") == "ok") & F.col("median_ns").isNotNull()) if measured_only else case_stats
    return (ok.join(F.broadcast(by_shard), ["run_id", "shard", "attempt"], "left").join(by_run, "run_id", "left")
            .select(*[c for c in ok.columns], "started_at", *run_ctx)
            .withColumn("series_key", series_key())
            .select("series_key", "case_id", "pool", "gpu_sku", "hardware_fingerprint", "device_kind", "family",
                    "kernel", "backend", "dtype", "run_id", "dt", "started_at", "reason", "median_ns",
                    "median_ci_low_ns", "median_ci_high_ns", "rel_noise", "stable", "energy_per_call_j",
                    "avg_power_w", "software_fingerprint", "driver_version",
                    "cuda_version", "torch_version", "triton_version", "harness_commit", "host"))


def window_start(night: str, window_days: int = WINDOW_DAYS) -> str:
    """The history cut of the series a mine of `night` updates."""
    return (datetime.date.fromisoformat(night) - datetime.timedelta(days=window_days)).isoformat()


def series_table(points: DataFrame, baseline_runs: int = BASELINE_RUNS, *, cut: str | None = None,
                 window_days: int = WINDOW_DAYS) -> DataFrame:
    """perf.series rows from every point of each series. The history cut is `cut`, or
    `window_days` before the series' latest date."""
    latest_dt = F.max("dt").over(Window.partitionBy("series_key"))
    cut_dt = F.lit(cut) if cut else F.date_format(F.date_sub(F.to_date(latest_dt), window_days), "yyyy-MM-dd")
    before = F.col("dt") < F.col("_cut")
    totals = (points.withColumn("_cut", cut_dt).groupBy("series_key")
              .agg(F.count(F.lit(1)).alias("n_runs"), F.first("_cut").alias("history_cut_dt"),
                   F.count(F.when(before, 1)).alias("runs_before_cut"),
                   F.max(F.when(before, F.col("started_at"))).alias("last_started_before_cut")))
    return _rows(_ranked(points), _first(points), totals, baseline_runs)


def series_for_night(previous: DataFrame, touched: DataFrame, night: str,
                     points_since: Callable[[str | None], DataFrame], baseline_runs: int = BASELINE_RUNS,
                     window_days: int = WINDOW_DAYS) -> DataFrame:
    """The perf.series rows of the `touched` series (series_key) after the mine of `night`:
    equal to `series_table` over their whole history. `previous` is the table before;
    `points_since(dt)` gives the series points dated dt or later (None: all of them);
    only those of the window and of the series that need more are read."""
    cut = window_start(night, window_days)
    carried_from = previous.join(touched, "series_key", "left_semi").agg(F.min("history_cut_dt")).first()[0]
    read_from = min(cut, carried_from) if carried_from else cut
    # Read once: the rows and the unsure series both come from it.
    recent = points_since(read_from).join(touched, "series_key", "left_semi").localCheckpoint()
    rows, unsure = series_update(previous, recent, touched, night, read_from, baseline_runs, window_days)
    keys = sorted(r.series_key for r in unsure.collect())
    if not keys:
        return rows
    whole = points_since(None).where(F.col("series_key").isin(keys))
    return rows.unionByName(series_table(whole, baseline_runs, cut=cut))


def series_update(previous: DataFrame, recent: DataFrame, touched: DataFrame, night: str, read_from: str,
                  baseline_runs: int = BASELINE_RUNS, window_days: int = WINDOW_DAYS) -> tuple[DataFrame, DataFrame]:
    """(rows, unsure): the new rows of the `touched` series from their `previous` rows and
    their points dated `read_from` or later (`recent`); `unsure` names the series whose
    carried summary cannot decide their row (they are left out of `rows`).

    A row carries the runs before its history cut: their count, the latest start among
    them, and the series' first run. Those runs are never re-mined by a night on or after
    the cut, so carrying them is exact however often a night is mined again; the runs from
    the cut on are read, and the new cut (the window's start) counts those it passes."""
    cut = window_start(night, window_days)
    carried = (touched.join(previous.select(
        "series_key", F.lit(True).alias("_known"), "first_run_id", "first_dt", "first_started_at",
        F.col("history_cut_dt").alias("_from"), F.col("runs_before_cut").alias("_carried"),
        F.col("last_started_before_cut").alias("_carried_last")), "series_key", "left")
        # A series without a row is new: nothing before what was read.
        .withColumn("_from", F.when(F.col("_known").isNull(), F.lit(read_from)).otherwise(F.col("_from")))
        .withColumn("_carried", F.when(F.col("_known").isNull(), F.lit(0)).otherwise(F.col("_carried")))
        .withColumn("_cut", F.greatest(F.col("_from"), F.lit(cut))))
    points = (recent.join(carried.select("series_key", "_from", "_cut"), "series_key")
              .where(F.col("dt") >= F.col("_from")))
    passed = F.col("dt") < F.col("_cut")
    read = points.groupBy("series_key").agg(F.count(F.lit(1)).alias("_n"), F.count(F.when(passed, 1)).alias("_passed"),
                                            F.max(F.when(passed, F.col("started_at"))).alias("_passed_last"))
    ranked = _ranked(points)
    oldest_used = (ranked.where(F.col("_rank") == baseline_runs + 1)
                   .select("series_key", F.col("started_at").alias("_oldest")))
    state = carried.join(read, "series_key", "left").join(oldest_used, "series_key", "left")
    has_carried = F.col("_carried") > 0
    decided = (F.col("_from").isNotNull() & (F.col("_from") <= F.lit(night))
               # the first run is carried only if it is one of the carried runs
               & (~has_carried | ((F.col("first_dt") < F.col("_from")) & F.col("first_started_at").isNotNull()))
               # every run the row's latest and baseline need started after the carried ones
               & (~has_carried | F.coalesce(F.col("_oldest") > F.col("_carried_last"), F.lit(False))))
    state = state.withColumn("_decided", decided)
    unsure = state.where(~F.col("_decided")).select("series_key")
    totals = state.where(F.col("_decided")).select(
        "series_key", (F.col("_carried") + F.coalesce(F.col("_n"), F.lit(0))).alias("n_runs"),
        F.col("_cut").alias("history_cut_dt"),
        (F.col("_carried") + F.coalesce(F.col("_passed"), F.lit(0))).alias("runs_before_cut"),
        F.greatest(F.col("_carried_last"), F.col("_passed_last")).alias("last_started_before_cut"))
    first_carried = state.where(F.col("_decided") & has_carried).select(
        "series_key", F.col("first_run_id").alias("run_id"), F.col("first_dt").alias("dt"),
        F.col("first_started_at").alias("started_at"))
    firsts = _first(points.select("series_key", "run_id", "dt", "started_at").unionByName(first_carried))
    return _rows(ranked, firsts, totals, baseline_runs), unsure


def _ranked(points: DataFrame) -> DataFrame:
    """Points with their rank in the series, the latest run first."""
    order = Window.partitionBy("series_key").orderBy(F.col("started_at").desc(), F.col("run_id").desc())
    return points.withColumn("_rank", F.row_number().over(order))


def _first(points: DataFrame) -> DataFrame:
    """The first run of each series."""
    order = Window.partitionBy("series_key").orderBy("started_at", "run_id")
    return (points.withColumn("_r", F.row_number().over(order)).where(F.col("_r") == 1)
            .select("series_key", F.col("run_id").alias("first_run_id"), F.col("dt").alias("first_dt"),
                    F.col("started_at").alias("first_started_at")))


def _rows(ranked: DataFrame, firsts: DataFrame, totals: DataFrame, baseline_runs: int) -> DataFrame:
    """Rows from the ranked points (the latest run and the baseline before it), each
    series' first run and its totals (n_runs and the history cut's columns)."""
    prior = ranked.where((F.col("_rank") > 1) & (F.col("_rank") <= baseline_runs + 1))
    baseline = prior.groupBy("series_key").agg(F.percentile("median_ns", 0.5).alias("baseline_ns"))
    mad = (prior.join(baseline, "series_key")
           .groupBy("series_key").agg(F.percentile(F.abs(F.col("median_ns") - F.col("baseline_ns")), 0.5)
                                      .alias("baseline_mad_ns")))
    latest = ranked.where(F.col("_rank") == 1).select(
        "series_key", "case_id", "pool", "gpu_sku", "hardware_fingerprint", "device_kind", "family", "kernel",
        "dtype", F.col("run_id").alias("last_run_id"), F.col("dt").alias("last_dt"),
        F.col("median_ns").alias("last_median_ns"))
    return (latest.join(firsts, "series_key").join(totals, "series_key")
            .join(baseline, "series_key", "left").join(mad, "series_key", "left")
            .select(*ordered_columns(SERIES)))
