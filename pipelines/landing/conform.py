"""A file's columns in the landing schema, by lossless conversions only.

Other writers (pandas, another harness, a re-export) store the same values in other
Arrow types: a column of nulls typed `null`, a map as a list of key/value pairs,
timestamps in another unit or zone, integers as strings or as a narrower or wider type.
`conform` converts those and says what it converted; a conversion that would lose or
invent information refuses the file, naming the column, a row and the reason. A single
value that cannot be stored in its column (an integer over the column's range, a
non-finite float latency) sets aside that row only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from schemas.definition import Table

# Integer columns that other harnesses write as float nanoseconds: rounded to whole ns
# (below any timer's resolution), recorded as a conversion.
ROUNDED = {"latency_ns"}
_INT = re.compile(r"^[+-]?\d+$")
_PANDAS_INDEX = re.compile(r"^__index_level_\d+__$")
_RANGES = {pa.int8(): 2**7, pa.int16(): 2**15, pa.int32(): 2**31, pa.int64(): 2**63}


class Lossy(ValueError):
    """A column that cannot be converted without losing or inventing information."""


@dataclass
class Conformed:
    table: pa.Table | None = None                  # in the landing schema (None: refused)
    conversions: list[str] = field(default_factory=list)
    row_rejects: dict[int, str] = field(default_factory=dict)  # row index -> reason (first one wins)
    refusal: str | None = None


def conform(t: pa.Table, table: Table) -> Conformed:
    """`t` in `table`'s landing schema, rows that cannot be stored set aside by index."""
    out = Conformed()
    schema = table.arrow_schema(with_partitions=False)
    extra = [n for n in t.column_names if n not in schema.names]
    for name in [n for n in extra if _PANDAS_INDEX.match(n)]:
        out.conversions.append(f"column {name!r} (a pandas index, not a measurement) dropped")
    extra = [n for n in extra if not _PANDAS_INDEX.match(n)]
    problems = [f"unexpected columns {extra}"] if extra else []
    cols = []
    for f in schema:
        if f.name not in t.column_names:
            if not f.nullable:
                problems.append(f"missing column {f.name!r}")
            cols.append(pa.nulls(t.num_rows, f.type))
            continue
        try:
            col, note = _convert(t.column(f.name).combine_chunks(), f, out.row_rejects)
        except Lossy as e:
            problems.append(f"column {f.name!r}: {e}")
            continue
        if note:
            out.conversions.append(f"column {f.name!r}: {note}")
        cols.append(col)
    if problems:
        out.refusal = "schema drift: " + "; ".join(problems)
        return out
    out.table = pa.Table.from_arrays(cols, schema=schema.with_metadata(None)).replace_schema_metadata(
        schema.metadata)
    # Non-nullable fields that hold nulls: the row cannot be stored (mining would reject it too).
    for f in schema:
        if not f.nullable:
            for i in pc.indices_nonzero(out.table.column(f.name).is_null()).to_pylist():
                out.row_rejects.setdefault(i, f"row {i}: field {f.name} is null")
    return out


def _convert(a: pa.Array, f: pa.Field, rejects: dict[int, str]) -> tuple[pa.Array, str | None]:
    """(the column as f.type, a note when converted); Lossy when it cannot be."""
    got, want = a.type, f.type
    if got.equals(want):
        return a, None
    if pa.types.is_dictionary(got):
        a = a.dictionary_decode()
        col, note = _convert(a, f, rejects)
        return col, f"dictionary-encoded {got.value_type}, decoded" + (f"; {note}" if note else "")
    if pa.types.is_null(got):
        return pa.nulls(len(a), want), f"all-null column typed null, read as {want}"
    if pa.types.is_integer(want):
        return _to_int(a, f, rejects)
    if pa.types.is_floating(want):
        if pa.types.is_floating(got):
            return a.cast(want), f"{got} widened to {want}"
        if pa.types.is_integer(got):
            big = [v for v in a.to_pylist() if v is not None and abs(v) > 2**53]
            if big:
                raise Lossy(f"integer {big[0]} has no exact {want} value")
            return a.cast(want), f"{got} read as {want} (exact)"
    if pa.types.is_string(want) and (pa.types.is_large_string(got) or pa.types.is_string_view(got)):
        return a.cast(want), f"{got} read as {want}"
    if pa.types.is_boolean(want) and pa.types.is_integer(got):
        values = set(a.drop_null().to_pylist())
        if values <= {0, 1}:
            return pc.not_equal(a, 0), f"{got} 0/1 read as bool"
        raise Lossy(f"{got} values {sorted(values - {0, 1})[:3]} are not 0/1 booleans")
    if pa.types.is_timestamp(want) and pa.types.is_timestamp(got):
        return _to_timestamp(a, want)
    if pa.types.is_map(want):
        return _to_map(a, want)
    raise Lossy(f"has type {got}, expected {want}, and no lossless conversion exists")


def _to_int(a: pa.Array, f: pa.Field, rejects: dict[int, str]) -> tuple[pa.Array, str | None]:
    got, want = a.type, f.type
    values = a.to_pylist()
    note = None
    if pa.types.is_integer(got):
        note = f"{got} read as {want}"
    elif pa.types.is_floating(got):
        fractional = [(i, v) for i, v in enumerate(values) if v is not None and math.isfinite(v) and v != int(v)]
        if fractional and f.name not in ROUNDED:
            i, v = fractional[0]
            raise Lossy(f"row {i}: {v} is not a whole number (type {got}, expected {want})")
        note = f"{got} read as {want}" + (f" ({len(fractional)} values rounded to whole ns)" if fractional else "")
        for i, v in enumerate(values):
            if v is not None and not math.isfinite(v):
                rejects.setdefault(i, f"row {i}: {f.name} is {v} (field {f.name}): not finite")
                values[i] = None
            elif v is not None:
                values[i] = int(round(v))
    elif pa.types.is_string(got) or pa.types.is_large_string(got):
        bad = [(i, v) for i, v in enumerate(values) if v is not None and not _INT.match(v)]
        if bad:
            i, v = bad[0]
            raise Lossy(f"row {i}: string {v!r} is not an integer (type {got}, expected {want})")
        values = [None if v is None else int(v) for v in values]
        note = f"integer strings read as {want}"
    else:
        raise Lossy(f"has type {got}, expected {want}, and no lossless conversion exists")
    limit = _RANGES[want]
    for i, v in enumerate(values):
        if v is not None and not -limit <= v < limit:
            rejects.setdefault(i, f"row {i}: {f.name} {v} overflows {want} (field {f.name})")
            values[i] = None
    return pa.array(values, want), note


def _to_timestamp(a: pa.Array, want: pa.DataType) -> tuple[pa.Array, str | None]:
    got = a.type
    notes = []
    if got.tz is None:
        notes.append("no time zone, read as UTC")
    elif got.tz not in ("UTC", "+00:00", "Z", "Etc/UTC"):
        notes.append(f"zone {got.tz} converted to UTC (same instants)")
    scale = {"s": 10**6, "ms": 10**3, "us": 1, "ns": 10**-3}[got.unit]
    if scale < 1:
        ints = a.cast(pa.int64()).to_pylist()
        sub = [(i, v) for i, v in enumerate(ints) if v is not None and v % 1000]
        if sub:
            i, v = sub[0]
            raise Lossy(f"row {i}: {v} ns has a sub-microsecond part that timestamp[us] would drop")
    if got.unit != "us":
        notes.append(f"unit {got.unit} read as us")
    return a.cast(pa.timestamp(got.unit, tz="UTC")).cast(want), "; ".join(notes) or None


def _to_map(a: pa.Array, want: pa.MapType) -> tuple[pa.Array, str | None]:
    """A map written as a list of (key, value) pairs (pandas writes list<list<string>>)."""
    got = a.type
    if pa.types.is_map(got):
        return a.cast(want), f"{got} read as {want}"
    if not pa.types.is_list(got) and not pa.types.is_large_list(got):
        raise Lossy(f"has type {got}, expected {want}, and no lossless conversion exists")
    rows = []
    for i, pairs in enumerate(a.to_pylist()):
        if pairs is None:
            rows.append(None)
            continue
        entries = []
        for p in pairs:
            k, v = (p.get("key", p.get("keys")), p.get("value", p.get("values"))) if isinstance(p, dict) else (
                tuple(p) if isinstance(p, (list, tuple)) and len(p) == 2 else (None, None))
            if not isinstance(k, str) or not (v is None or isinstance(v, str)):
                raise Lossy(f"row {i}: {p!r} is not a (string key, string value) pair")
            entries.append((k, v))
        keys = [k for k, _ in entries]
        if len(set(keys)) != len(keys):
            raise Lossy(f"row {i}: key {next(k for k in keys if keys.count(k) > 1)!r} appears twice; "
                        "a map keeps one value per key")
        rows.append(entries)
    return pa.array(rows, want), f"list of key/value pairs ({got}) read as {want}"
