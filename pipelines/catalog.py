"""Publishing tables in the Spark catalog (database `perf`), idempotently.

Partitioned tables are written with dynamic partition overwrite: a partition present in
the new data replaces the old one whole, others stay. Small unpartitioned tables are
replaced by key. Every table lives at warehouse/<table>, registered in the metastore.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from pipelines.lake import Lake
from pipelines.spark import DATABASE
from schemas.spark import create_table_ddl, spark_schema
from schemas.tables import Table


def ensure_table(spark: SparkSession, lake: Lake, table: Table) -> str:
    """Create the table if it is missing; add columns that the definition gained since
    it was created (older rows read them as null). A changed type is an error."""
    name = f"{DATABASE}.{table.name}"
    lake.table_path(table.name).mkdir(parents=True, exist_ok=True)
    spark.sql(create_table_ddl(table, DATABASE, lake.table_path(table.name).as_uri()))
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


def _in_table_order(spark: SparkSession, name: str, df: DataFrame) -> DataFrame:
    """insertInto is positional: select the columns in the table's own order."""
    return df.select(*spark.table(name).columns)


def write_partitions(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Replace exactly the partitions that `df` holds."""
    if not table.partition_by:
        raise ValueError(f"{table.name} is not partitioned; use replace_by_key")
    name = ensure_table(spark, lake, table)
    # Compaction: one task per partition writes it as few files as maxRecordsPerFile
    # allows, rather than one small file per shuffle partition.
    _in_table_order(spark, name, df).repartition(*table.partition_by).write.insertInto(name, overwrite=True)


def replace_by_key(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Upsert: rows of `df` replace existing rows with the same key; others stay."""
    name = ensure_table(spark, lake, table)
    keys = list(table.keys)
    new = _in_table_order(spark, name, df).dropDuplicates(keys)
    kept = spark.table(name).join(new.select(*keys), keys, "left_anti")
    # Materialise before overwriting: the table cannot be read and replaced in one plan.
    merged = new.unionByName(kept).localCheckpoint(eager=True)
    merged.write.insertInto(name, overwrite=True)


def overwrite(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Replace the whole table (for tables recomputed from full history, like series)."""
    name = ensure_table(spark, lake, table)
    _in_table_order(spark, name, df).write.insertInto(name, overwrite=True)
