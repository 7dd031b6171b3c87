"""nvbench `--json` output as landing rows: one shard per device, one case result per
benchmark state, and samples where the JSON points at its `nv/cold/sample_times` binary
file (nvbench keeps only summaries in the JSON itself).

Pure parsing: `parse` returns rows and the problems it found; pipelines/landing/ingest.py
decides what lands, what is quarantined and what is reported.
"""
from __future__ import annotations

import datetime as dt_
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from schemas.tables import CASE_RESULTS, RUNS, SAMPLES

_TABLES = {"samples": SAMPLES, "case_results": CASE_RESULTS, "runs": RUNS}
_NV_DTYPES = {"F64": "fp64", "F32": "fp32", "F16": "fp16", "BF16": "bf16", "double": "fp64", "float": "fp32"}


@dataclass
class Device:
    """The rows of one device's shard, and its sample rows set aside (reason, record)."""
    device: int
    tables: dict[str, pa.Table]
    rejects: list[tuple[str, dict]] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)  # per sample row: the case_results row it was measured for


@dataclass
class Parsed:
    devices: list[Device] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the file lands, but not all of it as hoped
    refusal: str | None = None                         # the whole file cannot land: why
    sample_files: list[Path] = field(default_factory=list)  # the nv/cold/sample_times files it read


class Malformed(ValueError):
    """nvbench-shaped JSON with a field of the wrong shape; the message names where."""


def recognise(doc) -> str | None:
    """None when `doc` has nvbench --json's structure (a 'benchmarks' list whose entries
    hold 'states' lists), otherwise why it is not nvbench output."""
    benches = doc.get("benchmarks") if isinstance(doc, dict) else None
    if isinstance(benches, list) and benches and all(isinstance(b, dict) and isinstance(b.get("states"), list)
                                                     for b in benches):
        return None
    if isinstance(doc, dict) and "context" in doc and isinstance(benches, list) and any(
            isinstance(b, dict) and ("real_time" in b or "iterations" in b) for b in benches):
        return ("not nvbench output: this is Google Benchmark JSON ('context', benchmarks with 'real_time'); "
                "ingest takes nvbench --json output and harness Parquet")
    if isinstance(benches, list) and not benches:
        return "empty shard: the nvbench JSON has no benchmarks"
    return ("not nvbench output: JSON without a 'benchmarks' list of entries with 'states'; ingest takes "
            "nvbench --json output and harness Parquet")


_INT64_NS = 2.0**63  # latency_ns is an int64: a sample time past it (292 years) is no timing


def parse(path: Path, now: dt_.datetime) -> Parsed:
    """Read the nvbench JSON at `path`. Its run id is a hash of the JSON's values without
    file names, so the same results under another file name, encoding or layout are the
    same run, and so are they when a sample times file that was missing or cut short
    arrives later: its samples then complete the landed run (identity.compare's 'more')
    instead of landing the same states again under a second run id."""
    from pipelines.landing.inputs import json_text

    try:
        doc = json.loads(json_text(path.read_bytes()))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return Parsed(refusal=f"not valid JSON ({e}); a truncated upload? upload it again")
    why = recognise(doc)
    if why:
        return Parsed(refusal=why)
    try:
        return _parse(path, doc, now)
    except Malformed as e:
        return Parsed(refusal=f"malformed nvbench JSON: {e}")


def _parse(path: Path, doc: dict, now: dt_.datetime) -> Parsed:
    out = Parsed()
    per_device: dict[int, tuple[list, list, list, list]] = {}
    states = []
    for b_i, bench in enumerate(doc["benchmarks"]):
        for s_i, state in enumerate(bench["states"]):
            where = f"benchmarks[{b_i}].states[{s_i}]"
            _check_state(state, where)
            where += f" ({bench.get('name')} {state.get('name')})"
            result, times, why, sample_file = _nv_state(path, bench, state, where)
            if sample_file is not None:
                out.sample_files.append(sample_file)
            states.append((int(state.get("device") or 0), where, result, times, why))
    if not states:
        return Parsed(refusal="empty shard: the nvbench JSON has no benchmark states")
    run_id = f"nvbench-{_content_hash(doc)}"
    for device, where, result, times, why in states:
        results, samples, bad, owners = per_device.setdefault(device, ([], [], [], []))
        if why:
            out.warnings.append(f"{where}: {why}; its case result lands without samples")
        result.update(run_id=run_id, shard=device)
        results.append(result)
        for i, t in enumerate(times or []):
            row = {"run_id": run_id, "case_id": result["case_id"], "attempt": 1, "iteration": i,
                   "throttled": False, "device_kind": "gpu"}
            if math.isfinite(t) and abs(t) * 1e9 < _INT64_NS:
                samples.append({**row, "latency_ns": int(round(t * 1e9))})
                owners.append(len(results) - 1)
            else:
                what = "is not finite" if not math.isfinite(t) else "does not fit a 64-bit count of nanoseconds"
                bad.append((f"{where}: sample {i} of nv/cold/sample_times is {t} s: latency_ns {what} "
                            "(field latency_ns)", {**row, "time_s": str(t)}))
    devices = doc.get("devices") if isinstance(doc.get("devices"), list) else []
    devices = {d.get("id"): d for d in devices if isinstance(d, dict)}
    version = _dig(doc, "meta", "version", "nvbench")
    for device, (results, samples, bad, owners) in sorted(per_device.items()):
        run = _nv_run(run_id, device, len(per_device), devices.get(device) or {}, version, results, now)
        try:
            tables = {kind: pa.Table.from_pylist(rows, schema=_TABLES[kind].arrow_schema(with_partitions=False))
                      for kind, rows in (("samples", samples), ("case_results", results), ("runs", [run]))}
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
            raise Malformed(f"device {device}: a value does not fit its column ({e})") from e
        out.devices.append(Device(device, tables, bad, owners))
    return out


def _dig(doc: dict, *keys) -> dict:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc if isinstance(doc, dict) else {}


def _check_state(state, where: str) -> None:
    if not isinstance(state, dict):
        raise Malformed(f"{where} is {type(state).__name__}, expected an object")
    device = state.get("device")
    if device is not None and not (isinstance(device, int) or (isinstance(device, str) and device.isdigit())):
        raise Malformed(f"{where}.device is {device!r}, expected a device index (an integer)")
    for key, inner in (("summaries", "data"), ("axis_values", None)):
        items = state.get(key)
        if items is None:
            continue
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise Malformed(f"{where}.{key} is not a list of objects")
        if inner and not all(isinstance(x.get(inner) or [], list) and all(isinstance(d, dict) for d in x.get(inner) or [])
                             for x in items):
            raise Malformed(f"{where}.{key}[].{inner} is not a list of objects")
        if key == "axis_values" and not all("name" in x for x in items):
            raise Malformed(f"{where}.axis_values[] without a 'name'")


def _content_hash(doc: dict) -> str:
    def strip(v):  # file names say where the upload sat, not what was measured
        if isinstance(v, dict):  # {"name": "filename", "value": ...} in a summary's data
            named_file = v.get("name") == "filename"
            return {k: strip(x) for k, x in v.items() if k != "filename" and not (named_file and k == "value")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    body = json.dumps(strip(doc), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:12]


def _nv_state(json_path: Path, bench: dict, state: dict, where: str):
    """(case result row without its run_id, sample times in seconds or None, why samples are
    unusable or None, the sample times file it read or None)."""
    from kernels_bench.case import Case

    summ = {s.get("tag"): {d.get("name"): d.get("value") for d in s.get("data") or []}
            for s in state.get("summaries") or []}
    axes = {a["name"]: str(a.get("value")) for a in state.get("axis_values") or []}
    types = [str(a.get("value")) for a in state.get("axis_values") or [] if a.get("type") == "type"]
    dtype = next((_NV_DTYPES[t] for t in types if t in _NV_DTYPES), "n/a")
    case = Case.make("nvbench", str(bench.get("name")), "nvbench", dtype, **axes)
    mean_s = _num(summ.get("nv/cold/time/gpu/mean", {}).get("value"))
    n = int(_num(summ.get("nv/cold/sample_size", {}).get("value")) or 0)
    times, why, sample_file = _nv_sample_times(json_path, summ.get("nv/json/bin:nv/cold/sample_times"))
    skipped = bool(state.get("is_skipped"))
    status = "skipped" if skipped else ("ok" if mean_s else "failed")
    error = state.get("skip_reason") if skipped else (None if mean_s else f"{where}: no nv/cold/time/gpu/mean")
    # By what the JSON names, not by whether the file could be read: a sample times file
    # that arrives later then completes this very row (a missing one is a warning).
    named = bool((summ.get("nv/json/bin:nv/cold/sample_times") or {}).get("filename"))
    stop = ("nvbench: per-sample times (its nv/cold/sample_times file)" if named else
            f"nvbench summary only, raw samples not available (gpu mean {mean_s} s, n {n})")
    row = {"case_id": case.case_id, "attempt": 1, "suite": "nvbench", "family": "nvbench",
           "kernel": case.kernel, "backend": "nvbench", "dtype": dtype,
           "params": {**axes, "nvbench.state": str(state.get("name"))}, "status": status, "error": error,
           "stop_reason": stop, "n_samples": len(times) if times else n}
    return row, times, why, sample_file


def _nv_run(run_id: str, device: int, n_devices: int, dev: dict, version: dict, results: list,
            now: dt_.datetime) -> dict:
    from kernels_bench.provenance import HARDWARE_KEYS, SOFTWARE_KEYS, fingerprint

    info = {"device_kind": "gpu", "gpu_name": dev.get("name"), "sm_count": dev.get("number_of_sms"),
            "l2_bytes": dev.get("l2_cache_size"), "memory_bytes": dev.get("global_memory_size"),
            "ecc_enabled": dev.get("ecc_state"), "harness_commit": version.get("git_sha")}
    ok = sum(r["status"] == "ok" for r in results)
    # nvbench JSON carries no timestamps: the import time stands for both ends.
    return {**info, "run_id": run_id, "dag_run_id": "ingest", "shard": device, "num_shards": n_devices,
            "attempt": 1, "reason": "import", "suite": "nvbench", "started_at": now, "finished_at": now,
            "device": f"cuda:{device}", "hardware_fingerprint": fingerprint(info, HARDWARE_KEYS),
            "software_fingerprint": fingerprint(info, SOFTWARE_KEYS), "cases_planned": len(results),
            "cases_ok": ok, "status": "ok" if ok == len(results) else ("failed" if ok == 0 else "partial")}


def _num(v) -> float | None:
    """A summary's value as a finite number, or None ('nan', 'inf', not a number)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _nv_sample_times(json_path: Path, summary: dict | None) -> tuple[list[float] | None, str | None, Path | None]:
    """(times in seconds, None, file), or (None, why not, file) when the JSON names a
    sample file that cannot be used; (None, None, None) when it names none."""
    import numpy as np

    if not summary or not summary.get("filename"):
        return None, None, None
    p = Path(str(summary["filename"]))
    p = p if p.is_absolute() else json_path.parent / p  # nvbench writes it relative to the JSON
    if not p.is_file():
        return None, f"sample times file {p} is missing", None
    if p.stat().st_size % 4:
        return None, f"sample times file {p} is {p.stat().st_size} bytes, not a whole number of float32 values", p
    times = np.fromfile(p, dtype="<f4")
    size = _num(summary.get("size"))
    if size != len(times):
        said = f"says {int(size)}" if size is not None else f"gives no usable size ({summary.get('size')!r})"
        return None, f"sample times file {p} holds {len(times)} values, the JSON {said}", p
    return [float(t) for t in times], None, p
