"""Publishing tables in the Spark catalog (database `perf`), idempotently.

Partitioned tables are written with dynamic partition overwrite: a partition present in
the new data replaces the old one whole, others stay. Small unpartitioned tables are
replaced by key. Every table lives at warehouse/<table>, registered in the metastore.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from pipelines.lake import Lake
from pipelines.spark import DATABASE
from schemas.spark import create_table_ddl, ordered_columns
from schemas.tables import Table


def ensure_table(spark: SparkSession, lake: Lake, table: Table) -> str:
    name = f"{DATABASE}.{table.name}"
    lake.table_path(table.name).mkdir(parents=True, exist_ok=True)
    spark.sql(create_table_ddl(table, DATABASE, lake.table_path(table.name).as_uri()))
    return name


def write_partitions(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Replace exactly the partitions that `df` holds."""
    if not table.partition_by:
        raise ValueError(f"{table.name} is not partitioned; use replace_by_key")
    name = ensure_table(spark, lake, table)
    # Compaction: one task per partition writes it as few files as maxRecordsPerFile
    # allows, rather than one small file per shuffle partition.
    df.select(*ordered_columns(table)).repartition(*table.partition_by).write.insertInto(name, overwrite=True)


def replace_by_key(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Upsert: rows of `df` replace existing rows with the same key; others stay."""
    name = ensure_table(spark, lake, table)
    keys = list(table.keys)
    new = df.select(*ordered_columns(table)).dropDuplicates(keys)
    kept = spark.table(name).join(new.select(*keys), keys, "left_anti")
    # Materialise before overwriting: the table cannot be read and replaced in one plan.
    merged = new.unionByName(kept).localCheckpoint(eager=True)
    merged.write.insertInto(name, overwrite=True)


def overwrite(spark: SparkSession, lake: Lake, df: DataFrame, table: Table) -> None:
    """Replace the whole table (for tables recomputed from full history, like series)."""
    name = ensure_table(spark, lake, table)
    df.select(*ordered_columns(table)).write.insertInto(name, overwrite=True)
