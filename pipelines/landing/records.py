"""What ingest writes beside the landing files: the manifest of landed files (by
sha256), the quarantine file of refused records, and the lock under which one ingest at a
time decides where a shard lands."""
from __future__ import annotations

import contextlib
import datetime as dt_
import fcntl
import hashlib
import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.config.lake import Lake, safe_date
from pipelines.config.processes import alive
from pipelines.landing.files import atomic_write
from pipelines.landing.report import IngestReport, Issue
from schemas.tables import QUARANTINE


@contextlib.contextmanager
def identity_lock(lake: Lake, run_id: str, shard: int):
    """One ingest at a time decides where a shard lands (its copies may be under any date)."""
    path = lake.landing / "_ingested" / "locks" / f"{run_id}.shard-{int(shard)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_atomic(table: pa.Table, dst: Path) -> None:
    atomic_write(dst, lambda tmp: pq.write_table(table, tmp))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_landed(lake: Lake, path: Path, dt: str, pool: str, run_id: str, shard: int, now: dt_.datetime,
                  override: str | None, sha: str | None = None) -> None:
    """The manifest: each landed file by its sha256 (`sha`, of the bytes that were read,
    where the caller has it), where it went, and any override."""
    sha = sha or sha256_file(path)
    entry = {"sha256": sha, "source": str(path), "dt": dt, "pool": pool, "run_id": run_id, "shard": shard,
             "ingested_at": now.isoformat(), **({"override": override} if override else {})}
    atomic_write(lake.landing / "_ingested" / f"{sha}.json", lambda tmp: tmp.write_text(json.dumps(entry, indent=1)))


def _set_aside_file(lake: Lake, run_id: str, shard: int) -> Path:
    return lake.landing / "_ingested" / "set_aside" / f"{run_id}.shard-{int(shard)}.json"


def record_set_aside(lake: Lake, run_id: str, shard: int, attempt: int, rows: int) -> None:
    """Remember that the landed copy of a shard had `rows` set aside (forgotten when a
    copy lands whole): an earlier attempt that arrives whole later is then a conflict,
    not a copy the partial one silently supersedes."""
    path = _set_aside_file(lake, run_id, shard)
    if rows:
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps({"attempt": attempt, "rows": rows})))
    else:
        path.unlink(missing_ok=True)


def set_aside_when_landed(lake: Lake, run_id: str, shard: int, attempt: int) -> int:
    """How many rows were set aside when `attempt` of the shard landed (0: it landed whole)."""
    try:
        note = json.loads(_set_aside_file(lake, run_id, shard).read_text())
    except (OSError, ValueError):
        return 0
    return int(note.get("rows", 0)) if note.get("attempt") == attempt else 0


def manifest_has(lake: Lake, sha: str) -> bool:
    return (lake.landing / "_ingested" / f"{sha}.json").is_file()


def remove_dead_temporaries(folder: Path) -> None:
    """The hidden temporary files (`.NAME.tmp-PID`, atomic_write) that writers killed
    before their rename left in `folder` and below: no live process owns them."""
    for tmp in folder.rglob(".*.tmp-*") if folder.is_dir() else []:
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not alive(int(pid)):
            tmp.unlink(missing_ok=True)


def one_line(e: Exception) -> str:
    """An exception as one line: its type and the first line of its message (Arrow's
    messages go on with a schema dump)."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def quarantine_records(table: pa.Table) -> list[dict]:
    """The rows of `table` as records for the quarantine; a value Python cannot hold (a
    timestamp past year 9999) is kept as Arrow's text of it."""
    try:
        return table.to_pylist()
    except (OverflowError, ValueError, pa.ArrowException):
        cols = [c.cast(pa.string()) if pa.types.is_temporal(c.type) else c for c in table.columns]
        return pa.table(cols, names=table.column_names).to_pylist()


def write_quarantine(lake: Lake, report: IngestReport, rejects: list, dt: str, now: dt_.datetime,
                     members: list[Path] | None = None, shard_key: tuple | None = None) -> None:
    """Rejected records as one Parquet file in the quarantine table's landing shape
    (partition columns dt=.../stage=ingest in the path), named by what they came from
    so that re-ingesting the same input replaces it. The rows set aside from a shard
    that landed are named by the shard (`shard_key`: run id, shard, attempt) and the rows
    themselves, not by the files: any copy of it, under any name, writes the same file."""
    if not rejects:
        return
    rows = [{"source": text(src), "reason": text(why),
             "record": json.dumps(_jsonable(rec), default=str, sort_keys=True), "ingested_at": now}
            for src, why, rec in rejects]
    named = ([list(shard_key), sorted((r["reason"], r["record"]) for r in rows)] if shard_key else
             [sorted(map(str, members or [])), [r[:2] for r in rejects]])
    key = hashlib.sha256(json.dumps(named).encode()).hexdigest()
    dst = lake.quarantine / "ingest" / f"dt={safe_date(dt)}" / f"{key}.parquet"
    try:
        write_atomic(pa.Table.from_pylist(rows, schema=QUARANTINE.arrow_schema(with_partitions=False)), dst)
    except OSError as e:  # a full disk, a read-only lake: the report still names every refusal
        report.issues.append(Issue(str(dst), f"the quarantine file could not be written ({one_line(e)}); the "
                                             f"{len(rows)} refusals are named in this report only, and their rows "
                                             "are still in the source files"))
        return
    report.quarantine_files.append(str(dst))


def text(value: str) -> str:
    """`value` as valid UTF-8: a path's bytes that are not (a folder named in Latin-1) read
    as escapes (\\xff) instead of failing the write that records them."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _jsonable(record: dict) -> dict:
    # NaN and infinity are not JSON: kept as their text, so that the record says what arrived.
    return {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
