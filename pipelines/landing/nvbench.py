"""nvbench `--json` output as landing rows: one shard per device, one case result per
benchmark state, and samples where the JSON points at its `nv/cold/sample_times` binary
file (nvbench keeps only summaries in the JSON itself).

Pure parsing: `parse` returns rows and the problems it found; pipelines/landing/ingest.py
decides what lands, what is quarantined and what is reported.
"""
from __future__ import annotations

import datetime as dt_
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


@dataclass
class Parsed:
    devices: list[Device] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the file lands, but not all of it as hoped
    refusal: str | None = None                         # the whole file cannot land: why


def parse(path: Path, sha: str, now: dt_.datetime) -> Parsed:
    """Read the nvbench JSON at `path` (content hash `sha`, which names its run)."""
    try:
        doc = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return Parsed(refusal=f"not valid JSON ({e}); a truncated upload? upload it again")
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return Parsed(refusal="JSON without a 'benchmarks' list: not nvbench --json output")
    out = Parsed()
    run_id = f"nvbench-{sha[:12]}"
    per_device: dict[int, tuple[list, list, list]] = {}
    for b_i, bench in enumerate(doc["benchmarks"]):
        for s_i, state in enumerate(bench.get("states") or []):
            where = f"benchmarks[{b_i}].states[{s_i}] ({bench.get('name')} {state.get('name')})"
            results, samples, bad = per_device.setdefault(int(state.get("device") or 0), ([], [], []))
            result, times, why = _nv_state(path, run_id, bench, state, where)
            if why:
                out.warnings.append(f"{where}: {why}; its case result lands without samples")
            result["shard"] = int(state.get("device") or 0)
            results.append(result)
            for i, t in enumerate(times or []):
                row = {"run_id": run_id, "case_id": result["case_id"], "attempt": 1, "iteration": i,
                       "throttled": False, "device_kind": "gpu"}
                if math.isfinite(t):
                    samples.append({**row, "latency_ns": int(round(t * 1e9))})
                else:
                    bad.append((f"{where}: sample {i} of nv/cold/sample_times is {t}: latency_ns is not finite",
                                {**row, "time_s": str(t)}))
    if not per_device:
        return Parsed(refusal="empty shard: the nvbench JSON has no benchmark states")
    devices = {d.get("id"): d for d in doc.get("devices") or []}
    version = ((doc.get("meta") or {}).get("version") or {}).get("nvbench") or {}
    for device, (results, samples, bad) in sorted(per_device.items()):
        run = _nv_run(run_id, device, len(per_device), devices.get(device) or {}, version, results, now)
        tables = {kind: pa.Table.from_pylist(rows, schema=_TABLES[kind].arrow_schema(with_partitions=False))
                  for kind, rows in (("samples", samples), ("case_results", results), ("runs", [run]))}
        out.devices.append(Device(device, tables, bad))
    return out


def _nv_state(json_path: Path, run_id: str, bench: dict, state: dict, where: str):
    """(case result row, sample times in seconds or None, why samples are unusable or None)."""
    from kernels_bench.case import Case

    summ = {s.get("tag"): {d.get("name"): d.get("value") for d in s.get("data") or []}
            for s in state.get("summaries") or []}
    axes = {a["name"]: str(a.get("value")) for a in state.get("axis_values") or []}
    types = [str(a.get("value")) for a in state.get("axis_values") or [] if a.get("type") == "type"]
    dtype = next((_NV_DTYPES[t] for t in types if t in _NV_DTYPES), "n/a")
    case = Case.make("nvbench", str(bench.get("name")), "nvbench", dtype, **axes)
    mean_s = _num(summ.get("nv/cold/time/gpu/mean", {}).get("value"))
    n = int(_num(summ.get("nv/cold/sample_size", {}).get("value")) or 0)
    times, why = _nv_sample_times(json_path, summ.get("nv/json/bin:nv/cold/sample_times"))
    skipped = bool(state.get("is_skipped"))
    status = "skipped" if skipped else ("ok" if mean_s else "failed")
    error = state.get("skip_reason") if skipped else (None if mean_s else f"{where}: no nv/cold/time/gpu/mean")
    stop = ("nvbench: per-sample times imported" if times else
            f"nvbench summary only, raw samples not available (gpu mean {mean_s} s, n {n})")
    row = {"run_id": run_id, "case_id": case.case_id, "attempt": 1, "suite": "nvbench", "family": "nvbench",
           "kernel": case.kernel, "backend": "nvbench", "dtype": dtype,
           "params": {**axes, "nvbench.state": str(state.get("name"))}, "status": status, "error": error,
           "stop_reason": stop, "n_samples": len(times) if times else n}
    return row, times, why


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
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _nv_sample_times(json_path: Path, summary: dict | None) -> tuple[list[float] | None, str | None]:
    """(times in seconds, None), or (None, why not) when the JSON names a sample file
    that cannot be used; (None, None) when it names none."""
    import numpy as np

    if not summary or not summary.get("filename"):
        return None, None
    p = Path(str(summary["filename"]))
    p = p if p.is_absolute() else json_path.parent / p  # nvbench writes it relative to the JSON
    if not p.is_file():
        return None, f"sample times file {p} is missing"
    times = np.fromfile(p, dtype="<f4")
    size = int(_num(summary.get("size")) or -1)
    if size != len(times):
        return None, f"sample times file {p} holds {len(times)} values, the JSON says {size}"
    return [float(t) for t in times], None
