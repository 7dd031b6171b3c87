"""Embedded DuckDB over the published tables: one view per table in schema `perf`, over
the files Spark would read (the partitions of a partitioned table, the live snapshot of
an unpartitioned one, never a write in progress), with file access limited to the
warehouse and its configuration locked. Partition columns (`dt`, `pool`, ...) stay
strings, as Spark declares them."""
from __future__ import annotations

from pipelines.config.lake import Lake
from pipelines.warehouse import snapshots
from pipelines.warehouse.session import DATABASE
from schemas.definition import Table, duckdb_type
from schemas.tables import ALL_TABLES


def published_tables(lake: Lake) -> dict[str, list]:
    """Table name -> the Parquet files a reader sees now (see `table_files`), for every
    table directory in the warehouse that holds files or is a known perflake table."""
    found = {}
    if lake.warehouse.is_dir():
        for d in sorted(p for p in lake.warehouse.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
            files = table_files(d)
            if files or d.name in ALL_TABLES:
                found[d.name] = files
    return found


def table_files(table_dir) -> list:
    """What Spark reads of a table: the live snapshot of an unpartitioned table, or that of
    each partition, skipping hidden and work files (pipelines/warehouse/snapshots.py)."""
    return snapshots.live_files(table_dir)


def duckdb_connection(lake: Lake):
    """An in-memory DuckDB with schema `perf` holding one view per published table,
    file access limited to the warehouse and configuration locked."""
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"CREATE SCHEMA {DATABASE}")
    for name, files in published_tables(lake).items():
        if files:
            listed = "[" + ", ".join(_sql_string(str(f)) for f in files) + "]"
            hive = snapshots.current(lake.table_path(name)) is None  # a snapshot has no partitions
            # Partition values stay strings (no autocast), as Spark declares them.
            source = (f"read_parquet({listed}, hive_partitioning = {str(hive).lower()}, "
                      f"hive_types_autocast = false, union_by_name = true)")
        else:
            source = _empty_relation(ALL_TABLES[name])
        con.execute(f'CREATE VIEW {DATABASE}."{name}" AS SELECT * FROM {source}')
    con.execute(f"SET allowed_directories = [{_sql_string(str(lake.warehouse) + '/')}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")
    return con


def _empty_relation(table: Table) -> str:
    """A typed, empty relation with the table's columns in Spark's physical order, so an
    empty table can be queried the same way on both engines."""
    data = [c for c in table.columns if c.name not in table.partition_by]
    parts = [table.column(p) for p in table.partition_by]
    cols = ", ".join(f'CAST(NULL AS {duckdb_type(c.type)}) AS "{c.name}"' for c in data + parts)
    return f"(SELECT {cols} WHERE false)"


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
