"""A shard is known by its content: (run_id, shard) wherever it landed, and its rows.

The landing path holds a shard once per (dt, pool); the same shard ingested under
another date or pool would be a second copy that mining counts twice. `landed_copies`
finds every landed copy of a shard, and `compare` says how an incoming copy relates to
one: the same rows (whatever the file name, encoding or date), more rows of the same
attempt, fewer, or other rows.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.config.lake import Lake
from pipelines.landing.files import LAND_ORDER

# Run columns that ingest itself writes, so that two ingests of one shard differ in them.
INGEST_FIELDS = ("reason",)


@dataclass
class LandedCopy:
    dt: str
    pool: str
    tables: dict[str, pa.Table]   # the kinds whose file exists there

    @property
    def attempt(self) -> int | None:
        for kind in ("runs", "case_results", "samples"):
            if kind in self.tables and self.tables[kind].num_rows:
                return max(a for a in self.tables[kind].column("attempt").to_pylist() if a is not None)
        return None

    @property
    def attempts(self) -> set[int]:
        """The attempts its files hold: more than one where a replacement was cut short
        (samples land first, the run row last; mining withholds such a shard)."""
        return {a for t in self.tables.values() for a in t.column("attempt").to_pylist() if a is not None}

    def where(self, lake: Lake, run_id: str, shard: int) -> str:
        return str(lake.landing_file("runs", self.dt, self.pool, run_id, shard).parent)


def landed_copies(lake: Lake, run_id: str, shard: int) -> list[LandedCopy]:
    """Every (dt, pool) under which any file of the shard has landed, with its tables.
    (`run_id` is a checked safe name: no glob characters.)"""
    found: dict[tuple[str, str], dict[str, Path]] = {}
    for kind in LAND_ORDER:
        for f in (lake.landing / kind).glob(f"dt=*/pool=*/run_id={run_id}/shard-{int(shard)}.parquet"):
            key = (f.parents[2].name.removeprefix("dt="), f.parents[1].name.removeprefix("pool="))
            found.setdefault(key, {})[kind] = f
    return [LandedCopy(dt, pool, {kind: pq.read_table(f) for kind, f in files.items()})
            for (dt, pool), files in sorted(found.items())]


def run_nights(lake: Lake, run_id: str) -> list[str]:
    """The nights (dt) under which any file of any shard of the run has landed."""
    return sorted({f.parents[2].name.removeprefix("dt=") for kind in LAND_ORDER
                   for f in (lake.landing / kind).glob(f"dt=*/pool=*/run_id={run_id}/shard-*.parquet")})


def _rows(table: pa.Table | None, ignore: tuple[str, ...] = ()) -> Counter:
    if table is None:
        return Counter()
    return Counter(json.dumps({k: _canonical(v) for k, v in r.items() if k not in ignore}, sort_keys=True, default=str)
                   for r in table.to_pylist())


def _canonical(v):
    # A map reads back as a list of (key, value) pairs, in the order it was written.
    if isinstance(v, list) and all(isinstance(p, tuple) and len(p) == 2 for p in v):
        return sorted(v)
    return v


def _same_rows(a: pa.Table | None, b: pa.Table | None) -> bool:
    """True where both tables hold the same rows in any order, decided in Arrow: `a` cast
    to `b`'s types (a lossy cast refuses), both sorted on their flat columns, compared.
    False where that cannot tell (other columns, rows that tie on every flat column in
    another order, maps written in another order): `_rows` then decides, row by row."""
    if a is None or b is None:
        return a is None and b is None
    if sorted(a.column_names) != sorted(b.column_names) or a.num_rows != b.num_rows:
        return False
    try:
        a = a.select(b.column_names).cast(b.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    keys = [(f.name, "ascending") for f in b.schema if not pa.types.is_nested(f.type)]
    return a.sort_by(keys).equals(b.sort_by(keys))


def compare(incoming: dict[str, pa.Table], landed: dict[str, pa.Table], ignore_run: tuple[str, ...] = ()) -> str:
    """'same' (the same rows), 'more' (every landed row and more, one run row alike),
    'less' (a part of the landed rows) or 'other'."""
    ignore = INGEST_FIELDS + tuple(ignore_run)
    if _rows(incoming.get("runs"), ignore) != _rows(landed.get("runs"), ignore) and "runs" in landed:
        return "other"
    # The usual re-ingest of a landed shard, told without a Python object per row (a
    # million samples: 11 s and 1 GB as JSON rows).
    if "runs" in landed and all(_same_rows(incoming.get(k), landed.get(k)) for k in ("samples", "case_results")):
        return "same"
    pairs = [(_rows(incoming.get(k)), _rows(landed.get(k))) for k in ("samples", "case_results")]
    run_alike = "runs" in landed
    if run_alike and all(i == l for i, l in pairs):
        return "same"
    if all(not (l - i) for i, l in pairs):
        return "more"
    if run_alike and all(not (i - l) for i, l in pairs):
        return "less"
    return "other"
