"""Publishing tables safely: an unpartitioned table, or each partition of a partitioned one,
is replaced by a new snapshot behind a pointer (pipelines/warehouse/snapshots.py), so a
publisher killed in the middle of its write leaves the previous version whole for both
engines, the re-run completes, and a reader that listed a version's files a moment
before a publish can still read them. Readers never see Spark's work directories.

The killed publisher is a real process with its own Spark session and lake (the shared
test session holds the shared lake's metastore), killed with SIGKILL together with its
JVM while its tasks are writing Parquet files.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from launchers.short_jvms import product_settings
from pipelines.warehouse import catalog, snapshots
from pipelines.config.lake import Lake
from pipelines.query.sql import run_query
from pipelines.warehouse.duck import duckdb_connection
from schemas.definition import Column, Table

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
    # Its own session (process group), so that SIGKILL to the group takes its JVM too. The
    # product's Spark settings: it writes millions of rows, where the tests' settings for
    # kilobyte lakes (interpreted expressions, the JIT's quick tier) took 14 minutes.
    return subprocess.Popen([sys.executable, "-c", PUBLISHER, str(root), str(n), table], cwd=root.parent,
                            env=product_settings({**os.environ, "PYTHONPATH": str(REPO)}), start_new_session=True,
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
    """Where a publish is writing files: a snapshot directory that is not live, or the
    staging directory of a partitioned publish."""
    live = snapshots.current(table_dir)
    for d in [*table_dir.glob(f"{snapshots.PREFIX}*"), *table_dir.glob(f"{snapshots.STAGING}*")]:
        if d != live and any(p.is_file() for p in d.rglob("*")):
            return d
    return None


@pytest.mark.slow
@pytest.mark.parametrize("table", ["regressions", "case_stats"])
def test_a_publisher_killed_mid_write_leaves_the_previous_version_and_the_rerun_completes(tmp_path, table):
    lake = Lake(tmp_path / "lake")
    table_dir = lake.table_path(table)
    assert publish(lake.root, 1_000, table) == (0, 1_000)
    versioned = table_dir / "dt=2030-01-01" / "pool=p" if table == "case_stats" else table_dir  # the pointer's
    first = snapshots.current(versioned)
    assert first is not None
    assert duckdb_count(lake, table) == 1_000

    proc = publisher(lake.root, 20_000_000, table)
    deadline = time.monotonic() + 240
    try:
        while (half := writing(table_dir)) is None:
            assert proc.poll() is None, f"the publisher ended before it was caught writing: {proc.communicate()}"
            assert time.monotonic() < deadline, "the publisher never started writing"
            time.sleep(0.02)
    finally:  # caught writing or not, it does not go on taking CPU from the later tests
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert any(p.is_file() for p in half.rglob("*")), "killed before anything was written"

    # Both engines read the first version whole; the half-written files are not visible.
    assert snapshots.current(versioned) == first
    assert duckdb_count(lake, table) == 1_000
    assert publish(lake.root, 2_000, table) == (1_000, 2_000)  # the re-run; Spark first read the first version
    assert duckdb_count(lake, table) == 2_000
    assert not half.exists(), "the dead publisher's half-written directory was not cleared"
    assert first.exists() and snapshots.current(versioned) != first  # kept a while for readers still scanning it


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


PARTED = Table(name="partition_probe", grain="one row per key and partition (a test table)", version=1,
               keys=("k", "dt", "pool"), partition_by=("dt", "pool"),
               columns=(Column("k", "string", "key", False), Column("v", "int64", "value"),
                        Column("dt", "string", "night", False), Column("pool", "string", "pool", False)))


def test_a_partition_is_replaced_by_a_snapshot_and_files_a_reader_listed_stay_readable(spark, lake):
    table_dir = lake.table_path(PARTED.name)
    name = f"perf.{PARTED.name}"

    def publish(*rows):
        catalog.write_partitions(spark, lake, spark.createDataFrame(rows, "k string, v int, dt string, pool string"),
                                 PARTED)

    def read(engine):
        return sorted(run_query(f"SELECT k, v, dt, pool FROM {name}", engine, lake)[1])

    # A partition written before partitions had snapshots: loose files, registered at
    # the partition directory (as Spark's dynamic partition overwrite left them).
    catalog.ensure_table(spark, lake, PARTED)
    legacy = table_dir / "dt=2030-01-01" / "pool=old"
    legacy.mkdir(parents=True)
    pq.write_table(pa.table({"k": ["x"], "v": pa.array([0], pa.int64())}), legacy / "part-0.parquet")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION (dt = '2030-01-01', pool = 'old') LOCATION 'file:{legacy}'")
    publish(("a", 1, "2030-01-01", "p"), ("b", 2, "2030-01-01", "q:r s"))  # escaped on disk: q%3Ar s
    assert read("spark") == read("duckdb") == [
        ("a", 1, "2030-01-01", "p"), ("b", 2, "2030-01-01", "q:r s"), ("x", 0, "2030-01-01", "old")]

    # What a query listed just before a publish (the JDBC session's FILE_NOT_EXIST in a
    # re-mine, when the publish deleted them) is still there after it: the old version.
    listed = spark.table(name).where("pool = 'p'").inputFiles()
    publish(("c", 3, "2030-01-01", "p"), ("y", 9, "2030-01-01", "old"))
    assert sorted(tuple(r) for r in spark.read.parquet(*listed).select("k", "v").collect()) == [("a", 1)]
    assert read("spark") == read("duckdb") == [
        ("b", 2, "2030-01-01", "q:r s"), ("c", 3, "2030-01-01", "p"), ("y", 9, "2030-01-01", "old")]
    assert (legacy / "part-0.parquet").exists()  # the loose files are the old version now

    for n in range(1 + snapshots.KEEP_PREVIOUS):
        publish(("z", n, "2030-01-01", "old"))
    assert read("spark") == read("duckdb") == [
        ("b", 2, "2030-01-01", "q:r s"), ("c", 3, "2030-01-01", "p"), ("z", 2, "2030-01-01", "old")]
    kept = sorted(legacy.glob(f"{snapshots.PREFIX}*"))
    assert len(kept) == 1 + snapshots.KEEP_PREVIOUS and kept[-1] == snapshots.current(legacy)
    assert not (legacy / "part-0.parquet").exists()
    assert len(list((table_dir / "dt=2030-01-01" / "pool=p").glob(f"{snapshots.PREFIX}*"))) == 2  # untouched since
    for pool in ("p", "q:r s", "old"):  # Spark reads each partition where its pointer says
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name} PARTITION (dt = '2030-01-01', pool = '{pool}')").collect()
        location = next(r.data_type for r in rows if r.col_name == "Location")
        partition_dir = table_dir / "dt=2030-01-01" / ("pool=" + quote(pool, safe=" "))  # as Hive escapes it
        assert location == f"file:{snapshots.current(partition_dir)}"
    assert not list(table_dir.glob(f"{snapshots.STAGING}*"))


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
                   ("_staging-1/dt=2030-01-02/part-0.parquet", 4), ("dt=2030-01-04/_snapshot-0/part-0.parquet", 6),
                   ("_temporary/0/_temporary/attempt/dt=2030-01-03/part-0.parquet", 7)):
        (table / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows.take([0] * n), table / rel)
    con = duckdb_connection(lake)
    assert con.execute("SELECT count(*), min(dt) FROM perf.probe").fetchall() == [(2, "2030-01-01")]


ADOPTER = """
import sys
from pathlib import Path
from pipelines.config.lake import Lake
from pipelines.deploy.adopt import adopt
from pipelines.warehouse.session import get_spark
lake = Lake(Path(sys.argv[1]))
print("ADOPTED", " ".join(adopt(lake)), flush=True)
spark = get_spark(lake, app="adopter")
for r in spark.sql("SELECT dt, pool, count(*) FROM perf.case_stats GROUP BY dt, pool ORDER BY dt, pool").collect():
    print("ROWS", r[0], r[1], r[2], flush=True)
"""


@pytest.mark.slow
def test_a_lake_mined_embedded_is_adopted_by_a_new_metastore_with_each_partition_at_its_live_snapshot(tmp_path):
    lake = Lake(tmp_path / "lake")
    assert publish(lake.root, 1_000, "case_stats") == (0, 1_000)  # dt=2030-01-01/pool=p, as a snapshot
    # ...and a partition from before partitions had snapshots: loose files.
    legacy = lake.table_path("case_stats") / "dt=2029-12-31" / "pool=p"
    legacy.mkdir(parents=True)
    live = snapshots.current(lake.table_path("case_stats") / "dt=2030-01-01" / "pool=p")
    for f in live.glob("part-*.parquet"):
        pq.write_table(pq.read_table(f).slice(0, 10), legacy / f.name)
    shutil.rmtree(lake.metastore)  # `make up`: the tables are registered again, in a new metastore
    out = subprocess.run([sys.executable, "-c", ADOPTER, str(lake.root)], cwd=lake.root.parent, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "perf.case_stats" in next((ln for ln in out.stdout.splitlines() if ln.startswith("ADOPTED")), ""), \
        out.stderr[-3000:]
    rows = [ln.split()[1:] for ln in out.stdout.splitlines() if ln.startswith("ROWS")]
    assert rows == [["2029-12-31", "p", "10"], ["2030-01-01", "p", "1000"]], out.stderr[-3000:]
