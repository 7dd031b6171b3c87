"""Run one shard of a suite on one device and write its records in the landing schema:
`samples.parquet` (one row per timed iteration), `case_results.parquet` (one row per
case, failures included) and `run.parquet` (the shard's provenance)."""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kernels_bench import provenance
from kernels_bench.kernels import kernel_for
from kernels_bench.measure import CaseOutcome
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import Suite
from schemas.tables import CASE_RESULTS, RUNS, SAMPLES


@dataclass(frozen=True)
class ShardSpec:
    run_id: str
    shard: int
    num_shards: int
    pool: str
    device: str
    dt: str
    attempt: int = 1
    reason: str = "manual"
    dag_run_id: str = "cli"
    seed: int | None = None
    # The shard number recorded in the rows: unique within the run when one run sweeps
    # several suites (each suite is sharded on its own). Defaults to `shard`.
    record_shard: int | None = None

    @property
    def shard_id(self) -> int:
        return self.shard if self.record_shard is None else self.record_shard


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def run_shard(suite: Suite, spec: ShardSpec, out_dir: str | Path, *, rule: StoppingRule | None = None,
              injections: tuple = (), progress=print) -> dict[str, Path]:
    """Measure every case of the shard; returns the paths written. Never raises for a
    failing case: its status and error are recorded instead."""
    rule = rule or suite.stopping
    planned = suite.shard(spec.shard, spec.num_shards, spec.seed)
    started = _now()
    info = provenance.collect(spec.device)
    launch_ns = _launch_overhead_ns(spec.device, progress)
    samples, results = [], []
    measurer = _measurer(spec, rule, injections)
    try:
        for i, pc in enumerate(planned, 1):
            case = pc.case
            if pc.skip_reason:
                outcome = CaseOutcome(status="skipped", error=pc.skip_reason)
            else:
                outcome = measurer(case)
            progress(f"[{i}/{len(planned)}] {case.label}: {outcome.status}"
                     + (f" n={len(outcome.samples)}" if outcome.samples else f" ({outcome.error})"))
            k = kernel_for(case.kernel)
            results.append({
                "run_id": spec.run_id, "shard": spec.shard_id, "case_id": case.case_id, "attempt": spec.attempt,
                "suite": suite.name, "family": case.family, "kernel": case.kernel, "backend": case.backend,
                "dtype": case.dtype, "params": {k_: str(v) for k_, v in case.params},
                "flops_per_call": k.flops(case), "bytes_per_call": k.bytes(case),
                "status": outcome.status, "error": outcome.error, "correct": outcome.correct,
                "max_abs_error": outcome.max_abs_error, "max_rel_error": outcome.max_rel_error,
                "tolerance": outcome.tolerance, "stop_reason": outcome.stop_reason,
                "energy_per_call_j": outcome.energy_per_call_j, "avg_power_w": outcome.avg_power_w,
                "n_samples": len(outcome.samples)})
            for s in outcome.samples:
                samples.append({"run_id": spec.run_id, "case_id": case.case_id, "attempt": spec.attempt,
                                "device_kind": info["device_kind"], **s})
    finally:
        close = getattr(measurer, "close", None)
        if close:
            close()
    ok = sum(r["status"] == "ok" for r in results)
    bad = sum(r["status"] not in ("ok", "skipped") for r in results)
    status = "ok" if bad == 0 else ("failed" if ok == 0 else "partial")
    run_row = {**{c: info.get(c) for c in RUNS.column_names}, "run_id": spec.run_id,
               "dag_run_id": spec.dag_run_id, "shard": spec.shard_id, "num_shards": spec.num_shards,
               "attempt": spec.attempt, "pool": spec.pool, "reason": spec.reason, "suite": suite.name,
               "started_at": started, "finished_at": _now(), "status": status,
               "cases_planned": len(results), "cases_ok": ok, "launch_overhead_ns": launch_ns, "dt": spec.dt}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "samples": out / "samples.parquet",
        "case_results": out / "case_results.parquet",
        "runs": out / "run.parquet",
    }
    _write(samples, SAMPLES, paths["samples"])
    _write(results, CASE_RESULTS, paths["case_results"])
    _write([run_row], RUNS, paths["runs"])
    return paths


def _launch_overhead_ns(device: str, progress) -> float | None:
    """The run's launch cost (timing.launch_overhead_ns; the model's on a simulated
    device), measured in this process before the cases; None, said why, if it fails."""
    try:
        if device.startswith("sim:"):
            from kernels_bench.sim import SimDevice

            return SimDevice(device.split(":", 1)[1]).launch_overhead_ns
        from kernels_bench.timing import launch_overhead_ns

        return launch_overhead_ns(device)
    except Exception as e:  # the cases can still be measured: the column stays null
        progress(f"launch overhead not measured: {type(e).__name__}: {e}")
        return None


def _measurer(spec: ShardSpec, rule: StoppingRule, injections):
    if spec.device.startswith("sim:"):
        from kernels_bench.sim import SimDevice  # numpy: needed by the simulated device only

        sim = SimDevice(spec.device.split(":", 1)[1], injections=injections)
        # Simulated samples are cheap but land as rows: cap them at a realistic count.
        sim_rule = replace(rule, max_samples=min(rule.max_samples, 200))
        return lambda case: sim.measure(case, sim_rule, spec.run_id, spec.dt, spec.attempt, reason=spec.reason)
    from kernels_bench.isolation import IsolatedMeasurer

    m = IsolatedMeasurer(spec.device, rule)

    class _Call:
        def __call__(self, case):
            if case.family == "collective":
                # Collectives need world_size processes of their own: run_collective
                # spawns (and isolates) them; the single-process child would only skip.
                from kernels_bench.collectives import run_collective

                return run_collective(case, int(case.p["world_size"]), rule, spec.device)
            return m.measure(case)

        def close(self):
            m.close()

    return _Call()


def _write(rows: list[dict], table, path: Path) -> None:
    """Write rows in the table's landing schema (partition columns live in the path)."""
    schema = table.arrow_schema(with_partitions=False)
    data = pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    pq.write_table(data, tmp)
    os.replace(tmp, path)
