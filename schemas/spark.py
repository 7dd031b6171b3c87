"""Spark schemas and DDL derived from schemas.tables."""
from __future__ import annotations

from pyspark.sql import types as T

from schemas.definition import Table

_SPARK = {
    "string": T.StringType(), "int32": T.IntegerType(), "int64": T.LongType(), "float64": T.DoubleType(),
    "bool": T.BooleanType(), "timestamp": T.TimestampType(),
    "map<string,string>": T.MapType(T.StringType(), T.StringType()),
    "array<string>": T.ArrayType(T.StringType()),
}


def spark_type(logical: str) -> T.DataType:
    """The Spark type of a logical column type (schemas.tables)."""
    return _SPARK[logical]


def ordered_columns(table: Table) -> list[str]:
    """Data columns first, partition columns last: the physical order of the table."""
    data = [c.name for c in table.columns if c.name not in table.partition_by]
    return data + list(table.partition_by)


def spark_schema(table: Table, *, with_partitions: bool = True) -> T.StructType:
    names = ordered_columns(table) if with_partitions else [
        c.name for c in table.columns if c.name not in table.partition_by]
    return T.StructType([T.StructField(n, _SPARK[table.column(n).type], table.column(n).nullable) for n in names])


def create_table_ddl(table: Table, database: str, location: str) -> str:
    cols = ",\n  ".join(f"`{n}` {spark_type(table.column(n).type).simpleString()} COMMENT '{table.column(n).doc.replace(chr(39), '')}'"
                        for n in ordered_columns(table))
    parts = f"\nPARTITIONED BY ({', '.join(table.partition_by)})" if table.partition_by else ""
    return (f"CREATE TABLE IF NOT EXISTS {database}.{table.name} (\n  {cols}\n) USING parquet{parts}\n"
            f"LOCATION '{location}'\nCOMMENT '{table.grain} (schema v{table.version})'")
