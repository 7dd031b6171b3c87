"""The dashboard's read path: the published tables through one embedded DuckDB
(pipelines.warehouse.duck), reopened when a publish changed what a reader sees.

Every query is the dashboard's own text; a value from a URL or a form travels as a bound
`?` parameter, never inside the text. A DuckDB connection is not shared between threads:
each query runs on a cursor of its own over the same in-memory views.
"""
from __future__ import annotations

import threading
import time

import pandas as pd

from pipelines.config.lake import Lake
from pipelines.warehouse import snapshots
from pipelines.warehouse.duck import duckdb_connection, published_tables

MAX_AGE_S = 30.0  # a rewritten partition of an existing night is seen after this at the latest


class Reader:
    """Read-only access to one lake's published tables for the web pages."""

    def __init__(self, lake: Lake, max_age_s: float = MAX_AGE_S):
        self.lake, self.max_age_s = lake, max_age_s
        self._lock = threading.Lock()
        self._con = None
        self._tables: dict[str, list] = {}
        self._signature: tuple = ()
        self._opened = 0.0

    def _current_signature(self) -> tuple:
        """What changes when a job publishes: a new partition directory changes its table
        directory's mtime; a new snapshot of an unpartitioned table changes its pointer."""
        out = []
        wh = self.lake.warehouse
        if wh.is_dir():
            for d in sorted(p for p in wh.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
                pointer = d / snapshots.POINTER
                out.append((d.name, d.stat().st_mtime_ns, pointer.read_text().strip() if pointer.exists() else ""))
        return tuple(out)

    def cursor(self):
        """A cursor over the current views (close it when done)."""
        with self._lock:
            signature = self._current_signature()
            stale = time.monotonic() - self._opened > self.max_age_s
            if self._con is None or signature != self._signature or stale:
                if self._con is not None:
                    self._con.close()
                self._tables = published_tables(self.lake)
                self._con = duckdb_connection(self.lake)
                self._signature, self._opened = signature, time.monotonic()
            return self._con.cursor()

    def refresh(self) -> None:
        """Reopen on the next query (after a write of our own)."""
        with self._lock:
            self._opened = 0.0

    def cursor_signature(self) -> tuple:
        """Identifies what the views show now: equal signatures, equal answers."""
        self.cursor().close()
        return self._signature + (self._opened,)

    def has(self, table: str) -> bool:
        """Whether perf.<table> holds data files."""
        self.cursor().close()
        return bool(self._tables.get(table))

    def frame(self, query: str, params=()) -> pd.DataFrame:
        """The rows of `query` with its `?` placeholders bound to `params` in order."""
        cur = self.cursor()
        try:
            return cur.execute(query, list(params)).df()
        finally:
            cur.close()

    def rows(self, query: str, params=()) -> list[dict]:
        """`frame` as a list of dicts with NaN and NaT turned into None (for templates and JSON)."""
        df = self.frame(query, params)
        return records(df)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def records(df: pd.DataFrame) -> list[dict]:
    """Rows as dicts of plain Python values, missing values as None."""
    if df.empty:
        return []
    out = df.astype(object).where(pd.notna(df), None).to_dict("records")
    for row in out:
        for k, v in row.items():
            if isinstance(v, pd.Timestamp):
                row[k] = v.isoformat()
            elif hasattr(v, "item") and not isinstance(v, (list, dict)):
                row[k] = v.item()
    return out
