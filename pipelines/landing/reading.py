"""`perflake ingest`, reading: the input files become shards (pipelines/landing/ingest.py
decides what becomes of them). The Parquet files of one folder form one shard, whatever
their names; a file named as a shard member is one, whatever its bytes, so a broken
member keeps its whole shard out. An nvbench JSON becomes one shard per device, with the
sample times files it names.

`call` is the ingest call (ingest._Call): its report, its options and the outcome of
each file."""
from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.landing import nvbench, relations
from pipelines.landing.conform import conform
from pipelines.landing.inputs import FILENAME_KINDS, Shard, is_conflict_note, sniff
from pipelines.landing.records import one_line, quarantine_records
from pipelines.landing.report import Issue
from schemas.tables import CASE_RESULTS, RUNS, SAMPLES

KIND_TABLES = {"samples": SAMPLES, "case_results": CASE_RESULTS, "runs": RUNS}


def read(call, files: list[Path]) -> list[Shard]:
    by_dir: dict[Path, list[tuple[Path, str | None]]] = {}
    jsons, bins, broken = [], [], []
    for path in files:
        fmt, problem = call.guard(None, str(path), sniff, path) or (None, None)
        if path in call.outcomes:
            continue  # the sniff itself failed (unreadable file)
        if path.name in FILENAME_KINDS and fmt not in (None, "parquet"):
            # named as a shard member, so it is one, whatever its bytes: its folder's shard is incomplete
            by_dir.setdefault(path.parent, []).append((path, f"holds {fmt.upper()}, not Parquet"))
        elif problem and path.name not in FILENAME_KINDS:
            broken.append((path, problem))
        elif fmt == "json":
            jsons.append(path)
        elif fmt == "bin":
            bins.append(path)
        else:  # a Parquet file, or a broken one named as a shard member
            by_dir.setdefault(path.parent, []).append((path, problem))
    for path, problem in broken:
        if path.suffix.lower() == ".parquet" and path.parent in by_dir:
            by_dir[path.parent].append((path, problem))  # a broken Parquet file of a shard's folder: part of it
        else:
            call.refuse_file(path, problem)
    shards = []
    for directory, members in sorted(by_dir.items()):
        shard = Shard(source=str(directory), members=[])
        call.guard(shard, str(directory), read_parquet_shard, call, shard, members)
        if shard.members:
            shards.append(shard)
    named: set[Path] = set()
    for path in jsons:
        if path.name == "conflict.json" and is_conflict_note(path):
            call.report.notices.append(f"{path}: the note ingest wrote beside a kept conflict; not data, "
                                       "not ingested")
            continue
        got = call.guard(None, str(path), read_nvbench, call, path)
        for shard in got or []:
            named.update(p.resolve() for p in shard.members)
            shards.append(shard)
    for path in bins:
        if path.resolve() not in named:
            call.refuse_file(path, "nvbench sample times file that no nvbench JSON of this call names; "
                                   "ingest the JSON that refers to it")
    return shards

def read_parquet_shard(call, shard: Shard, members: list[tuple[Path, str | None]]) -> None:
    # The harness's own file names first: a second file of a kind is then the other one.
    for path, problem in sorted(members, key=lambda m: m[0].name not in FILENAME_KINDS):
        kind = FILENAME_KINDS.get(path.name)
        if kind is None and problem is None:
            kind, problem = relations.guess_kind(path)
        if problem and kind is None:  # unreadable, so its table is unknown; its folder's shard is incomplete
            shard.members.append(path)
            shard.refused_files[path] = problem
            continue
        if kind is None:
            call.refuse_file(path, "cannot tell which table this file holds: its name is not one of "
                                   f"{sorted(FILENAME_KINDS)} and its columns match none of the landing schemas")
            continue
        shard.members.append(path)
        if problem:
            shard.refused_files[path] = f"{kind}: {problem}"
            continue
        if kind in shard.kind_files:
            shard.refused_files[path] = (f"a second {kind} file in {path.parent} (the first: "
                                         f"{shard.kind_files[kind].name}); one shard per folder")
            continue
        shard.kind_files[kind] = path
        why = read_member(shard, path, kind)
        if why:
            shard.refused_files[path] = f"{kind}: {why}"
    if shard.refused_files:
        first = next(iter(shard.refused_files.items()))
        shard.refusal = (f"incomplete shard: {first[0].name} was refused ({first[1]}); nothing of this "
                         "shard lands until every file of it reads whole")

def read_member(shard: Shard, path: Path, kind: str) -> str | None:
    try:
        # Read once, by Python (Arrow refuses a path that is not UTF-8), and hashed as
        # read: the manifest names the bytes that landed, even if the file is
        # rewritten while it is being ingested.
        data = path.read_bytes()
        shard.read_sha256[path] = hashlib.sha256(data).hexdigest()
        raw = pq.read_table(pa.BufferReader(data))
    except Exception as e:  # noqa: BLE001 - corrupt pages raise several Arrow and OS errors
        return f"not a readable Parquet file: {one_line(e)}"
    try:
        c = conform(raw, KIND_TABLES[kind])
    except Exception as e:  # noqa: BLE001 - a type Arrow cannot cast: this file's refusal, not its folder's
        return f"cannot be converted to the landing schema: {one_line(e)}"
    if c.refusal:
        return c.refusal
    shard.notices += [f"{path}: {note} (lossless)" for note in c.conversions]
    t = c.table
    if kind == "samples":
        shard.present = Counter(v for v in t.column("case_id").to_pylist() if v is not None)
    if c.row_rejects:
        if kind == "runs":
            return f"row 0 cannot be stored: {next(iter(c.row_rejects.values()))}"
        src = f"{path} [{kind}]"
        records = quarantine_records(raw)
        for i, why in sorted(c.row_rejects.items()):
            shard.rejects.append((src, why, records[i]))
        shard.skip[kind] = set(c.row_rejects)  # filtered later, so that row numbers stay the file's
    shard.tables[kind] = t
    return None

def read_nvbench(call, path: Path) -> list[Shard]:
    src = str(path)
    parsed = nvbench.parse(path, call.now)
    if parsed.refusal:
        call.refuse_file(path, parsed.refusal)
        return []
    members = [path, *dict.fromkeys(parsed.sample_files)]
    shards = []
    for d in parsed.devices:
        s = Shard(source=src if len(parsed.devices) == 1 else f"{src} [device {d.device}]", members=members,
                   tables=d.tables, nvbench=True, sample_owners=d.owners,
                   rejects=[(src + " [samples]", why, rec) for why, rec in d.rejects])
        s.notices += [f"{src}: {w}" for w in parsed.warnings]
        s.kind_files = {"case_results": path, "runs": path, "samples": path}
        shards.append(s)
    call.report.issues += [Issue(src, w) for w in parsed.warnings]
    return shards
