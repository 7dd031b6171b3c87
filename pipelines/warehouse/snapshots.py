"""Tables as immutable snapshots behind a pointer, so that a publish never changes or
removes a file that a reader may be reading, and a writer killed at any moment leaves the
previous version whole.

An unpartitioned table is one such directory:

    warehouse/<table>/
        _CURRENT                              names the live snapshot (one line)
        _snapshot-20261123T090000123456Z-host-4242/  Parquet files written by one publish
        _snapshot-...                         older snapshots, kept a while for readers

A partitioned table holds one per partition, in Hive's directory layout:

    warehouse/<table>/dt=2026-11-23/pool=h100/
        _CURRENT, _snapshot-.../              as above, for this partition alone

A publish writes a new snapshot directory, then replaces `_CURRENT` (a rename, atomic on
POSIX), then points the Spark table (or partition) at the snapshot (ALTER TABLE ... SET
LOCATION, one metastore update). Until the rename nothing a reader sees has changed; a
killed writer's half-written directory is never named by `_CURRENT` and a later publish
removes it. DuckDB (pipelines/warehouse/duck.py) reads the snapshots `_CURRENT` names
(`live_files`); Spark reads the locations in the metastore. If a writer dies between the
two swaps, both still read a complete version, and the next publish re-points Spark.

Why partitions too: Spark's own dynamic partition overwrite deletes a partition's files
and renames the new ones into place, so a query that listed the old files a moment
before reads files that are gone (FILE_NOT_EXIST on a JDBC session during a re-mine).
Superseded snapshots stay KEEP_PREVIOUS publishes long, far longer than a listing lives.
A partition written before partitions had snapshots holds its Parquet files loose; they
stay its live version until the first snapshot, then count as the oldest version.

Names start with `_` because Spark and Hadoop skip such files and directories when they
list a table, and because a `=` in a directory name would read as a Hive partition.
"""
from __future__ import annotations

import datetime
import os
import shutil
import socket
import time
from pathlib import Path

POINTER = "_CURRENT"
PREFIX = "_snapshot-"
KEEP_PREVIOUS = 2            # superseded snapshots kept for readers still scanning them
ABANDONED_AFTER_S = 3600     # an unfinished snapshot this old was left by a dead writer
_DONE = "_SUCCESS"           # Spark's job-commit marker: the snapshot is complete


def new_snapshot(table_dir: Path) -> Path:
    """A fresh, not yet existing snapshot directory. Names sort by creation time and end
    with the writer's host and process id."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return table_dir / f"{PREFIX}{stamp}-{_HOST}-{os.getpid()}"


_HOST = "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"


def _writer_gone(snapshot: Path) -> bool:
    """Whether the process that wrote `snapshot` is known to have died: it ran on this
    host and no process has its id now."""
    *_, host, pid = snapshot.name.rsplit("-", 2)
    if host != _HOST or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def current(table_dir: Path) -> Path | None:
    """The live snapshot, or None when the table has never been published this way."""
    try:
        name = (table_dir / POINTER).read_text().strip()
    except FileNotFoundError:
        return None
    if not name.startswith(PREFIX) or "/" in name or not (table_dir / name).is_dir():
        raise RuntimeError(f"{table_dir / POINTER} names {name!r}, which is not a snapshot directory "
                           f"of {table_dir}; restore it to the newest complete {PREFIX}* directory")
    return table_dir / name


def live_dir(table_dir: Path) -> Path:
    """Where readers find the table's (or partition's) files: the live snapshot, else the
    directory itself."""
    return current(table_dir) or table_dir


def live_files(directory: Path) -> list[Path]:
    """The Parquet files of the live version of a table: the live snapshot of a directory
    that has a pointer, else its own loose files and, recursively, those of its partition
    directories (hidden `.` and metadata `_` entries skipped, as Spark does)."""
    if not directory.is_dir():
        return []
    if (directory / POINTER).exists():
        return visible_files(live_dir(directory))
    entries = sorted(directory.iterdir())
    found = [f for f in entries if f.is_file() and _data_file(f.name)]
    for d in entries:
        if d.is_dir() and not d.name.startswith(("_", ".")):
            found += live_files(d)
    return found


def _data_file(name: str) -> bool:
    return name.endswith(".parquet") and not name.startswith(("_", "."))


def partition_dirs(directory: Path, depth: int) -> list[Path]:
    """The partition directories `depth` levels of `key=value` below `directory`."""
    level = [directory]
    for _ in range(depth):
        level = [d for parent in level for d in sorted(parent.iterdir())
                 if d.is_dir() and "=" in d.name and not d.name.startswith(("_", "."))]
    return level


def mark_complete(snapshot: Path) -> None:
    """Mark a snapshot assembled outside Spark's job commit as complete (see `switch`)."""
    (snapshot / _DONE).touch()


def switch(table_dir: Path, snapshot: Path) -> None:
    """Make `snapshot` (complete, inside `table_dir`) the live one, atomically."""
    if snapshot.parent != table_dir or not (snapshot / _DONE).exists():
        raise RuntimeError(f"refusing to publish {snapshot}: not a complete snapshot of {table_dir}")
    tmp = table_dir / f".{POINTER}.tmp-{os.getpid()}"
    tmp.write_text(snapshot.name + "\n")
    os.replace(tmp, table_dir / POINTER)


def remove_stale(table_dir: Path, *, now: float | None = None) -> list[Path]:
    """Delete snapshots that no reader should need any more: complete ones older than the
    live one beyond the newest KEEP_PREVIOUS (and loose Parquet files from before the first
    snapshot, which count as older than all), and unfinished ones whose writer died on this
    host or that nobody touched for ABANDONED_AFTER_S. Snapshots newer than the live one
    may be a concurrent writer's and are left alone. Returns what was removed."""
    live = current(table_dir)
    if live is None:
        return []
    now = time.time() if now is None else now
    older = sorted((d for d in table_dir.iterdir() if d.is_dir() and d.name.startswith(PREFIX)
                    and d.name < live.name), reverse=True)
    complete = [d for d in older if (d / _DONE).exists()]
    stale = complete[KEEP_PREVIOUS:]
    stale += [d for d in older if d not in complete
              and (_writer_gone(d) or now - d.stat().st_mtime > ABANDONED_AFTER_S)]
    if len(complete) >= KEEP_PREVIOUS:
        stale += [f for f in table_dir.iterdir() if f.is_file() and _data_file(f.name)]
    for d in stale:
        if d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
        else:
            d.unlink(missing_ok=True)
    return stale


STAGING = "_staging-"


def new_staging(table_dir: Path) -> Path:
    """A fresh directory in which a partitioned publish writes its partitions before each
    becomes a partition's snapshot; named like a snapshot (time, host, process id)."""
    return table_dir / new_snapshot(table_dir).name.replace(PREFIX, STAGING, 1)


def remove_abandoned_staging(table_dir: Path, *, now: float | None = None) -> list[Path]:
    """Delete staging directories left by writers that died (on this host) or that nobody
    touched for ABANDONED_AFTER_S."""
    now = time.time() if now is None else now
    gone = [d for d in table_dir.glob(f"{STAGING}*")
            if d.is_dir() and (_writer_gone(d) or now - d.stat().st_mtime > ABANDONED_AFTER_S)]
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
    return gone


def visible_files(directory: Path) -> list[Path]:
    """The Parquet files a Spark reader of `directory` would read: hidden (`.`) and
    metadata (`_`) files and directories are skipped at every level, which leaves out
    Spark's `_temporary` and `.spark-staging-*` work directories and older snapshots."""
    found: list[Path] = []
    if not directory.is_dir():
        return found
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        found += [Path(root, f) for f in sorted(files) if f.endswith(".parquet") and not f.startswith(("_", "."))]
    return found
