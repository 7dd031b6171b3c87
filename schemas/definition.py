"""How a perflake table is declared: typed, documented columns, partition columns, keys
and a version; the Arrow schema derived from them (Spark's in schemas/spark.py, DuckDB's
column types here). The tables themselves are in schemas/tables.py.

This module imports only pyarrow so that a bare GPU worker can use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

# Logical type name -> (Arrow type, DuckDB type). Spark types are derived in schemas/spark.py.
_TYPES = {
    "string": (pa.string(), "VARCHAR"),
    "int32": (pa.int32(), "INTEGER"),
    "int64": (pa.int64(), "BIGINT"),
    "float64": (pa.float64(), "DOUBLE"),
    "bool": (pa.bool_(), "BOOLEAN"),
    "timestamp": (pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    "map<string,string>": (pa.map_(pa.string(), pa.string()), "MAP(VARCHAR, VARCHAR)"),
    "array<string>": (pa.list_(pa.string()), "VARCHAR[]"),
}


def duckdb_type(logical: str) -> str:
    """The DuckDB type of a logical column type."""
    return _TYPES[logical][1]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str
    nullable: bool = True

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"column {self.name!r}: unknown type {self.type!r}")


@dataclass(frozen=True)
class Table:
    name: str
    grain: str
    version: int
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()
    keys: tuple[str, ...] = field(default=())

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name}: no column {name!r}")

    def arrow_schema(self, *, with_partitions: bool = True) -> pa.Schema:
        cols = [c for c in self.columns if with_partitions or c.name not in self.partition_by]
        return pa.schema(
            [pa.field(c.name, _TYPES[c.type][0], nullable=c.nullable) for c in cols],
            metadata={"perflake.table": self.name, "perflake.version": str(self.version)},
        )
