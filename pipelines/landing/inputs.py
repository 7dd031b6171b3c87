"""What one ingest call reads: the files found under its paths, each recognised by its
bytes (Parquet, JSON, nvbench sample times), and the shard each file belongs to.
pipelines/landing/ingest.py decides what becomes of them."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipelines.landing.report import IngestReport, Issue

# The harness's file names and the landing table each holds.
FILENAME_KINDS = {"samples.parquet": "samples", "case_results.parquet": "case_results",
                  "run.parquet": "runs", "runs.parquet": "runs"}


@dataclass
class Shard:
    """One shard on its way in: its member files, their rows, and what was set aside."""
    source: str
    members: list[Path]
    tables: dict[str, pa.Table] = field(default_factory=dict)
    kind_files: dict[str, Path] = field(default_factory=dict)
    rejects: list[tuple[str, str, dict]] = field(default_factory=list)  # (source, reason, record)
    notices: list[str] = field(default_factory=list)
    refused_files: dict[Path, str] = field(default_factory=dict)        # member -> why it was refused
    refusal: str | None = None                                           # why nothing of it lands
    present: Counter = field(default_factory=Counter)                    # sample rows per case_id in the file
    skip: dict[str, set[int]] = field(default_factory=dict)              # kind -> rows set aside on reading
    nvbench: bool = False
    run: dict | None = None
    dt: str | None = None
    pool: str | None = None
    override: str | None = None                                          # the --force-pool it landed under


def discover(paths, report: IngestReport) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file()
                           and not any(part.startswith(".") for part in f.relative_to(p).parts))
            if not found:
                report.issues.append(Issue(str(p), "nothing to ingest: the folder holds no files"))
            out += found
        elif p.is_file():
            out.append(p)
        else:
            report.issues.append(Issue(str(p), "no such file or directory"))
    return list(dict.fromkeys(out))  # a file named twice is judged once


def sniff(path: Path) -> tuple[str | None, str | None]:
    """('parquet' | 'json' | 'bin', None) from the file's bytes, or (None, why it cannot
    be ingested at all)."""
    size = path.stat().st_size
    if size == 0:
        return None, "empty file (0 bytes): the upload was interrupted or the writer crashed; upload it again"
    if path.suffix == ".bin":
        return "bin", None
    with open(path, "rb") as f:
        head = f.read(64)
        f.seek(max(0, size - 4))
        tail = f.read(4)
    if head[:4] == b"PAR1":
        if tail != b"PAR1" or size < 12:
            return None, "truncated Parquet file (no footer): upload the complete file again"
        return "parquet", None
    if head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"["):
        return "json", None
    return None, (f"not a Parquet or JSON file (starts with {head[:8]!r}); "
                  "ingest takes harness Parquet files or nvbench --json output")

