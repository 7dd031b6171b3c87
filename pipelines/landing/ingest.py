"""`perflake ingest`: land benchmark results produced elsewhere.

Accepted inputs, each PATH a file or a directory of files:
- harness output in the landing schema (`samples.parquet`, `case_results.parquet`,
  `run.parquet` as `python -m kernels_bench run --out DIR` writes them); the files of
  one directory form one shard;
- nvbench `--json` output: one state becomes one case result; per-sample times land as
  samples only where the JSON points at its `nv/cold/sample_times` binary file.

Nothing valid is dropped and nothing is landed twice: a bad file or row is reported
(naming the file, row and field) and set aside as a quarantine Parquet under
`<lake>/quarantine/ingest/dt=.../<sha256>.parquet`, while the rest of the batch lands.
Every landed file's sha256 is recorded under `<lake>/landing/_ingested/`; the same
content uploaded again is reported as a duplicate and skipped.

Ingest is pyarrow only (no Spark): row values (a negative latency) are left to the
mining job's cleaning and data-quality gates; ingest checks files, schemas, names and
how the files of a shard relate to each other.
"""
from __future__ import annotations

import datetime as dt_
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.landing import nvbench
from pipelines.landing.checks import check_file
from pipelines.config.lake import Lake, safe_date, safe_name
from pipelines.landing.files import atomic_write, shard_lock
from schemas.tables import CASE_RESULTS, QUARANTINE, RUNS, SAMPLES, Table

KIND_TABLES = {"samples": SAMPLES, "case_results": CASE_RESULTS, "runs": RUNS}
# Columns that other harnesses write as floats; ingest converts them (see _finite_latencies).
_FLOAT_OK = {"samples": ("latency_ns",)}
_FILENAME_KINDS = {"samples.parquet": "samples", "case_results.parquet": "case_results",
                   "run.parquet": "runs", "runs.parquet": "runs"}
# Clocks of remote workers drift; a run "in the future" by more than this is refused.
CLOCK_SKEW = dt_.timedelta(minutes=10)


@dataclass(frozen=True)
class Issue:
    source: str  # the file
    reason: str  # what was wrong and where; what to do where it is not obvious
    rows: int = 0  # rows set aside (0: the whole file was refused before reading rows)


@dataclass
class IngestReport:
    landed: list[dict] = field(default_factory=list)  # one per shard: ids, dt, pool, row counts
    duplicates: list[str] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    quarantine_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.issues

    def to_dict(self) -> dict:
        return {"landed": self.landed, "duplicates": self.duplicates,
                "issues": [i.__dict__ for i in self.issues], "quarantine_files": self.quarantine_files}


@dataclass
class _File:
    path: Path
    sha: str
    duplicate: bool = False


@dataclass
class _Shard:
    """Rows on their way to one landing shard, plus the rows set aside on the way."""
    source: str
    files: list[_File]
    tables: dict[str, pa.Table] = field(default_factory=dict)
    rejects: list[tuple[str, str, dict]] = field(default_factory=list)  # (source, reason, record)


# --------------------------------------------------------------------------- entry point

def ingest(paths: list[str | Path], lake: Lake, *, pool: str | None = None, date: str | None = None,
           registry: dict | None = None, now: dt_.datetime | None = None) -> IngestReport:
    """Land every valid shard found in `paths`; report (and quarantine) the rest.
    Raises ValueError only for arguments that make the whole batch unlandable (an
    unknown --pool, a malformed --date)."""
    from pipelines.config.pools import load_pools

    registry = registry if registry is not None else load_pools()
    if pool is not None and safe_name(pool, "pool") not in registry:
        raise ValueError(f"unknown pool {pool!r}; registered pools: {sorted(registry)} "
                         f"(add it to pools.yaml or $PERFLAKE_POOLS)")
    if date is not None:
        safe_date(date)
    now = now or dt_.datetime.now(dt_.timezone.utc)
    report = IngestReport()
    file_rejects: list[tuple[str, str, dict]] = []
    seen: set[str] = set()
    by_dir: dict[Path, list[_File]] = {}
    jsons: list[_File] = []
    for path in _expand(paths, report):
        f = _File(path, _sha256(path))
        f.duplicate = f.sha in seen or _manifest(lake, f.sha).exists()
        seen.add(f.sha)
        fmt, problem = _file_format(path)
        if problem:
            _refuse(report, file_rejects, str(path), problem)
        elif fmt == "json" and f.duplicate:
            report.duplicates.append(f"{path}: already ingested (sha256 {f.sha[:12]}...); skipped")
        elif fmt == "json":
            jsons.append(f)
        else:
            by_dir.setdefault(path.parent, []).append(f)

    shards = [s for d, fs in sorted(by_dir.items()) if (s := _read_parquet_shard(d, fs, report, file_rejects))]
    for f in jsons:
        shards += _read_nvbench(f, report, file_rejects, now)
    default_dt = date or now.date().isoformat()
    for shard in shards:
        _land(shard, lake, report, pool=pool, date=date, registry=registry, now=now)
    _write_quarantine(lake, report, file_rejects, default_dt, now)
    return report


def _refuse(report: IngestReport, rejects: list, source: str, reason: str, record: dict | None = None) -> None:
    report.issues.append(Issue(source, reason))
    rejects.append((source, reason, record or {}))


def _expand(paths: list[str | Path], report: IngestReport) -> list[Path]:
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            # nvbench's *.bin sample files are read through the JSON that names them.
            out += sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")
                          and f.suffix != ".bin")
        elif p.is_file():
            out.append(p)
        else:
            report.issues.append(Issue(str(p), "no such file or directory"))
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_format(path: Path) -> tuple[str | None, str | None]:
    """('parquet' | 'json', None) from the file's bytes (not its name), or (None, why it
    cannot be ingested at all)."""
    size = path.stat().st_size
    if size == 0:
        return None, "empty file (0 bytes): the upload was interrupted or the writer crashed; upload it again"
    with open(path, "rb") as f:
        head = f.read(64)
        f.seek(max(0, size - 4))
        tail = f.read(4)
    if head[:4] == b"PAR1":
        if tail != b"PAR1":
            return None, "truncated Parquet file (no footer): upload the complete file again"
        return "parquet", None
    if head.lstrip()[:1] == b"{":
        return "json", None
    return None, (f"not a Parquet or JSON file (starts with {head[:8]!r}); "
                  "ingest takes harness Parquet files or nvbench --json output")


# --------------------------------------------------------------------------- harness Parquet

def _read_parquet_shard(directory: Path, files: list[_File], report: IngestReport, rejects: list) -> _Shard | None:
    """The files of one directory as one shard, each checked against its landing schema."""
    shard = _Shard(source=str(directory), files=[])
    for f in files:
        kind = _FILENAME_KINDS.get(f.path.name) or _guess_kind(f.path)
        if kind is None:
            _refuse(report, rejects, str(f.path), "cannot tell which table this file holds: its name is not "
                    f"one of {sorted(_FILENAME_KINDS)} and its columns match none of the landing schemas")
            continue
        problem = check_file(f.path, KIND_TABLES[kind], floats_ok=_FLOAT_OK.get(kind, ()))
        if problem:
            _refuse(report, rejects, str(f.path), f"{kind}: {problem}")
            continue
        if kind in shard.tables:
            _refuse(report, rejects, str(f.path), f"a second {kind} file in {directory}; one shard per directory")
            continue
        try:
            t = pq.read_table(f.path)
            if kind == "samples":
                t = _finite_latencies(t, f"{f.path} [samples]", shard.rejects)
            shard.tables[kind] = _conform(t, KIND_TABLES[kind])
        except (pa.ArrowInvalid, OSError) as e:
            _refuse(report, rejects, str(f.path), f"{kind}: unreadable or out-of-range values: {e}")
            continue
        shard.files.append(f)
    if all(f.duplicate for f in shard.files) and shard.files:
        report.duplicates += [f"{f.path}: already ingested (sha256 {f.sha[:12]}...); skipped" for f in shard.files]
        return None
    return shard if shard.tables else None


def _guess_kind(path: Path) -> str | None:
    for kind, table in KIND_TABLES.items():
        if check_file(path, table, floats_ok=_FLOAT_OK.get(kind, ())) is None:
            return kind
    return None


def _finite_latencies(t: pa.Table, source: str, rejects: list) -> pa.Table:
    """Samples from a harness that records float nanoseconds: NaN and infinite rows
    set aside with their row and field named, the rest rounded to integer ns. (Zero and
    negative latencies land and are quarantined by the mining job's cleaning.)"""
    lat = t.column("latency_ns")
    if not pa.types.is_floating(lat.type):
        return t
    finite = pc.is_finite(lat).fill_null(True)
    for i in pc.indices_nonzero(pc.invert(finite)).to_pylist():
        row = {k: (str(v) if k == "latency_ns" else v) for k, v in t.slice(i, 1).to_pylist()[0].items()}
        rejects.append((source, f"row {i}: latency_ns is {row['latency_ns']} (field latency_ns): not finite", row))
    kept = t.filter(finite)
    return kept.set_column(kept.schema.get_field_index("latency_ns"), "latency_ns",
                           pc.round(kept.column("latency_ns")).cast(pa.int64()))


def _conform(t: pa.Table, table: Table) -> pa.Table:
    """`t` in exactly the landing schema: absent nullable columns as nulls, integers
    narrowed or widened (check_file already refused every other difference)."""
    schema = table.arrow_schema(with_partitions=False)
    cols = [t.column(f.name).cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
            for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


# --------------------------------------------------------------------------- nvbench JSON

def _read_nvbench(f: _File, report: IngestReport, rejects: list, now: dt_.datetime) -> list[_Shard]:
    """An nvbench --json file as one shard per device (pipelines/landing/nvbench.py)."""
    src = str(f.path)
    parsed = nvbench.parse(f.path, f.sha, now)
    if parsed.refusal:
        _refuse(report, rejects, src, parsed.refusal)
        return []
    report.issues += [Issue(src, w) for w in parsed.warnings]
    return [_Shard(source=src, files=[f], tables=d.tables, rejects=[(src + " [samples]", why, rec)
                                                                    for why, rec in d.rejects])
            for d in parsed.devices]


# --------------------------------------------------------------------------- relations and landing

def _land(shard: _Shard, lake: Lake, report: IngestReport, *, pool, date, registry, now) -> None:
    """Check how the shard's tables relate, set aside what does not fit, land the rest."""
    runs = shard.tables.get("runs")
    reason = _run_problem(runs, shard)
    if reason is None:
        run = runs.to_pylist()[0]
        pool_name = pool or _infer_pool(run, registry)
        if pool_name is None:
            reason = (f"unknown pool: no registered pool has sku {run.get('gpu_sku')!r} and device_kind "
                      f"{run.get('device_kind')!r} (pools: {sorted(registry)}); pass --pool")
        else:
            future = [c for c in ("started_at", "finished_at") if run[c] is not None and run[c] > now + CLOCK_SKEW]
            if future:
                reason = (f"run.{future[0]} {run[future[0]].isoformat()} is in the future (now {now.isoformat()}): "
                          "the worker's clock is wrong; fix it and re-run the shard")
    if reason is not None:
        report.issues.append(Issue(shard.source, reason))
        _reject_all(shard, reason)
        _write_quarantine(lake, report, shard.rejects, date or now.date().isoformat(), now, shard.files)
        return
    dt = date or run["started_at"].astimezone(dt_.timezone.utc).date().isoformat()
    # A shard re-uploaded with some files changed replaces its earlier landing, wherever that was.
    prior = [json.loads(m.read_text()) for f in shard.files if f.duplicate and (m := _manifest(lake, f.sha)).exists()]
    if prior:
        dt, pool_name = prior[0]["dt"], prior[0]["pool"]
    results = _filter_results(shard, run)
    samples = _filter_samples(shard, run, results)
    run["reason"] = "import"
    run_table = pa.Table.from_pylist([run], schema=runs.schema)
    new = [f for f in shard.files if not f.duplicate]
    report.duplicates += [f"{f.path}: already ingested (sha256 {f.sha[:12]}...); skipped"
                          for f in shard.files if f.duplicate]
    # Samples first and the run row last, as landing.land_shard does: a run row implies its data.
    written = {}
    with shard_lock(lake, dt=dt, pool=pool_name, run_id=run["run_id"], shard=run["shard"]):
        for kind, table in (("samples", samples), ("case_results", results), ("runs", run_table)):
            _write_atomic(table, lake.landing_file(kind, dt, pool_name, run["run_id"], run["shard"]))
            written[kind] = table.num_rows
    for f in new:
        _record(lake, f, dt, pool_name, run["run_id"], run["shard"], now)
    report.landed.append({"source": shard.source, "run_id": run["run_id"], "shard": run["shard"], "dt": dt,
                          "pool": pool_name, **written})
    if shard.rejects:
        counts: dict[tuple[str, str], int] = {}
        for src, why, _ in shard.rejects:
            counts[(src, why)] = counts.get((src, why), 0) + 1
        report.issues += [Issue(src, why, n) for (src, why), n in counts.items()]
        _write_quarantine(lake, report, shard.rejects, dt, now, shard.files)


def _run_problem(runs: pa.Table | None, shard: _Shard) -> str | None:
    if runs is None:
        return "no run metadata: the shard has no readable run.parquet, so its rows cannot be attributed"
    if runs.num_rows != 1:
        return f"run.parquet holds {runs.num_rows} rows; a shard has exactly one (empty shard?)"
    if shard.tables.get("case_results") is None or shard.tables["case_results"].num_rows == 0:
        return "empty shard: no case results; re-run the shard or upload its case_results.parquet"
    run = runs.to_pylist()[0]
    missing = [c for c in ("run_id", "shard", "attempt", "started_at") if run.get(c) is None]
    if missing:
        return f"run.parquet row 0: {missing} are null"
    try:
        safe_name(run["run_id"], "run.run_id (row 0)")
    except ValueError as e:
        return str(e)
    return None


def _infer_pool(run: dict, registry: dict) -> str | None:
    match = [p.name for p in registry.values() if p.sku == run.get("gpu_sku") and p.device_kind == run.get("device_kind")]
    return match[0] if len(match) == 1 else None


def _reject_all(shard: _Shard, reason: str) -> None:
    for kind, table in shard.tables.items():
        shard.rejects += [(f"{shard.source} [{kind}]", reason, r) for r in table.to_pylist()]


def _filter_results(shard: _Shard, run: dict) -> pa.Table:
    from kernels_bench.kernels import KERNELS
    from kernels_bench.kernels.base import DTYPE_BYTES

    keep, src = [], f"{shard.source} [case_results]"
    rows = shard.tables["case_results"].to_pylist()
    for i, r in enumerate(rows):
        why = _mismatch(r, run, i, "case_results")
        if why is None and r["family"] != "nvbench":  # nvbench benchmarks are outside our registry
            if r["kernel"] not in KERNELS:
                why = f"row {i}: unknown kernel {r['kernel']!r} (field kernel); known: {sorted(KERNELS)}"
            elif r["dtype"] not in DTYPE_BYTES:
                why = f"row {i}: unknown dtype {r['dtype']!r} (field dtype); known: {sorted(DTYPE_BYTES)}"
        (shard.rejects.append((src, why, r)) if why else keep.append(r))
    return pa.Table.from_pylist(keep, schema=shard.tables["case_results"].schema)


def _filter_samples(shard: _Shard, run: dict, results: pa.Table) -> pa.Table:
    schema = SAMPLES.arrow_schema(with_partitions=False)
    table = shard.tables.get("samples")
    if table is None:
        return schema.empty_table()
    cases = set(results.column("case_id").to_pylist())
    keep, src = [], f"{shard.source} [samples]"
    for i, r in enumerate(table.to_pylist()):
        why = _mismatch(r, run, i, "samples")
        if why is None and r["case_id"] not in cases:
            why = f"row {i}: case_id {r['case_id']!r} has no accepted case result in this shard"
        (shard.rejects.append((src, why, r)) if why else keep.append(r))
    return pa.Table.from_pylist(keep, schema=schema)


def _mismatch(row: dict, run: dict, i: int, kind: str) -> str | None:
    for col in ("run_id", "attempt"):
        if row[col] != run[col]:
            return (f"row {i}: {kind}.{col} {row[col]!r} does not match the shard's run metadata "
                    f"({col} {run[col]!r}); the files of different runs were mixed")
    return None


def _write_atomic(table: pa.Table, dst: Path) -> None:
    atomic_write(dst, lambda tmp: pq.write_table(table, tmp))


# --------------------------------------------------------------------------- manifest and quarantine

def _manifest(lake: Lake, sha: str) -> Path:
    return lake.landing / "_ingested" / f"{sha}.json"


def _record(lake: Lake, f: _File, dt: str, pool: str, run_id: str, shard: int, now: dt_.datetime) -> None:
    entry = {"sha256": f.sha, "source": str(f.path), "dt": dt, "pool": pool, "run_id": run_id, "shard": shard,
             "ingested_at": now.isoformat()}
    atomic_write(_manifest(lake, f.sha), lambda tmp: tmp.write_text(json.dumps(entry, indent=1)))


def _write_quarantine(lake: Lake, report: IngestReport, rejects: list, dt: str, now: dt_.datetime,
                      files: list[_File] | None = None) -> None:
    """Rejected records as one Parquet file in the quarantine table's landing shape
    (partition columns dt=.../stage=ingest in the path), named by the content hash of
    what they came from so that re-ingesting the same input replaces it."""
    if not rejects:
        return
    key = hashlib.sha256("".join(sorted(f.sha for f in files)).encode() if files else
                         json.dumps([r[:2] for r in rejects]).encode()).hexdigest()
    rows = [{"source": src, "reason": why, "record": json.dumps(rec, default=str, sort_keys=True),
             "ingested_at": now} for src, why, rec in rejects]
    dst = lake.quarantine / "ingest" / f"dt={safe_date(dt)}" / f"{key}.parquet"
    _write_atomic(pa.Table.from_pylist(rows, schema=QUARANTINE.arrow_schema(with_partitions=False)), dst)
    report.quarantine_files.append(str(dst))
