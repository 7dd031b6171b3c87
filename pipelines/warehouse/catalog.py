"""Publishing tables in the Spark catalog (database `perf`), idempotently.

Every table is published as immutable snapshots behind a pointer
(pipelines/warehouse/snapshots.py): a whole unpartitioned table (hardware, cases, series,
regressions, projections) at a time, or each partition that a write holds (samples,
runs, case_stats, ...: a partition present in the new data replaces the old one whole,
others stay). An overwrite in place would delete files that a reader has just listed
(Spark's dynamic partition overwrite does), or lose the table if its writer were killed
between deleting and writing, triage notes in perf.regressions included.

Every table lives under warehouse/<table>, registered in the metastore.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import threading
import urllib.parse
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.warehouse import snapshots
from pipelines.config.lake import Lake, safe_date
from pipelines.warehouse.session import DATABASE
from schemas.spark import create_table_ddl, spark_schema
from schemas.definition import Table


_held: dict[tuple[Path, int], int] = {}   # (lock file, thread) held, and how many times
_held_guard = threading.Lock()


@contextmanager
def table_lock(lake: Lake, table: Table):
    """Hold the table's writer lock: one read-modify-write of an unpartitioned table at a
    time across every process on this host (a nightly mine, a backfill's mine and a
    `triage ack` may run at once with a shared metastore; without it the later publish
    would drop the earlier one's rows). Reentrant within a thread. An exclusive flock on
    warehouse/<table>/_LOCK (Spark skips `_` names); on a cluster the lake must be on a
    file system with working flock, docs/deploy.md."""
    table_dir = lake.table_path(table.name)
    table_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(table_dir / "_LOCK"):
        yield


@contextmanager
def mine_lock(lake: Lake, dt: str):
    """One mine of a night at a time (`<lake>/locks/mine-<dt>`): two mines of the same
    date would overwrite the same partitions at once. Mines of other dates go on."""
    locks = lake.root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with _exclusive(locks / f"mine-{safe_date(dt)}"):
        yield


@contextmanager
def _exclusive(path: Path):
    """An exclusive flock on `path`, reentrant within a thread."""
    key = (path, threading.get_ident())
    with _held_guard:
        reentered = bool(_held.get(key))
        if reentered:
            _held[key] += 1
    if reentered:
        try:
            yield
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        with _held_guard:
            _held[key] = 1
        try:
            yield
        finally:
            with _held_guard:
                _held.pop(key, None)
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_table(spark: SparkSession, lake: Lake, table: Table) -> str:
    """Create the table if it is missing; add columns that the definition gained since
    it was created (older rows read them as null). A changed type is an error."""
    name = f"{DATABASE}.{table.name}"
    table_dir = lake.table_path(table.name)
    table_dir.mkdir(parents=True, exist_ok=True)
    location = table_dir if table.partition_by else snapshots.live_dir(table_dir)
    spark.sql(create_table_ddl(table, DATABASE, location.as_uri()))
    # Another process may have published since this session last read the table (with a
    # shared metastore, a backfill's mine beside the night's): drop this session's cached
    # location and file listing, so that a read-modify-write under table_lock reads the
    # newest version, not the one this session saw first (which would drop the other's rows).
    spark.catalog.refreshTable(name)
    if not table.partition_by:
        _point_at(spark, name, location)  # heals a writer that died between the two swaps
    existing = {f.name: f.dataType for f in spark.table(name).schema.fields}
    wanted = spark_schema(table)
    changed = [f.name for f in wanted.fields if f.name in existing and existing[f.name] != f.dataType]
    if changed:
        raise RuntimeError(f"table {name} at {lake.table_path(table.name)} has columns {changed} of another type "
                           f"than schemas/tables.py defines; re-mine into a new lake or drop the table")
    missing = [f for f in wanted.fields if f.name not in existing]
    if missing:
        cols = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        spark.sql(f"ALTER TABLE {name} ADD COLUMNS ({cols})")
    return name


def read_table(spark: SparkSession, table: Table) -> DataFrame:
    """The published table for reading, or an empty one of its schema when it was never
    published; creates nothing (works on a read-only session, Spark Connect included)."""
    name = f"{DATABASE}.{table.name}"
    # SHOW TABLES, not catalog.tableExists: the SQL service's gate admits the statement.
    if any(r.tableName == table.name for r in spark.sql(f"SHOW TABLES IN {DATABASE}").collect()):
        return spark.table(name)
    return spark.createDataFrame([], spark_schema(table))


def location(spark: SparkSession, name: str) -> Path:
    """Where the metastore says table `name` lives."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    uri = next(r.data_type for r in rows if r.col_name == "Location")
    return Path("/" + uri.removeprefix("file:").lstrip("/"))


def _point_at(spark: SparkSession, name: str, directory: Path) -> None:
    if location(spark, name) != directory:
        spark.sql(f"ALTER TABLE {name} SET LOCATION '{directory.as_uri()}'")


def _in_table_order(spark: SparkSession, name: str, df: DataFrame) -> DataFrame:
    """The columns in the table's own order (as Spark declares them: partitions last)."""
    return df.select(*spark.table(name).columns)


def write_partitions(spark: SparkSession, lake: Lake, df: DataFrame, table: Table, *,
                     owned: Iterable[tuple[str, ...]] = ()) -> None:
    """Replace exactly the partitions that `df` holds, each by a new snapshot of it, and
    empty those of `owned` (values in `table.partition_by` order) that it holds no row of:
    a writer that owns a partition whole (a night's pool re-mined) leaves nothing of the
    version it replaces, also where the new version has no rows.

    Spark writes every partition into one staging directory (one task per partition, so
    each is as few files as maxRecordsPerFile allows); then each partition directory is
    renamed to a snapshot beside the partition's older ones, made live, and registered in
    the metastore. The files of the version it replaces stay for readers that listed them."""
    if not table.partition_by:
        raise ValueError(f"{table.name} is not partitioned; use replace_by_key")
    name = ensure_table(spark, lake, table)
    table_dir = lake.table_path(table.name)
    staging = snapshots.new_staging(table_dir)
    # The table's columns, in its order and of its types (what insertInto would cast to).
    columns = [F.col(f.name).cast(f.dataType).alias(f.name) for f in spark.table(name).schema]
    try:
        (df.select(*columns).repartition(*table.partition_by).write
           .partitionBy(*table.partition_by).mode("errorifexists").parquet(_location(staging)))
        written = {partition_values(table, d.relative_to(staging)): d   # checked before any is moved
                   for d in snapshots.partition_dirs(staging, len(table.partition_by))}
        published = {}
        for values, part in written.items():
            partition_dir = table_dir / part.relative_to(staging)
            partition_dir.mkdir(parents=True, exist_ok=True)
            snapshot = snapshots.new_snapshot(partition_dir)
            os.rename(part, snapshot)
            snapshots.mark_complete(snapshot)
            snapshots.switch(partition_dir, snapshot)
            published[values] = snapshot
        emptied = {tuple(v) for v in owned} - written.keys()
        if emptied:
            existing = {partition_values(table, d.relative_to(table_dir)): d
                        for d in snapshots.partition_dirs(table_dir, len(table.partition_by))}
            for values in sorted(emptied & existing.keys()):  # an empty snapshot: no rows, a valid version
                snapshot = snapshots.new_snapshot(existing[values])
                snapshot.mkdir()
                snapshots.mark_complete(snapshot)
                snapshots.switch(existing[values], snapshot)
                published[values] = snapshot
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    register_partitions(spark, name, table, published)
    for partition_dir in {s.parent for s in published.values()}:
        snapshots.remove_stale(partition_dir)
    snapshots.remove_abandoned_staging(table_dir)


def partition_values(table: Table, relative: Path) -> tuple[str, ...]:
    """('2026-11-23', 'h100') from dt=2026-11-23/pool=h100 (Hive escapes names with %XX)."""
    values = []
    for column, part in zip(table.partition_by, relative.parts):
        key, _, value = part.partition("=")
        value = urllib.parse.unquote(value)
        if key != column:
            raise RuntimeError(f"{table.name}: {relative} is not a partition directory of ({', '.join(table.partition_by)})")
        if value == "__HIVE_DEFAULT_PARTITION__":
            raise ValueError(f"{table.name}: rows with no {column} (a partition column may not be null): {relative}")
        values.append(value)
    return tuple(values)


def register_partitions(spark: SparkSession, name: str, table: Table, locations: dict[tuple, Path]) -> None:
    """Point each partition (values in `table.partition_by` order) at its directory in
    the metastore: the new ones added in one statement, the known ones moved one by one."""
    if not locations:
        return
    known = {tuple(urllib.parse.unquote(kv.partition("=")[2]) for kv in r[0].split("/"))
             for r in spark.sql(f"SHOW PARTITIONS {name}").collect()}

    def spec(values):
        return ", ".join(f"`{c}` = {_spark_string(v)}" for c, v in zip(table.partition_by, values))

    new = [v for v in locations if v not in known]
    if new:
        spark.sql(f"ALTER TABLE {name} ADD IF NOT EXISTS " +
                  " ".join(f"PARTITION ({spec(v)}) LOCATION {_spark_string(_location(locations[v]))}" for v in new))
    for v in locations:
        if v in known:
            spark.sql(f"ALTER TABLE {name} PARTITION ({spec(v)}) SET LOCATION {_spark_string(_location(locations[v]))}")
    spark.catalog.refreshTable(name)


def _location(directory: Path) -> str:
    # Not as_uri(): Spark makes a Hadoop Path of the string, which would keep a %-escape
    # (as in a partition directory dt%3A...) as it is and escape it again.
    return "file:" + str(directory)


def _spark_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def replace_by_key(spark: SparkSession, lake: Lake, df: DataFrame, table: Table,
                   replaced: DataFrame | None = None) -> None:
    """Upsert: rows of `df` replace existing rows with the same key; others stay. The keys
    in `replaced` (a frame holding the key columns) lose their rows too where `df` has
    none for them. Read and written under the table's lock, so that writers of other keys
    at the same time (mines of other pools) lose nothing."""
    with table_lock(lake, table):
        name = ensure_table(spark, lake, table)
        keys = list(table.keys)
        new = _in_table_order(spark, name, df).dropDuplicates(keys)
        gone = new.select(*keys) if replaced is None else new.select(*keys).unionByName(replaced.select(*keys))
        kept = spark.table(name).join(gone, keys, "left_anti")
        _publish_snapshot(spark, lake, name, table, new.unionByName(kept))


def holds(spark: SparkSession, df: DataFrame, table: Table) -> bool:
    """Whether the published table already holds every row of `df`, a small frame (both
    are compared on the driver: for catalogs of tens to hundreds of rows). Upserting such
    rows (`replace_by_key`) would change nothing, yet write a new snapshot under the
    table's lock: every mine did so for perf.hardware."""
    name = f"{DATABASE}.{table.name}"
    if not spark.catalog.tableExists(name):
        return False
    spark.catalog.refreshTable(name)  # another process may have published since
    published = spark.table(name)
    if set(df.columns) - set(published.columns):
        return False  # the definition gained a column: replace_by_key adds it
    have = {_hashable(r) for r in published.select(*df.columns).collect()}
    return all(_hashable(r) in have for r in df.collect())


def _hashable(row) -> tuple:
    return tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in row)


def overwrite(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Replace the whole table (for tables recomputed from full history, like series).
    A caller that computed `df` from the table itself holds `table_lock` around both."""
    with table_lock(lake, table):
        name = ensure_table(spark, lake, table)
        _publish_snapshot(spark, lake, name, table, _in_table_order(spark, name, df))


def _publish_snapshot(spark: SparkSession, lake: Lake, name: str, table: Table, df: DataFrame) -> None:
    """Write `df` as a new snapshot of an unpartitioned table, then make it the live one.
    The snapshot is a new directory, so `df` may read the table it replaces."""
    if table.partition_by:
        raise ValueError(f"{table.name} is partitioned; use write_partitions")
    table_dir = lake.table_path(table.name)
    snapshot = snapshots.new_snapshot(table_dir)
    df.write.mode("errorifexists").parquet(snapshot.as_uri())
    snapshots.switch(table_dir, snapshot)
    _point_at(spark, name, snapshot)
    snapshots.remove_stale(table_dir)
