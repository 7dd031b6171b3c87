"""The dashboard's read path: the published tables through embedded DuckDB
(pipelines.warehouse.duck), with the tables every page reads held in memory.

A year of nights is thousands of Parquet files; a query over the file views spends most
of its time opening them (0.4-1 s a query). So the reader copies the small and hot
tables (runs, case_stats with each row's series key, series, cases, regressions,
hardware, projections) into the in-memory database once, and points the `perf` views at
the copies: pages answer in milliseconds and queries keep naming `perf.<table>`. Raw
samples stay on the files (a page reads one night of one case, a few partitions).

From the copies it derives, once per load, what a page would otherwise scan a year of
case_stats for on every view (DERIVED: the nights each GPU was measured, and its points
for the roofline, ordered by GPU and night). `memo` keeps a page's computed answer for
the copy it was computed on.

When a job publishes (a new partition directory, a new snapshot pointer, a rewritten
recent night) the reader builds a fresh copy in the background and keeps answering from
the old one until it is ready; a triage write of the app's own reloads perf.regressions
at once. Every query is the app's own text; values are bound `?` parameters. A DuckDB
connection is not shared between threads: each query runs on a cursor of its own.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Callable, TypeVar

import pandas as pd

from pipelines.config.lake import Lake
from pipelines.warehouse import snapshots
from pipelines.warehouse.duck import duckdb_connection, published_tables
from pipelines.warehouse.session import DATABASE
from pipelines.web.sql import SHAPE_OF_PARAMS

log = logging.getLogger("perflake.web")
V = TypeVar("V")
RECENT_PARTITIONS = 3  # newest date partitions whose rewrite (a rerun, a re-mine) is noticed
CHECK_EVERY_S = 1.0  # how often the warehouse is looked at for a publish (a page makes ~10 queries)
RETIRE_AFTER_S = 60.0  # a replaced copy is closed this long after, when no page still reads it
MEMO_SIZE = 64  # answers `memo` keeps (the least recently used goes first)
# The series key of a case_stats row `cs` joined with its run's hardware fingerprint `r`:
# the same hash pipelines.mining.history.series_key computes on Spark.
SERIES_KEY = ("substr(sha256(concat_ws('|', coalesce(cs.case_id, ''), coalesce(cs.gpu_sku, ''), "
              "coalesce(r.hardware_fingerprint, ''), coalesce(cs.device_kind, ''))), 1, 16)")
# Tables copied into memory, in order, each from the query that fills it.
HOT = {
    "runs": "SELECT * FROM perf.runs",
    "case_stats": (f"SELECT cs.*, {SERIES_KEY} AS series_key FROM perf.case_stats cs LEFT JOIN "
                   "(SELECT run_id, any_value(hardware_fingerprint) AS hardware_fingerprint FROM perf.runs "
                   "GROUP BY run_id) r USING (run_id) "
                   "QUALIFY row_number() OVER (PARTITION BY cs.run_id, cs.case_id ORDER BY cs.attempt DESC) = 1 "
                   "ORDER BY series_key, dt"),
    "series": "SELECT * FROM perf.series",
    "cases": f"SELECT *, {SHAPE_OF_PARAMS} AS shape FROM perf.cases",
    "regressions": "SELECT * FROM perf.regressions",
    "hardware": "SELECT * FROM perf.hardware",
    "projections": "SELECT * FROM perf.projections",
}
# Tables derived from the copies after they load, in schema `hot`: name -> (the copy they
# come from, the query that fills them). case_stats is ordered by series (the series page
# reads one), so a lookup by GPU and night scanned all of it (100-150 ms for a year); these
# are ordered by GPU and night, and a lookup reads a few blocks.
DERIVED = {
    "gpu_nights": ("case_stats", "SELECT gpu_sku, device_kind, dt FROM perf.case_stats WHERE gpu_sku IS NOT NULL "
                                 "GROUP BY gpu_sku, device_kind, dt ORDER BY gpu_sku, dt"),
    "gpu_points": ("case_stats", "SELECT gpu_sku, dt, case_id, series_key, kernel, family, backend, dtype, pool, "
                                 "flops_per_call, bytes_per_call, median_ns, pct_of_peak, device_kind "
                                 "FROM perf.case_stats WHERE status = 'ok' AND median_ns > 0 AND gpu_sku IS NOT NULL "
                                 "ORDER BY gpu_sku, dt"),
}


class Reader:
    """Read-only access to one lake's published tables for the web pages."""

    def __init__(self, lake: Lake):
        self.lake = lake
        self._lock = threading.Lock()
        self._con = None
        self._tables: dict[str, list] = {}
        self._signature: tuple = ()
        self._building: threading.Thread | None = None
        self._retired: list[tuple] = []  # (connection, timer that closes it)
        self._seen: tuple = ()
        self._seen_at = float("-inf")
        self._memo: OrderedDict = OrderedDict()

    def signature(self) -> tuple:
        """What changes when a job publishes: a table directory's mtime (a new partition),
        a snapshot pointer, and the newest date partitions' mtimes (a rewritten night).
        Looked up at most every CHECK_EVERY_S."""
        now = time.monotonic()
        if now - self._seen_at >= CHECK_EVERY_S:
            self._seen, self._seen_at = self._look(), now
        return self._seen

    def _look(self) -> tuple:
        out = []
        wh = self.lake.warehouse
        if wh.is_dir():
            for d in sorted(p for p in wh.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
                pointer = d / snapshots.POINTER
                recent = sorted((p for p in d.iterdir() if p.name.startswith("dt=")), reverse=True)
                # A partition's publish replaces its _CURRENT: the mtime of the directory
                # holding it changes (dt=/ for perf.dq_results, dt=/pool=/ for samples).
                parts = list(recent[:RECENT_PARTITIONS])
                parts += [c for p in recent[:RECENT_PARTITIONS] for c in p.iterdir() if c.is_dir() and "=" in c.name]
                out.append((d.name, d.stat().st_mtime_ns, pointer.read_text().strip() if pointer.exists() else "",
                            tuple(p.stat().st_mtime_ns for p in parts)))
        return tuple(out)

    def _build(self, signature: tuple) -> None:
        t0 = time.perf_counter()
        tables = published_tables(self.lake)
        con = duckdb_connection(self.lake)
        con.execute("CREATE SCHEMA hot")
        for name, fill in HOT.items():
            if tables.get(name):
                con.execute(f"CREATE TABLE hot.{name} AS {fill}")
                con.execute(f"DROP VIEW {DATABASE}.{name}")
                con.execute(f"CREATE VIEW {DATABASE}.{name} AS SELECT * FROM hot.{name}")
        _derive(con, tables)
        with self._lock:
            old, self._con, self._tables, self._signature = self._con, con, tables, signature
        if old is not None:
            timer = threading.Timer(RETIRE_AFTER_S, old.close)
            timer.daemon = True
            timer.start()
            self._retired = [(c, t) for c, t in self._retired if t.is_alive()] + [(old, timer)]
        log.info("perflake web: lake %s loaded in %.1f s", self.lake.root, time.perf_counter() - t0)

    def _rebuild_in_background(self, signature: tuple) -> None:
        def run():
            try:
                self._build(signature)
            except Exception:  # the old copy keeps serving; the next request tries again
                log.exception("perflake web: reloading the lake failed")
            finally:
                self._building = None

        self._building = threading.Thread(target=run, name="perflake-web-reload", daemon=True)
        self._building.start()

    def cursor(self):
        """A cursor over the current copy (close it when done)."""
        signature = self.signature()
        if self._con is None:
            with self._lock:
                first = self._con is None
            if first:
                self._build(signature)
        elif signature != self._signature and self._building is None:
            self._rebuild_in_background(signature)
        with self._lock:
            return self._con.cursor()

    def cursor_signature(self) -> tuple:
        """Identifies the copy pages read now: equal signatures, equal answers."""
        self.cursor().close()
        return self._signature

    def reload(self, table: str) -> None:
        """Copy `table` afresh now (after a write of the app's own), other tables unchanged."""
        files = published_tables(self.lake).get(table)
        with self._lock:
            if self._con is None or not files or table not in HOT:
                return
            listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            self._con.execute(f"CREATE OR REPLACE TABLE hot.{table} AS SELECT * FROM read_parquet([{listed}], "
                              f"hive_partitioning = false, union_by_name = true)")
            self._con.execute(f"CREATE OR REPLACE VIEW {DATABASE}.{table} AS SELECT * FROM hot.{table}")
            self._tables[table] = files
            _derive(self._con, self._tables, source=table)
            # The copy is current again: no whole reload for the app's own write.
            self._seen, self._seen_at = self._look(), time.monotonic()
            self._signature = self._seen

    def memo(self, key: tuple, compute: Callable[[], V]) -> V:
        """compute()'s value, computed once per key and copy of the lake: the copy does not
        change, so neither does an answer computed from it. Callers must not modify it."""
        key = (key, self.cursor_signature())
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = compute()
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return value

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
        return records(self.frame(query, params))

    def close(self) -> None:
        with self._lock:
            for con, timer in self._retired:
                timer.cancel()
                con.close()
            self._retired = []
            if self._con is not None:
                self._con.close()
                self._con = None


def _derive(con, tables: dict, source: str | None = None) -> None:
    """(Re)build the DERIVED tables whose copy has data (only those from `source`, if given)."""
    for name, (table, fill) in DERIVED.items():
        if source in (None, table) and tables.get(table):
            con.execute(f"CREATE OR REPLACE TABLE hot.{name} AS {fill}")


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
