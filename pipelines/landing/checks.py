"""File-level checks before Spark reads a batch: a file that is not Parquet, is
truncated, or whose schema drifted is set aside with a reason, and the rest go on."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.definition import Table


def check_file(path: Path, table: Table, *, floats_ok: tuple[str, ...] = ()) -> str | None:
    """None when `path` is a readable Parquet file in `table`'s landing schema,
    otherwise the reason it is not. Integer columns named in `floats_ok` may also be
    floating point (for a caller that converts them)."""
    try:
        schema = pq.ParquetFile(path).schema_arrow
    except (pa.ArrowInvalid, OSError) as e:
        return f"not a readable Parquet file: {e}"
    expected = table.arrow_schema(with_partitions=False)
    problems = []
    for field in expected:
        if field.name not in schema.names:
            if not field.nullable:
                problems.append(f"missing column {field.name!r}")
        elif not schema.field(field.name).type.equals(field.type):
            got = schema.field(field.name).type
            convertible = pa.types.is_floating(got) and field.name in floats_ok
            if not (pa.types.is_integer(got) and pa.types.is_integer(field.type)) and not convertible:
                problems.append(f"column {field.name!r} has type {got}, expected {field.type}")
    extra = sorted(set(schema.names) - set(expected.names))
    if extra:
        problems.append(f"unexpected columns {extra}")
    return "schema drift: " + "; ".join(problems) if problems else None


def split_files(paths: list[Path], table: Table) -> tuple[list[Path], list[tuple[Path, str]]]:
    good, bad = [], []
    for p in paths:
        reason = check_file(p, table)
        (bad.append((p, reason)) if reason else good.append(p))
    return good, bad
