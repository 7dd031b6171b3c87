"""The published tables as pandas frames, read through DuckDB (embedded, instant, no
metastore lock) or through the process's Spark session: what reports and projections
read. Queries name tables `perf.<table>` and stay within what both dialects share; a
value from a user, a file or a URL always travels as a bound parameter (`?`, positional
on both engines), never inside the query text: `any_of` builds an IN list that way.
"""
from __future__ import annotations

import pandas as pd

from pipelines.config.lake import Lake
from pipelines.warehouse.session import DATABASE

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
        from pipelines.warehouse.duck import published_tables

        if self._published is None:
            self._published = published_tables(self.lake)
        return bool(self._published.get(table))

    def sql(self, query: str, params=()) -> pd.DataFrame:
        """The rows of `query`, its `?` placeholders bound to `params` in order."""
        params = list(params)
        if self.engine == "duckdb":
            if self._con is None:
                from pipelines.warehouse.duck import duckdb_connection

                self._con = duckdb_connection(self.lake)
            return self._con.execute(query, params).df()
        if self._spark is None:
            from pipelines.warehouse.session import reader_session

            self._spark = reader_session(self.lake)
        return self._spark.sql(query, args=params or None).toPandas()

    def table(self, table: str, where: str | None = None, columns: str = "*", params=()) -> pd.DataFrame:
        """`SELECT columns FROM perf.table [WHERE where]` with `where`'s placeholders bound
        to `params`; an empty frame if the table is absent. `table`, `where` and `columns`
        are the caller's own text, never a user's."""
        if not self.has(table):
            return pd.DataFrame()
        return self.sql(f"SELECT {columns} FROM {DATABASE}.{table}" + (f" WHERE {where}" if where else ""), params)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> "Frames":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def any_of(column: str, values) -> tuple[str, list[str]]:
    """(`column IN (?, ...)`, its parameters): a condition true where `column` is one of
    `values` (as strings); false for no values."""
    vals = [str(v) for v in values]
    if not vals:
        return "false", []
    return f"{column} IN ({', '.join('?' * len(vals))})", vals


def case_stats(frames: Frames, where: str, params=()) -> pd.DataFrame:
    """perf.case_stats rows matching `where` (placeholders bound to `params`), latest
    attempt per run and case, with the case's params and a `shape` label from perf.cases."""
    stats = latest_attempt(frames.table("case_stats", where, params=params))
    if stats.empty:
        return stats
    in_cases, ids = any_of("case_id", stats["case_id"].unique())
    cases = frames.table("cases", in_cases, "case_id, params", params=ids)
    if cases.empty:
        stats["params"] = None
    else:
        stats = stats.merge(cases.drop_duplicates("case_id"), on="case_id", how="left")
    stats["shape"] = stats["params"].map(shape_label)
    return stats


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
