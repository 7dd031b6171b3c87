"""Publishing tables safely: an unpartitioned table is replaced by a new snapshot behind a
pointer (pipelines/warehouse/snapshots.py), so a publisher killed in the middle of its write
leaves the previous version whole for both engines, and the re-run completes. Readers
never see Spark's work directories.

The killed publisher is a real process with its own Spark session and lake (the shared
test session holds the shared lake's metastore), killed with SIGKILL together with its
JVM while its tasks are writing Parquet files.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.warehouse import catalog, snapshots
from pipelines.config.lake import Lake
from pipelines.query.sql import run_query
from pipelines.warehouse.duck import duckdb_connection
from schemas.tables import REGRESSIONS, Column, Table

REPO = Path(__file__).resolve().parent.parent

# A publisher: prints how many rows Spark reads in the table, replaces it with N rows
# (perf.regressions, unpartitioned, as a whole; perf.case_stats, partitioned, in one
# partition), and prints the count again. Every column is filled so that big tables are
# big on disk.
PUBLISHER = """
import sys
from pyspark.sql import functions as F, types as T
from pipelines.warehouse import catalog
from pipelines.config.lake import Lake
from pipelines.warehouse.session import get_spark
from schemas.spark import spark_schema
from schemas.tables import ALL_TABLES
from pathlib import Path
root, n, table = Path(sys.argv[1]), int(sys.argv[2]), ALL_TABLES[sys.argv[3]]
spark = get_spark(Lake(root), app="publisher")
def count():
    exists = spark.catalog.tableExists(f"perf.{table.name}")
    print("COUNT", spark.table(f"perf.{table.name}").count() if exists else 0, flush=True)
count()
i = F.col("id")
PARTITION = {"dt": "2030-01-01", "pool": "p"}
def fill(f):
    t = f.dataType
    if f.name in ("dt", "pool"): return F.lit(PARTITION[f.name])
    if isinstance(t, T.StringType): return F.concat(F.lit(f.name + "-"), i.cast("string"))
    if isinstance(t, T.BooleanType): return i % 2 == 0
    if isinstance(t, T.TimestampType): return F.timestamp_seconds(i)
    if isinstance(t, T.MapType): return F.create_map(F.lit("k"), i.cast("string"))
    if isinstance(t, T.ArrayType): return F.array(i.cast("string"))
    return i.cast(t)
rows = spark.range(n, numPartitions=4).select(*[fill(f).alias(f.name) for f in spark_schema(table)])
write = catalog.write_partitions if table.partition_by else catalog.overwrite
write(spark, Lake(root), rows, table)
count()
"""


def publisher(root: Path, n: int, table: str) -> subprocess.Popen:
    # Its own session (process group), so that SIGKILL to the group takes its JVM too.
    return subprocess.Popen([sys.executable, "-c", PUBLISHER, str(root), str(n), table], cwd=root.parent,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def publish(root: Path, n: int, table: str) -> tuple[int, int]:
    """Run a publisher to the end: what Spark read before and after it published."""
    out, err = publisher(root, n, table).communicate(timeout=300)
    counts = [int(line.split()[1]) for line in out.splitlines() if line.startswith("COUNT")]
    assert len(counts) == 2, err[-3000:]
    return counts[0], counts[1]


def duckdb_count(lake: Lake, table: str) -> int:
    return run_query(f"SELECT count(*) FROM perf.{table}", "duckdb", lake)[1][0][0]


def writing(table_dir: Path) -> Path | None:
    """Where a publish is writing files: a snapshot directory that is not live, or
    Spark's staging directory of a dynamic partition overwrite."""
    live = snapshots.current(table_dir)
    for d in [*table_dir.glob(f"{snapshots.PREFIX}*"), *table_dir.glob(".spark-staging-*")]:
        if d != live and any(p.is_file() for p in d.rglob("*")):
            return d
    return None


@pytest.mark.slow
@pytest.mark.parametrize("table", ["regressions", "case_stats"])
def test_a_publisher_killed_mid_write_leaves_the_previous_version_and_the_rerun_completes(tmp_path, table):
    lake = Lake(tmp_path / "lake")
    table_dir = lake.table_path(table)
    assert publish(lake.root, 1_000, table) == (0, 1_000)
    first = snapshots.current(table_dir)
    assert duckdb_count(lake, table) == 1_000

    proc = publisher(lake.root, 20_000_000, table)
    deadline = time.monotonic() + 240
    while (half := writing(table_dir)) is None:
        assert proc.poll() is None, f"the publisher ended before it was caught writing: {proc.communicate()}"
        assert time.monotonic() < deadline, "the publisher never started writing"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert any(p.is_file() for p in half.rglob("*")), "killed before anything was written"

    # Both engines read the first version whole; the half-written files are not visible.
    assert snapshots.current(table_dir) == first
    assert duckdb_count(lake, table) == 1_000
    assert publish(lake.root, 2_000, table) == (1_000, 2_000)  # the re-run; Spark first read the first version
    assert duckdb_count(lake, table) == 2_000
    if half.name.startswith(snapshots.PREFIX):
        assert not half.exists(), "the dead publisher's half-written snapshot was not cleared"
        assert first.exists()  # kept a while for readers still scanning it


# --------------------------------------------------------------------------- in the shared session

PROBE = Table(name="snapshot_probe", grain="one row per key (a test table)", version=1, keys=("k",),
              columns=(Column("k", "string", "key", False), Column("v", "int64", "value")))


def test_replacing_an_unpartitioned_table_publishes_a_new_snapshot_and_clears_old_ones(spark, lake):
    table_dir = lake.table_path(PROBE.name)

    def publish(rows, how=catalog.replace_by_key):
        how(spark, lake, spark.createDataFrame(rows, "k string, v long"), PROBE)

    def read(engine):
        return sorted(run_query(f"SELECT k, v FROM perf.{PROBE.name}", engine, lake)[1])

    publish([("a", 1), ("b", 2)])
    publish([("b", 20), ("c", 3)])  # upsert by key: b replaced, a kept
    assert read("spark") == read("duckdb") == [("a", 1), ("b", 20), ("c", 3)]
    for n in range(4):
        publish([("z", n)], how=catalog.overwrite)
    assert read("spark") == read("duckdb") == [("z", 3)]
    kept = sorted(table_dir.glob(f"{snapshots.PREFIX}*"))
    assert len(kept) == 1 + snapshots.KEEP_PREVIOUS and kept[-1] == snapshots.current(table_dir)
    assert catalog.location(spark, f"perf.{PROBE.name}") == snapshots.current(table_dir)


def test_a_pointer_switch_lost_by_a_dead_writer_is_healed_by_the_next_publish(spark, lake):
    # The writer renamed _CURRENT, then died before it re-pointed the Spark table.
    catalog.overwrite(spark, lake, spark.createDataFrame([("old", 1)], "k string, v long"), PROBE)
    old = snapshots.current(lake.table_path(PROBE.name))
    catalog.overwrite(spark, lake, spark.createDataFrame([("new", 2)], "k string, v long"), PROBE)
    new = snapshots.current(lake.table_path(PROBE.name))
    spark.sql(f"ALTER TABLE perf.{PROBE.name} SET LOCATION '{old.as_uri()}'")
    assert [r.k for r in spark.table(f"perf.{PROBE.name}").collect()] == ["old"]
    catalog.ensure_table(spark, lake, PROBE)
    assert [r.k for r in spark.table(f"perf.{PROBE.name}").collect()] == ["new"]
    assert snapshots.current(lake.table_path(PROBE.name)) == new


def test_a_pointer_to_anything_but_a_snapshot_is_refused(tmp_path):
    table_dir = tmp_path / "t"
    (table_dir / "elsewhere").mkdir(parents=True)
    (table_dir / snapshots.POINTER).write_text("../../etc\n")
    with pytest.raises(RuntimeError, match="not a snapshot directory"):
        snapshots.current(table_dir)
    half = table_dir / f"{snapshots.PREFIX}x"
    half.mkdir()
    with pytest.raises(RuntimeError, match="not a complete snapshot"):
        snapshots.switch(table_dir, half)  # no _SUCCESS: a write that did not finish


def test_duckdb_reads_no_file_of_a_write_in_progress(tmp_path):
    lake = Lake(tmp_path / "lake")
    table = lake.table_path("probe")
    rows = pa.table({"v": [1, 2]})
    for rel, n in (("dt=2030-01-01/part-0.parquet", 2), (".spark-staging-1/dt=2030-01-02/part-0.parquet", 5),
                   ("_temporary/0/_temporary/attempt/dt=2030-01-03/part-0.parquet", 7)):
        (table / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows.take([0] * n), table / rel)
    con = duckdb_connection(lake)
    assert con.execute("SELECT count(*), min(dt) FROM perf.probe").fetchall() == [(2, "2030-01-01")]
