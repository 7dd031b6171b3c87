"""The mining job for one date: read the landed files, validate, clean, filter noise,
aggregate, publish; then bring the touched series' history and regressions up to date.
Every runner uses it: the Airflow `mine` tasks and `perflake mine` call `mine()`,
spark-submit runs `main()` (local mode, a standalone cluster, Kubernetes or YARN):

  spark-submit jobs/mine.py --lake /data/perflake --date 2026-11-22 [--pool cpu ...]

Re-running it for the same date gives the same tables (each partition is recomputed
from everything landed for it and replaced whole).
"""
from __future__ import annotations

import argparse
import datetime
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.warehouse import catalog
from pipelines.landing.checks import split_files
from pipelines.config.lake import Lake, safe_date
from pipelines.config.progress import Progress
from pipelines.mining.aggregate import case_stats
from pipelines.mining.clean import clean_samples, latest_attempt, to_quarantine
from pipelines.mining.commit import drop_shard_key, one_shard_per_case, uncommitted_shards, with_shard_key, without
from pipelines.mining.history import series_for_night, series_points, series_table
from pipelines.mining.outliers import flag_outliers
from pipelines.mining.regressions import update_regressions
from pipelines.mining.quality import blocked, build_docs, enforce, validate_by_pool, write_dq_results
from pipelines.warehouse.session import DATABASE
from schemas.spark import ordered_columns, spark_schema
from schemas.tables import CASE_RESULTS, CASE_STATS, CASES, HARDWARE, QUARANTINE, RUNS, SAMPLES, SERIES
from schemas.definition import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MineSummary:
    dt: str
    files: int
    files_rejected: int
    samples: int
    rows_quarantined: int
    case_stats: int
    shards_pending: int = 0  # landed without their run row (still landing, or the writer died): not published
    dq_batches: int = 0  # data-quality validations run (one per suite x pool)
    dq_warnings: int = 0  # failed soft expectations
    pools_withheld: tuple[str, ...] = ()  # failed a hard expectation: their partitions were not replaced
    repeated_measurements: int = 0  # a case's measurements in further shards of the same run: dropped whole
    seconds: dict = field(default_factory=dict)  # wall time of the job's steps (publish, series, regressions, total)


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


def mine(spark: SparkSession, lake: Lake, dt: str, pools: list[str] | None = None, progress=None) -> MineSummary:
    """Mine and publish every pool of `dt`. The data-quality suites run on each pool's
    landed batches and on its case_stats; a pool that fails a hard expectation keeps
    its previously published partitions, the others publish, and then the job raises
    DataQualityError naming what failed. Every validation lands in perf.dq_results.
    One mine per date at a time (a second one waits: catalog.mine_lock). `progress`
    (pipelines.config.progress.Progress) is told each of the MINE_STEPS steps."""
    with catalog.mine_lock(lake, dt):
        return _mine(spark, lake, dt, pools, progress or Progress(MINE_STEPS, quiet=True))


MINE_STEPS = 4


def _mine(spark: SparkSession, lake: Lake, dt: str, pools: list[str] | None, progress) -> MineSummary:
    now, started = dt_now(), time.perf_counter()
    inputs: dict[str, list[Path]] = {}
    rejected_files: list[tuple[Path, str]] = []
    for kind, table in (("samples", SAMPLES), ("case_results", CASE_RESULTS), ("runs", RUNS)):
        good, bad = split_files(landed_files(lake, kind, dt, pools), table)
        inputs[kind] = good
        rejected_files += bad
    if not inputs["runs"]:
        raise FileNotFoundError(f"nothing landed for dt={dt} pools={pools or 'all'} under {lake.landing}")

    progress.step(f"reading {sum(map(len, inputs.values()))} landed files of {dt}, checking and cleaning them")
    hardware = hardware_frame(spark)
    if not catalog.holds(spark, hardware, HARDWARE):  # it changes with kernels_bench's catalog only
        catalog.replace_by_key(spark, lake, hardware, HARDWARE)

    runs = with_shard_key(read_landed(spark, inputs["runs"], RUNS))
    results = with_shard_key(read_landed(spark, inputs["case_results"], CASE_RESULTS))
    samples = with_shard_key(read_landed(spark, inputs["samples"], SAMPLES)) if inputs["samples"] else None
    # A sample or case result without an attempt is no try's: it is quarantined (samples
    # by cleaning, results below), it does not hold its shard back.
    tried = samples.where(F.col("attempt").isNotNull()) if samples is not None else None
    untried_results = results.where(F.col("attempt").isNull())
    results = results.where(F.col("attempt").isNotNull())
    pending = uncommitted_shards(runs, *[df for df in (results, tried) if df is not None]).cache()
    n_pending = pending.count()
    if n_pending:
        runs, results = without(runs, pending), without(results, pending)
        samples = without(samples, pending) if samples is not None else None
    # A case measured in two shards of one run (two suites holding it) keeps one shard's
    # measurement whole; the others are counted, not mixed into it row by row.
    results, samples, repeats = one_shard_per_case(results, samples)
    n_repeats = len(repeats)
    if n_repeats:
        log.warning("%d repeated measurements of a case in one run (another shard of the run kept), as (case, "
                    "pool, shard): %s", n_repeats, repeats[:5])
    runs = drop_shard_key(runs).drop("_source")
    results = latest_attempt(drop_shard_key(results).drop("_source"))
    # Validated (GX runs several queries per batch) and then cleaned: read the files once.
    samples = drop_shard_key(samples).persist() if samples is not None else None

    # Data quality, one batch per suite and pool; Data Docs pages are rendered once, below.
    checks = [r for suite, df in (("runs", runs), ("case_results", results), ("samples", samples)) if df is not None
              for r in validate_by_pool(df, suite, dt, lake=lake, docs=False)]

    quarantined = [_file_rejects(spark, rejected_files, dt, now),
                   to_quarantine(drop_shard_key(untried_results).withColumn("reason", F.lit("missing attempt")),
                                 F.col("_source"), F.lit(now), F.lit(dt))]
    if samples is not None:
        good, bad = clean_samples(samples)
        quarantined.append(to_quarantine(bad, F.col("_source"), F.lit(now), F.lit(dt)))
        flagged = flag_outliers(latest_attempt(good.drop("_source"))).cache()
    else:
        flagged = spark.createDataFrame([], spark_schema(SAMPLES)).withColumn("kept", F.lit(True))
    stats = _publishable(case_stats(flagged, results, runs, hardware), blocked(checks)).cache()
    checks += validate_by_pool(stats, "case_stats", dt, lake=lake, docs=False)
    write_dq_results(spark, lake, checks, dt)
    build_docs(lake, checks)
    withheld = blocked(checks)
    out = {name: _publishable(df, withheld) for name, df in
           (("runs", runs), ("samples", flagged), ("stats", stats), ("results", results))}

    # Each pool published tonight owns its (dt, pool) partitions whole: a retry in which
    # every case failed leaves its samples partition empty, not as the last mine left it.
    owned = [(dt, r.pool) for r in out["runs"].select("pool").distinct().collect()]
    progress.step(f"publishing the night of pools {', '.join(sorted(p for _, p in owned)) or '(none)'}")
    catalog.write_partitions(spark, lake, out["runs"], RUNS)
    catalog.write_partitions(spark, lake, out["samples"].select(*ordered_columns(SAMPLES)), SAMPLES, owned=owned)
    catalog.write_partitions(spark, lake, out["stats"], CASE_STATS, owned=owned)
    catalog.replace_by_key(spark, lake, _cases(out["results"]), CASES)
    seconds = {"publish": _lap(started)}
    progress.step("updating the history (perf.series)")
    update_history(spark, lake, night=dt, pools=pools)
    seconds["series"] = _lap(started, seconds)
    progress.step("detecting changes (perf.regressions)")
    update_regressions(spark, lake, now, night=dt, pools=pools)
    seconds["regressions"] = _lap(started, seconds)
    q = quarantined[0]
    for extra in quarantined[1:]:
        q = q.unionByName(extra)
    q = q.withColumn("stage", F.lit("mine")).cache()
    n_quarantined = q.count()
    if pools:  # the partition (dt, mine) is every pool's: the rows of the pools not mined now stay
        q = q.unionByName(_quarantined_elsewhere(spark, lake, dt, pools)).cache()
    # The night's (dt, mine) partition is this mine's (with the other pools' rows above):
    # written even empty, so that a clean re-mine leaves no rows of the one before.
    catalog.write_partitions(spark, lake, q, QUARANTINE, owned=[(dt, "mine")])
    # What `perflake ingest` refused for this night (files and rows, each with its reason)
    # is published beside it, whole on every mine: (dt, ingest).
    catalog.write_partitions(spark, lake, _ingest_rejects(spark, lake, dt), QUARANTINE, owned=[(dt, "ingest")])
    summary = MineSummary(dt=dt, files=sum(map(len, inputs.values())), files_rejected=len(rejected_files),
                          samples=out["samples"].count(), rows_quarantined=n_quarantined,
                          case_stats=out["stats"].count(),
                          shards_pending=n_pending, repeated_measurements=n_repeats, dq_batches=len(checks),
                          dq_warnings=sum(r.soft_failures for r in checks), pools_withheld=tuple(sorted(withheld)),
                          seconds={**seconds, "total": round(time.perf_counter() - started, 2)})
    flagged.unpersist()
    stats.unpersist()
    pending.unpersist()
    if samples is not None:
        samples.unpersist()
    log.info("mined %s", summary)
    enforce(checks)  # last, so that the pools that passed are published first
    return summary


def _publishable(df: DataFrame, withheld: set[str]) -> DataFrame:
    """`df` without the rows of pools whose partitions are withheld."""
    return df.where(~F.col("pool").isin(sorted(withheld))) if withheld else df


def update_history(spark: SparkSession, lake: Lake, *, night: str | None = None,
                   pools: list[str] | None = None) -> None:
    """perf.series from the published history: with `night`, the rows of the series that
    night measured (in `pools`, default all), each from its previous row and its runs of
    the window before the night (pipelines.mining.history), the others kept; without,
    every series from its whole history."""
    stats, runs = spark.table(f"{DATABASE}.case_stats"), spark.table(f"{DATABASE}.runs")
    if night is None:
        catalog.overwrite(spark, lake, series_table(series_points(stats, runs)), SERIES)
        return
    with catalog.table_lock(lake, SERIES):  # read the previous rows, publish: no other mine in between
        previous = spark.table(catalog.ensure_table(spark, lake, SERIES))
        tonight = stats.where(F.col("dt") == F.lit(night))
        if pools:
            tonight = tonight.where(F.col("pool").isin(pools))
        # Every series a row of the night belongs to, measured or not: a retry that failed the
        # case (or left it no kept sample) supersedes the point the night's earlier mine gave it.
        touched = (series_points(tonight, runs.where(F.col("dt") == F.lit(night)), measured_only=False)
                   .select("series_key").distinct().localCheckpoint())
        cases = tonight.select("case_id").distinct()

        def points_since(dt: str | None) -> DataFrame:
            since = F.lit(True) if dt is None else F.col("dt") >= F.lit(dt)
            return series_points(stats.where(since).join(cases, "case_id", "left_semi"), runs.where(since))

        # The touched series' rows are all recomputed: one left without any point loses its row.
        catalog.replace_by_key(spark, lake, series_for_night(previous, touched, night, points_since), SERIES,
                               replaced=touched)


def _quarantined_elsewhere(spark: SparkSession, lake: Lake, dt: str, pools: list[str]) -> DataFrame:
    """The rows the mine of `dt` quarantined earlier from the files of pools other than `pools`."""
    rows = spark.table(catalog.ensure_table(spark, lake, QUARANTINE)).where(
        (F.col("dt") == F.lit(dt)) & (F.col("stage") == F.lit("mine")))
    pool = F.regexp_extract(F.col("source"), r"/pool=([^/]+)/", 1)
    return rows.where(~pool.isin(list(pools))).select(*[f.name for f in spark_schema(QUARANTINE).fields])


def _ingest_rejects(spark: SparkSession, lake: Lake, dt: str) -> DataFrame:
    """The rows of the night's ingest quarantine files (pipelines/landing/records.py
    `write_quarantine`: quarantine/ingest/dt=<dt>/, in the table's columns without its
    partitions), as perf.quarantine rows of stage `ingest`."""
    schema = spark_schema(QUARANTINE)
    files = sorted(str(f) for f in (lake.quarantine / "ingest" / f"dt={dt}").glob("*.parquet"))
    if not files:
        return spark.createDataFrame([], schema)
    stored = [f for f in schema.fields if f.name not in QUARANTINE.partition_by]
    rows = spark.read.schema(T.StructType(stored)).parquet(*files)
    return rows.withColumn("dt", F.lit(dt)).withColumn("stage", F.lit("ingest")).select(*schema.fieldNames())


def _lap(started: float, before: dict | None = None) -> float:
    """Seconds since `started`, less the steps already timed in `before`."""
    return round(time.perf_counter() - started - sum((before or {}).values()), 2)


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


def main(argv: list[str] | None = None) -> int:
    from pipelines.warehouse.session import get_spark

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lake", default=None, help="lake root (default $PERFLAKE_HOME or ./data)")
    ap.add_argument("--date", required=True)
    ap.add_argument("--pool", action="append")
    args = ap.parse_args(argv)
    lake = Lake.from_env(args.lake)
    progress = Progress(MINE_STEPS + 1, "mine")
    progress.step("starting Spark")
    summary = mine(get_spark(lake, app="perflake-mine"), lake, args.date, args.pool, progress)
    progress.finish(f"{summary.case_stats} case statistics published for {args.date}")
    print(json.dumps(summary.__dict__))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
