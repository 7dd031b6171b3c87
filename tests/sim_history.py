"""A simulated nightly history, landed and published cheaply (shared by test_triage and
test_notify): each night is measured on the simulated device with its injections and
landed as the harness lands it; nights are published in one Spark pass with the mining
job's own transformations, then regression detection runs, as every mine ends.
"""
from __future__ import annotations

import datetime
import hashlib

import pyarrow as pa
import pyarrow.parquet as pq

from kernels_bench import provenance
from kernels_bench.runner import ShardSpec, run_shard
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import PlannedCase, Suite
from pipelines.landing.files import land_shard

SKU = "H100-SXM5-80GB"
RULE = StoppingRule(min_samples=60, min_time_s=0.0, max_samples=60)


def at(dt: str, hour: int = 6) -> datetime.datetime:
    return datetime.datetime.fromisoformat(dt).replace(hour=hour, tzinfo=datetime.timezone.utc)


def land_night(lake, tmp_path, dt: str, pool: str, cases, injections=(), *, torch_version="2.12.0",
               prefix="sim", reason="nightly", suffix="", hour=2) -> str:
    """Measure `cases` on the simulated H100 for night `dt` and land them as run
    <prefix>-<dt>-<pool><suffix>, with torch `torch_version` in its provenance."""
    rid = f"{prefix}-{dt}-{pool}{suffix}"
    out = tmp_path / rid
    spec = ShardSpec(run_id=rid, shard=0, num_shards=1, pool=pool, device=f"sim:{SKU}", dt=dt, reason=reason)
    paths = run_shard(Suite(prefix, tuple(PlannedCase(c) for c in cases), RULE), spec, out,
                      injections=tuple(injections), progress=lambda m: None)
    (row,) = pq.read_table(paths["runs"]).to_pylist()
    start = at(dt, hour)
    row.update(torch_version=torch_version, harness_commit="0a1b2c3", started_at=start,
               finished_at=start + datetime.timedelta(minutes=20))
    row["software_fingerprint"] = provenance.fingerprint(row, provenance.SOFTWARE_KEYS)
    # A series is case x hardware (not pool): the same simulated H100 measured by other
    # tests of the session, on later dates, would join these histories. Each test pool
    # stands for hosts of its own.
    row["hardware_fingerprint"] = hashlib.sha256(f"{row['hardware_fingerprint']}/{pool}".encode()).hexdigest()[:16]
    pq.write_table(pa.Table.from_pylist([row], schema=pq.read_schema(paths["runs"])), paths["runs"])
    land_shard(out, lake, dt=dt, pool=pool, run_id=rid, shard=0)
    return rid


def publish(spark, lake, dates: list[str], pool: str) -> None:
    """Publish the landed nights `dates` of `pool` in one pass (clean, flag outliers,
    aggregate: the mining job's transformations), without a whole mine per night."""
    from pipelines.warehouse import catalog
    from jobs.mine import hardware_frame, landed_files, read_landed
    from pipelines.mining.aggregate import case_stats
    from pipelines.mining.clean import clean_samples, latest_attempt
    from pipelines.mining.outliers import flag_outliers
    from schemas.spark import ordered_columns
    from schemas.tables import CASE_RESULTS, CASE_STATS, RUNS, SAMPLES

    def landed(kind, table):
        return read_landed(spark, [f for dt in dates for f in landed_files(lake, kind, dt, [pool])], table)

    runs = landed("runs", RUNS).drop("_source")
    results = latest_attempt(landed("case_results", CASE_RESULTS).drop("_source"))
    good, _ = clean_samples(landed("samples", SAMPLES))
    flagged = flag_outliers(latest_attempt(good.drop("_source"))).cache()
    catalog.write_partitions(spark, lake, runs, RUNS)
    catalog.write_partitions(spark, lake, flagged.select(*ordered_columns(SAMPLES)), SAMPLES)
    catalog.write_partitions(spark, lake, case_stats(flagged, results, runs, hardware_frame(spark)), CASE_STATS)
    flagged.unpersist()


def snapshot(spark, pool: str):
    """perf.regressions of `pool` as pandas, in key order."""
    df = spark.sql(f"SELECT * FROM perf.regressions WHERE pool = '{pool}'").toPandas()
    return df.sort_values(["series_key", "metric", "change_run_id"]).reset_index(drop=True)
