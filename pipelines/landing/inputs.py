"""What one ingest call reads: the files found under its paths, each recognised by its
bytes (Parquet, JSON, nvbench sample times), and the shard each file belongs to.
pipelines/landing/ingest.py decides what becomes of them."""
from __future__ import annotations

import json
import os
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
    landing_rows: dict[str, set[int]] = field(default_factory=dict)      # kind -> rows that land (or repeat one exactly)
    sample_owners: list[int] | None = None                               # nvbench: each sample's case_results row
    nvbench: bool = False
    run: dict | None = None
    dt: str | None = None
    pool: str | None = None
    override: str | None = None                                          # the --force-pool it landed under
    read_sha256: dict[Path, str] = field(default_factory=dict)           # member -> sha256 of the bytes read


def discover(paths, report: IngestReport) -> list[Path]:
    """Every file under `paths`, each once however it is reached (a folder named twice, a
    link to it); a folder that cannot be read is an issue, never silently left out."""
    out: dict[Path, Path] = {}  # resolved path -> the path as found
    for p in map(Path, paths):
        if p.is_dir():
            hidden: list[Path] = []
            found = sorted(_walk(p, report, hidden))
            seen = ", ".join(str(h) for h in hidden[:3]) + (f" and {len(hidden) - 3} more" if len(hidden) > 3 else "")
            if not found:
                report.issues.append(Issue(str(p), "nothing to ingest: the folder holds no files" + (
                    f" but hidden ones, left out ({seen}); name one to ingest it" if hidden else "")))
            elif hidden:
                report.notices.append(f"{p}: left out {len(hidden)} hidden entr{'ies' if len(hidden) > 1 else 'y'} "
                                      f"(names starting with '.': {seen}); name one to ingest it")
            for f in found:
                out.setdefault(f.resolve(), f)
        elif p.is_file():
            out.setdefault(p.resolve(), p)
        elif p.exists():
            report.issues.append(Issue(str(p), "not a file or folder (a pipe, socket or device): nothing to read"))
        else:
            report.issues.append(Issue(str(p), "no such file or directory"))
    return list(out.values())


def _walk(top: Path, report: IngestReport, hidden: list[Path]):
    """The files under `top`, hidden names skipped (listed in `hidden`, but for the lock
    and temporary files of perflake's own writers), following links to folders (each real
    folder once, so a link loop ends); a link to nothing is yielded, for sniff to refuse."""
    seen: set[str] = set()

    def own(name: str) -> bool:  # a landing lock, or a writer's temporary file (pipelines/landing/files.py)
        return name.endswith(".lock") or ".tmp-" in name

    def unreadable(err: OSError) -> None:
        report.issues.append(Issue(str(err.filename or top), f"cannot read this folder ({err.strerror}); "
                                                              "nothing in it was ingested"))

    for root, dirs, files in os.walk(top, onerror=unreadable, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        hidden += [Path(root) / n for n in sorted(dirs + files) if n.startswith(".") and not own(n)]
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            f = Path(root) / name
            if not name.startswith(".") and (f.is_file() or (f.is_symlink() and not f.exists())):
                yield f  # a broken link too: sniff names it, never left out silently
            elif not name.startswith("."):
                report.issues.append(Issue(str(f), "not a file (a pipe, socket or device): not read"))


def sniff(path: Path) -> tuple[str | None, str | None]:
    """('parquet' | 'json' | 'bin', None) from the file's bytes, or (None, why it cannot
    be ingested at all)."""
    if path.is_symlink() and not path.exists():
        return None, (f"a link to {os.readlink(path)}, which does not exist (storage not mounted, or the file "
                      "moved); nothing could be read from it")
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
    if json_text(head, errors="replace").lstrip()[:1] in ("{", "["):  # 64 bytes may end mid-character
        return "json", None
    return None, (f"not a Parquet or JSON file (starts with {head[:8]!r}); "
                  "ingest takes harness Parquet files or nvbench --json output")


def json_text(data: bytes, errors: str = "strict") -> str:
    """JSON's bytes as text: UTF-8 (with or without a byte order mark), or UTF-16 where a
    byte order mark says so (what Windows PowerShell's `>` writes)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors=errors)
    return data.decode("utf-8-sig", errors=errors)


def is_conflict_note(path: Path) -> bool:
    """`path` is the conflict.json that ingest writes beside a kept copy (a conflict), so
    that ingesting the kept folder (docs/ingest.md) lands its Parquet files and nothing else."""
    try:
        note = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(note, dict) and {"run_id", "shard", "attempt", "landed", "kept", "reason"} <= note.keys()
