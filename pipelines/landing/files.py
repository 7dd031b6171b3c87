"""Landing: write-once files in Hive partitions, published by atomic rename.

A reader sees either no file or a complete one: each file is written under a temporary
name beside its final path (a dot name, which readers skip), fsynced, then renamed over
it. A retried shard's rename replaces its earlier file, so its rows are never counted
twice; it never replaces a later attempt, nor its own attempt with fewer rows (land_shard). A shard's files land samples first and its run row last, under a per-shard lock,
so that two writers of one shard take turns and the shard ends as one writer's set
(pipelines.mining.commit publishes a shard only once its run row has landed).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pyarrow.parquet as pq

from pipelines.config.lake import Lake

KINDS = {"samples": "samples.parquet", "case_results": "case_results.parquet", "runs": "run.parquet"}
LAND_ORDER = ("samples", "case_results", "runs")  # the run row last: it commits the shard


def atomic_write(dst: Path, write: Callable[[Path], None]) -> None:
    """Publish `dst` whole: `write(tmp)` fills a temporary file beside it, which is
    fsynced and renamed over `dst`. A writer killed before the rename leaves only its
    hidden temporary file (removed by the next writer of the shard, see shard_lock)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".{dst.name}.tmp-{os.getpid()}"
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dirfd = os.open(dst.parent, os.O_RDONLY)
    try:
        os.fsync(dirfd)  # the rename itself survives a power cut
    finally:
        os.close(dirfd)


def atomic_copy(src: Path, dst: Path) -> None:
    atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


@contextlib.contextmanager
def shard_lock(lake: Lake, *, dt: str, pool: str, run_id: str, shard: int) -> Iterator[None]:
    """Hold the shard's landing lock (an exclusive flock on a hidden file beside its run
    file; the kernel releases it if the holder dies). Inside, the temporary files that
    killed writers of this shard left behind are removed: no live writer owns them."""
    run_file = lake.landing_file("runs", dt, pool, run_id, shard)
    run_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_file.with_name(f".{run_file.stem}.lock"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for kind in KINDS:
            dst = lake.landing_file(kind, dt, pool, run_id, shard)
            for stale in dst.parent.glob(f".{dst.name}.tmp-*"):
                stale.unlink(missing_ok=True)
        yield
    finally:
        os.close(fd)  # releases the lock


class LandingRefused(RuntimeError):
    """A landing that would replace landed rows with fewer or older ones, or publish an
    unreadable file; nothing was written."""


def land_shard(staging: Path, lake: Lake, *, dt: str, pool: str, run_id: str, shard: int) -> dict:
    """Publish a harness output directory into the landing zone; returns row counts.
    Samples land first and the run row last, so a run row implies its data.

    A retry replaces its own shard's files, but never with less: every staged file must
    read whole, and under the shard's lock the staged attempt is compared with what has
    landed there. An older attempt, or the same attempt with fewer case results or
    samples, raises LandingRefused and leaves the landed files as they were."""
    sources = {kind: Path(staging) / KINDS[kind] for kind in LAND_ORDER}
    for kind, src in sources.items():  # all there before anything lands
        if not src.exists():
            raise FileNotFoundError(f"{src}: the harness wrote no {kind} file")
    counts = {kind: _rows_readable(src) for kind, src in sources.items()}
    attempt = _attempt(sources["runs"], whole=True)
    with shard_lock(lake, dt=dt, pool=pool, run_id=run_id, shard=shard):
        landed = landed_shard_state(lake, dt=dt, pool=pool, run_id=run_id, shard=shard)
        why = _less(landed, attempt, counts)
        if why:
            where = lake.landing_file("runs", dt, pool, run_id, shard).parent
            raise LandingRefused(f"shard {shard} of run {run_id}: staged {staging} (attempt {attempt}, "
                                 f"{counts}) {why} than the copy landed in {where} (attempt {landed['attempt']}, "
                                 f"{landed['counts']}); the landed copy is kept")
        for kind, src in sources.items():
            atomic_copy(src, lake.landing_file(kind, dt, pool, run_id, shard))
    return counts


def landed_shard_state(lake: Lake, *, dt: str, pool: str, run_id: str, shard: int) -> dict:
    """{"attempt": the landed attempt or None, "counts": {kind: rows}} of one landing
    location (a killed writer may have left only some of its files)."""
    files = {kind: lake.landing_file(kind, dt, pool, run_id, shard) for kind in LAND_ORDER}
    files = {kind: f for kind, f in files.items() if f.exists()}
    attempts = [a for kind in ("runs", "case_results", "samples") if kind in files
                and (a := _attempt(files[kind])) is not None]
    return {"attempt": attempts[0] if attempts else None,
            "counts": {kind: pq.ParquetFile(f).metadata.num_rows for kind, f in files.items()}}


def _less(landed: dict, attempt: int, counts: dict) -> str | None:
    if landed["attempt"] is None:
        return None
    if attempt < landed["attempt"]:
        return "is an older attempt"
    if attempt == landed["attempt"]:
        fewer = [k for k, n in landed["counts"].items() if counts[k] < n]
        if fewer:
            return f"holds fewer {' and '.join(fewer)} rows"
    return None


def _rows_readable(path: Path) -> int:
    """Rows of a Parquet file that reads whole; LandingRefused naming it otherwise."""
    try:
        f = pq.ParquetFile(path)
        for _ in f.iter_batches(batch_size=1 << 16):
            pass
        return f.metadata.num_rows
    except Exception as e:  # a corrupt page surfaces as one of several Arrow/OS errors
        raise LandingRefused(f"{path}: not a readable Parquet file ({e}); nothing of the shard landed") from e


def _attempt(path: Path, *, whole: bool = False) -> int | None:
    t = pq.read_table(path, columns=["attempt"]).column("attempt")
    if whole and (len(t) != 1 or t[0].as_py() is None):
        raise LandingRefused(f"{path}: a run file holds exactly one row with its attempt; it holds {len(t)}")
    return max((a for a in t.to_pylist() if a is not None), default=None)
