"""Run one shard of a suite on one device and write its records in the landing schema:
`samples.parquet` (one row per timed iteration), `case_results.parquet` (one row per
case, failures included) and `run.parquet` (the shard's provenance).

A shard asked to stop (SIGTERM, or Ctrl-C) still writes what it measured: the cases it
finished keep their rows, the case in progress and those not reached are recorded as
`stopped`, and `run_shard` then raises `ShardStopped` (the CLI exits with STOPPED_EXIT).
Whoever runs the harness can therefore send SIGTERM at its deadline, wait a little
(`stop_grace_s`), and land the part that was measured; `run_harness` does exactly that."""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kernels_bench import provenance
from kernels_bench.device import DEFAULT_CPU_THREADS, check_cpu_threads, check_device, is_cpu, threads_env
from kernels_bench.kernels import kernel_for
from kernels_bench.measure import CaseOutcome
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import Suite
from schemas.tables import CASE_RESULTS, RUNS, SAMPLES

# The harness's exit code when it was stopped and wrote the part it measured.
STOPPED_EXIT = 3
SIM_MAX_SAMPLES = 200  # samples per case on a simulated device
STOPPED = "stopped"


class ShardStopped(BaseException):
    """The shard was stopped by a signal; its files hold the cases measured before.
    A BaseException, as KeyboardInterrupt is: no `except Exception` on the way (a
    kernel's, a measurer's) may take it for a failing case."""

    def __init__(self, signum: int, measured: int, planned: int, paths: dict | None = None):
        self.signum, self.measured, self.planned, self.paths = signum, measured, planned, paths
        super().__init__(f"stopped by {signal.Signals(signum).name} after {measured} of {planned} cases")


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
    # On the CPU: torch's intra-op threads in the measuring processes (kernels_bench.device);
    # recorded in the run's env. Simulated and CUDA devices ignore it.
    cpu_threads: int = DEFAULT_CPU_THREADS

    @property
    def shard_id(self) -> int:
        return self.shard if self.record_shard is None else self.record_shard


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def run_shard(suite: Suite, spec: ShardSpec, out_dir: str | Path, *, rule: StoppingRule | None = None,
              injections: tuple = (), progress=print) -> dict[str, Path]:
    """Measure every case of the shard; returns the paths written. Never raises for a
    failing case: its status and error are recorded instead. Stopped by SIGTERM or
    SIGINT, it writes the cases measured so far (the rest `stopped`), then raises
    ShardStopped. A device this machine cannot measure on (an unknown SKU, no CUDA) is a
    UsageError before anything is measured or written."""
    check_device(spec.device)
    if is_cpu(spec.device):
        check_cpu_threads(spec.cpu_threads)
    rule = rule or suite.stopping
    if spec.device.startswith("sim:"):  # simulated samples are cheap but land as rows: a realistic count
        rule = replace(rule, min_samples=min(rule.min_samples, SIM_MAX_SAMPLES),
                       max_samples=min(rule.max_samples, SIM_MAX_SAMPLES))
    planned = suite.shard(spec.shard, spec.num_shards, spec.seed)
    with _StopSignals() as stop:
        started = _now()
        info = provenance.collect(spec.device)
        launch_ns = _launch_overhead_ns(spec.device, progress)
        samples, results = [], []
        measurer = _measurer(spec, rule, injections)
        try:
            for i, pc in enumerate(planned, 1):
                stop.check()
                case = pc.case
                if pc.skip_reason:
                    outcome = CaseOutcome(status="skipped", error=pc.skip_reason)
                else:
                    with stop.interruptible():
                        outcome = measurer(case)
                progress(f"[{i}/{len(planned)}] {case.label}: {outcome.status}"
                         + (f" n={len(outcome.samples)}" if outcome.samples else f" ({outcome.error})"))
                _record(results, samples, spec, suite, case, outcome, info)
        except ShardStopped:
            why = (f"not measured: the shard was stopped by {signal.Signals(stop.received).name} after "
                   f"{len(results)} of {len(planned)} cases")
            progress(why)
            for pc in planned[len(results):]:
                _record(results, samples, spec, suite, pc.case, CaseOutcome(status=STOPPED, error=why), info)
        finally:
            close = getattr(measurer, "close", None)
            if close:
                close(wait=stop.received is None)
        if is_cpu(spec.device):  # the count the measuring child reported (else the one it was given)
            info["env"] = threads_env(info["env"], getattr(measurer, "threads", None) or spec.cpu_threads)
        ok = sum(r["status"] == "ok" for r in results)
        bad = sum(r["status"] not in ("ok", "skipped") for r in results)
        status = "ok" if bad == 0 else ("failed" if ok == 0 else "partial")
        run_row = {**{c: info.get(c) for c in RUNS.column_names}, "run_id": spec.run_id,
                   "dag_run_id": spec.dag_run_id, "shard": spec.shard_id, "num_shards": spec.num_shards,
                   "attempt": spec.attempt, "pool": spec.pool, "reason": spec.reason, "suite": suite.name,
                   "started_at": started, "finished_at": _now(), "status": status,
                   "cases_planned": len(results), "cases_ok": ok, "launch_overhead_ns": launch_ns, "dt": spec.dt,
                   "stopping": json.dumps(asdict(rule), sort_keys=True),
                   "injected": json.dumps([asdict(i) for i in injections], sort_keys=True) if injections else None}
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "samples": out / "samples.parquet",
            "case_results": out / "case_results.parquet",
            "runs": out / "run.parquet",
        }
        _write(samples, SAMPLES, paths["samples"])
        _write(results, CASE_RESULTS, paths["case_results"])
        # The run row last: it is what marks the shard whole to whoever lands it.
        _write([run_row], RUNS, paths["runs"])
    if stop.received is not None:
        measured = sum(r["status"] != STOPPED for r in results)
        raise ShardStopped(stop.received, measured, len(results), paths)
    return paths


class _StopSignals:
    """SIGTERM and SIGINT, while a shard runs, ask it to stop. They interrupt a case
    being measured (the wait on the measuring child, or a simulated case) at once;
    anywhere else (recording a case, writing the files) they are noted and acted on at
    the next case, so a row is never half-recorded and the files are always written.
    Only the main thread can own signals: elsewhere this does nothing."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received: int | None = None
        self._interruptible = False
        self._old: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = {sig: signal.signal(sig, self._on_signal) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum, frame):
        first = self.received is None
        self.received = self.received or signum
        if first and self._interruptible:
            self._interruptible = False
            raise ShardStopped(signum, 0, 0)

    def check(self) -> None:
        if self.received is not None:
            raise ShardStopped(self.received, 0, 0)

    @contextlib.contextmanager
    def interruptible(self):
        """Where a signal stops the shard at once: around the measuring of one case."""
        self.check()
        self._interruptible = True
        try:
            yield
        finally:
            self._interruptible = False


def _record(results: list, samples: list, spec: ShardSpec, suite: Suite, case, outcome: CaseOutcome,
            info: dict) -> None:
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
        return lambda case: sim.measure(case, rule, spec.run_id, spec.dt, spec.attempt, reason=spec.reason)
    from kernels_bench.isolation import IsolatedMeasurer

    threads = spec.cpu_threads if is_cpu(spec.device) else None
    m = IsolatedMeasurer(spec.device, rule, cpu_threads=threads)

    class _Call:
        @property
        def threads(self) -> int | None:
            return m.threads

        def __call__(self, case):
            if case.family == "collective":
                # Collectives need world_size processes of their own: run_collective
                # spawns (and isolates) them; the single-process child would only skip.
                from kernels_bench.collectives import run_collective

                return run_collective(case, int(case.p["world_size"]), rule, spec.device, cpu_threads=threads)
            return m.measure(case)

        def close(self, wait: bool = True):
            m.close(wait=wait)

    return _Call()


def _write(rows: list[dict], table, path: Path) -> None:
    """Write rows in the table's landing schema (partition columns live in the path)."""
    schema = table.arrow_schema(with_partitions=False)
    data = pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    pq.write_table(data, tmp)
    os.replace(tmp, path)


@dataclass(frozen=True)
class HarnessExit:
    returncode: int
    stdout: str
    stderr: str
    stopped: str | None  # why the harness was asked to stop (deadline, or the caller's exception)


def run_harness(cmd: list[str], *, timeout_s: float | None = None, stop_grace_s: float = 30.0,
                **popen_kw) -> HarnessExit:
    """Run the harness command (`python -m kernels_bench run ...`) to its end, or, at
    `timeout_s` or on any exception in the caller (a task timeout, a termination),
    stop it the way it can answer: SIGTERM, up to `stop_grace_s` for it to write the
    part it measured, then SIGKILL. Output is captured as text unless `popen_kw` sends
    it elsewhere. The caller's exception
    is re-raised after the harness has exited; a deadline is reported in `stopped`."""
    proc = subprocess.Popen(cmd, **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen_kw})
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return HarnessExit(proc.returncode, out, err, None)
    except subprocess.TimeoutExpired:
        out, err = _stop(proc, stop_grace_s)
        return HarnessExit(proc.returncode, out, err, f"deadline of {timeout_s:.0f} s reached")
    except BaseException:
        _stop(proc, stop_grace_s)
        raise


def _stop(proc: subprocess.Popen, grace_s: float) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def shard_complete(out_dir: str | Path) -> bool:
    """Whether a harness output directory holds a whole shard: its run row written and
    no case left `stopped`."""
    out = Path(out_dir)
    if not (out / "run.parquet").exists():
        return False
    measured, planned = measured_cases(out / "case_results.parquet")
    return measured == planned


def measured_cases(case_results: str | Path) -> tuple[int, int]:
    """(cases measured, i.e. not left `stopped`; cases) of a case_results file."""
    status = pq.read_table(case_results, columns=["status"]).column("status").to_pylist()
    return sum(s != STOPPED for s in status), len(status)
