"""Committed shards: which landed shards a mining run may publish.

A shard lands its samples first and its run row last (pipelines/landing/files.py), and a
retried shard replaces its files one by one. So a shard is complete when its run file
has landed and every sample and case result in its files carries that run row's
attempt. Anything else is a landing in progress, or what a killed worker left
behind: its rows are withheld from this mining run (not quarantined, since the
shard's retry replaces them) and published by the run after the shard completes.

Shards are identified by their landing path (dt, pool, run_id=..., shard-<i>), which
is unique across suites, whereas the `shard` column counts within a suite.
"""
from __future__ import annotations

import operator
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

SHARD_KEY = ("dt", "pool", "_run_dir", "_shard_file")
_PATH = r"/run_id=([^/]+)/shard-(\d+)\.parquet$"


def with_shard_key(landed: DataFrame) -> DataFrame:
    """`landed` (read with a `_source` column, see jobs.mine.read_landed) plus the
    run directory and shard number of the file each row came from."""
    src = F.col("_source")
    return (landed.withColumn("_run_dir", F.regexp_extract(src, _PATH, 1))
                  .withColumn("_shard_file", F.regexp_extract(src, _PATH, 2).cast("int")))


def uncommitted_shards(runs: DataFrame, *parts: DataFrame) -> DataFrame:
    """SHARD_KEY of every shard whose rows in `parts` (case results, samples) lack a
    landed run row of the same attempt. All frames carry SHARD_KEY and `attempt`."""
    key = list(SHARD_KEY)
    landed = parts[0].select(*key, "attempt")
    for p in parts[1:]:
        landed = landed.unionByName(p.select(*key, "attempt"))
    return (landed.distinct()
            .join(runs.select(*key, "attempt"), [*key, "attempt"], "left_anti")
            .select(*key).distinct())


def without(df: DataFrame, shards: DataFrame) -> DataFrame:
    """`df` minus the rows of `shards` (a small frame of SHARD_KEY)."""
    return df.join(F.broadcast(shards), list(SHARD_KEY), "left_anti")


def drop_shard_key(df: DataFrame) -> DataFrame:
    return df.drop(*SHARD_KEY[2:])


MEASUREMENT = ("run_id", "case_id", "attempt")
SHARD_ORDER = ("dt", "pool", "_shard_file", "_run_dir")  # SHARD_KEY, in the order that picks the kept shard


def one_shard_per_case(results: DataFrame, samples: DataFrame | None) -> tuple[DataFrame, DataFrame | None, list]:
    """Keep one shard's measurement of each (run, case, attempt). Two suites of one run
    can hold the same case (a copy in `roofline` and in `memory`); their measurements
    share the sample key, and a row-by-row deduplication would mix the two. The shard
    that sorts first (dt, pool, shard) is kept whole and the others are dropped whole:
    returned as rows of (case_id, pool, _shard_file), to be counted and named. Both
    frames carry SHARD_KEY. One small job over the case results finds the repeats; where
    there are none (the usual night) the frames are returned as they came."""
    shard = F.struct(*[F.col(c) for c in SHARD_ORDER])
    repeated = (results.groupBy(*MEASUREMENT).agg(F.min(shard).alias("_kept"), F.collect_set(shard).alias("_all"))
                .where(F.size("_all") > 1).collect())
    if not repeated:
        return results, samples, []
    dropped = [(r.case_id, s.pool, s._shard_file) for r in repeated for s in r._all if s != r._kept]
    schema = StructType([results.schema[c] for c in MEASUREMENT]
                        + [StructField("_k" + c, results.schema[c].dataType) for c in SHARD_ORDER])
    kept = results.sparkSession.createDataFrame([(*(r[c] for c in MEASUREMENT), *r._kept) for r in repeated], schema)
    same_shard = reduce(operator.and_, [F.col(c) == F.col("_k" + c) for c in SHARD_ORDER])

    def keep(df: DataFrame) -> DataFrame:
        joined = df.join(F.broadcast(kept), list(MEASUREMENT), "left")
        return joined.where(F.col("_kdt").isNull() | same_shard).drop(*["_k" + c for c in SHARD_ORDER])

    return keep(results), (keep(samples) if samples is not None else None), dropped
