"""Landing: write-once files in Hive partitions, published by atomic rename.

A reader sees either no file or a complete one: each file is written under a temporary
name beside its final path, fsynced, then renamed over it. A retried shard's rename
replaces its earlier file, so its rows are never counted twice.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq

from pipelines.lake import Lake

KINDS = {"samples": "samples.parquet", "case_results": "case_results.parquet", "runs": "run.parquet"}


def atomic_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.parent / f".{dst.name}.tmp-{os.getpid()}"
    shutil.copyfile(src, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dst)


def land_shard(staging: Path, lake: Lake, *, dt: str, pool: str, run_id: str, shard: int) -> dict:
    """Publish a harness output directory into the landing zone; returns row counts.
    Samples land last-but-one and the run row last, so a run row implies its data."""
    counts = {}
    for kind in ("samples", "case_results", "runs"):
        src = Path(staging) / KINDS[kind]
        if not src.exists():
            raise FileNotFoundError(f"{src}: the harness wrote no {kind} file")
        counts[kind] = pq.ParquetFile(src).metadata.num_rows
        atomic_copy(src, lake.landing_file(kind, dt, pool, run_id, shard))
    return counts
