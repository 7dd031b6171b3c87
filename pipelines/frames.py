"""The published tables as pandas frames, read through DuckDB (embedded, instant, no
metastore lock) or through the process's Spark session: what reports and projections
read. Queries are the module's own (never user text); they name tables `perf.<table>`
and stay within what both dialects share.
"""
from __future__ import annotations

import pandas as pd

from pipelines.lake import Lake
from pipelines.spark import DATABASE

ENGINES = ("duckdb", "spark")


class Frames:
    """Read-only access to one lake's published tables."""

    def __init__(self, lake: Lake, engine: str = "duckdb", spark=None):
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
        self.lake, self.engine, self._spark, self._con = lake, engine, spark, None
        self._published: dict[str, list] | None = None

    def has(self, table: str) -> bool:
        """Whether `perf.<table>` exists and holds data files (an empty table reads as absent).
        Looked up once per Frames: open a new one to see tables written since."""
        from pipelines.sql import published_tables

        if self._published is None:
            self._published = published_tables(self.lake)
        return bool(self._published.get(table))

    def sql(self, query: str) -> pd.DataFrame:
        if self.engine == "duckdb":
            if self._con is None:
                from pipelines.sql import duckdb_connection

                self._con = duckdb_connection(self.lake)
            return self._con.execute(query).df()
        if self._spark is None:
            from pipelines.spark import get_spark

            self._spark = get_spark(self.lake)
        return self._spark.sql(query).toPandas()

    def table(self, table: str, where: str | None = None, columns: str = "*") -> pd.DataFrame:
        """`SELECT columns FROM perf.table [WHERE where]`; an empty frame if the table is absent."""
        if not self.has(table):
            return pd.DataFrame()
        return self.sql(f"SELECT {columns} FROM {DATABASE}.{table}" + (f" WHERE {where}" if where else ""))

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> "Frames":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sql_list(values) -> str:
    """A SQL list literal of strings: ('a', 'b'); ('') when empty, which matches nothing."""
    vals = [str(v).replace("'", "''") for v in values]
    return "(" + ", ".join(f"'{v}'" for v in vals) + ")" if vals else "('')"


def latest_attempt(stats: pd.DataFrame) -> pd.DataFrame:
    """One row per (run_id, case_id): its highest attempt."""
    if stats.empty:
        return stats
    return (stats.sort_values("attempt").groupby(["run_id", "case_id"], as_index=False).tail(1)
            .reset_index(drop=True))


def shape_label(params) -> str:
    """A case's parameters as `k=v,...` in key order ('' when none)."""
    if params is None or (isinstance(params, float) and params != params):
        return ""
    items = params.items() if isinstance(params, dict) else params
    return ",".join(f"{k}={v}" for k, v in sorted(items))
