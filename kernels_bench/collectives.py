"""Measure collectives: `world_size` local processes, one process group, one sample at
a time, with the same CaseOutcome and sample records as every other kernel.

The order of one sample, on every rank: the ranks leave the previous sample's control
all-reduce together; each times the collective alone (the monotonic clock on CPU; CUDA
events on GPU); then one control all-reduce (MAX) shares the slowest rank's time, which
is the sample (a collective ends when its last rank does), and rank 0's wall clock, so
that every rank's stopping rule sees the same numbers and stops on the same iteration.
Telemetry is rank 0's device. Ranks meet on 127.0.0.1 at a free port: NCCL with rank r
on cuda:r, gloo with CPU tensors.

Bandwidth follows nccl-tests: see kernels_bench.kernels.collective (algbw_gbps,
busbw_gbps; bytes_per_call is the bus bytes, so bytes / time is the bus bandwidth).
"""
from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import queue
import socket
import time
from dataclasses import asdict

from kernels_bench.case import Case
from kernels_bench.kernels import Unsupported, kernel_for
from kernels_bench.measure import CaseOutcome, _failure
from kernels_bench.stopping import StoppingRule, StoppingState

# Process start, torch import and rendezvous come before the first case's stopping rule.
STARTUP_GRACE_S = 60.0


def run_collective(case: Case, world_size: int, rule: StoppingRule, device: str = "cpu",
                   grace_s: float = STARTUP_GRACE_S, cpu_threads: int | None = None) -> CaseOutcome:
    """Measure one collective case with `world_size` local ranks. Never raises for the
    case's own failure: a skip, an error, a dead rank or a hang is the outcome's status.
    `cpu_threads`: each gloo (CPU) rank's torch thread count (None: torch's default)."""
    return run_collectives([case], world_size, rule, device, grace_s, cpu_threads)[0]


def run_collectives(cases: list[Case], world_size: int, rule: StoppingRule, device: str = "cpu",
                    grace_s: float = STARTUP_GRACE_S, cpu_threads: int | None = None) -> list[CaseOutcome]:
    """Measure several collective cases in one process group (one start-up for all);
    one outcome per case, in order. All cases share one backend and `world_size`."""
    if not cases:
        return []
    backends = {c.backend for c in cases}
    if len(backends) != 1:
        raise ValueError(f"run_collectives takes one backend at a time, got {sorted(backends)}")
    for c in cases:
        if c.family != "collective" or int(c.p.get("world_size", world_size)) != world_size:
            raise ValueError(f"{c.label} is not a collective case for world_size {world_size}")
    backend = backends.pop()
    reason = _unavailable(backend, world_size, device)
    if reason:
        return [CaseOutcome(status="skipped", error=reason) for _ in cases]
    ctx = mp.get_context("spawn")
    results_q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, daemon=True,
                         args=(rank, world_size, port, backend, [c.to_dict() for c in cases], rule, results_q,
                               cpu_threads))
             for rank in range(world_size)]
    for p in procs:
        p.start()
    outcomes: dict[int, CaseOutcome] = {}
    per_case_s = rule.timeout_s + grace_s
    deadline = time.monotonic() + per_case_s
    try:
        while len(outcomes) < len(cases) and time.monotonic() < deadline:
            try:
                i, d = results_q.get(timeout=0.2)
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    break  # a rank died: the others would wait on it forever
                continue
            outcomes[i] = CaseOutcome(**d)
            deadline = time.monotonic() + per_case_s
    finally:
        for p in procs:
            p.join(5 if len(outcomes) == len(cases) else 0.1)
        codes = [p.exitcode for p in procs]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    return [outcomes.get(i) or _lost(codes, per_case_s) for i in range(len(cases))]


def _unavailable(backend: str, world_size: int, device: str) -> str | None:
    import torch
    import torch.distributed as dist

    if world_size < 1:
        return f"world_size {world_size} is not a number of ranks"
    if not dist.is_available():
        return "torch.distributed is not available in this build"
    if backend == "gloo":
        return None if dist.is_gloo_available() else "gloo is not available in this build"
    if backend == "nccl":
        if not device.startswith("cuda"):
            return f"nccl needs CUDA devices; this run's device is {device}"
        if not dist.is_nccl_available():
            return "nccl is not available in this build"
        have = torch.cuda.device_count()
        return None if have >= world_size else f"world_size {world_size} needs {world_size} GPUs; {have} visible"
    return f"unknown process-group backend {backend!r}"


def _lost(codes: list[int | None], per_case_s: float) -> CaseOutcome:
    dead = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
    if dead:
        text = ", ".join(f"rank {r} exit code {c}" for r, c in dead)
        return CaseOutcome(status="crashed", error=f"collective worker died: {text}")
    return CaseOutcome(status="timeout", error=f"no result after {per_case_s:.0f} s; ranks killed")


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    # The port is released before the ranks bind it; a collision is possible but rare,
    # and shows as a rendezvous error in this case's record rather than a silent loss.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world_size: int, port: int, backend: str, case_dicts: list[dict],
               rule: StoppingRule, results_q, cpu_threads: int | None = None) -> None:
    if backend == "gloo" and cpu_threads is not None:  # before torch is imported
        from kernels_bench.device import pin_cpu_threads

        pin_cpu_threads(cpu_threads)
    import torch
    import torch.distributed as dist

    from kernels_bench.telemetry import Observer, observer_for

    if backend == "gloo":
        # Gloo picks the interface its host name resolves to; the ranks are local.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        device = "cpu"
    else:
        device = f"cuda:{rank}"
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=dt.timedelta(seconds=rule.timeout_s + STARTUP_GRACE_S))
    observer = observer_for(device) if rank == 0 else Observer()
    try:
        for i, d in enumerate(case_dicts):
            outcome = _measure_rank(Case.from_dict(d), device, rule, observer)
            if rank == 0:
                results_q.put((i, asdict(outcome)))
    finally:
        dist.destroy_process_group()


def _agree(values: list[float], device: str, op_name: str = "MAX") -> list[float]:
    """All ranks' values reduced element-wise with `op_name`; doubles as a barrier."""
    import torch
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op_name))
    return t.tolist()  # .tolist() synchronises a CUDA tensor with the host


def _measure_rank(case: Case, device: str, rule: StoppingRule, observer, warmup: int = 3) -> CaseOutcome:
    from kernels_bench.timing import make_timer

    # Every rank prepares, then all agree before the first collective call: a rank that
    # could not prepare must not leave the others waiting in a collective.
    failed: CaseOutcome | None = None
    try:
        prepared = kernel_for(case.kernel).prepare(case, device)
    except Unsupported as e:
        failed = CaseOutcome(status="skipped", error=str(e))
    except Exception as e:
        failed = _failure(e)
    (any_failed,) = _agree([1.0 if failed else 0.0], device)
    if any_failed:
        return failed or CaseOutcome(status="failed", error="another rank failed to prepare this case")
    try:
        check = prepared.check()
        bad, abs_err, rel_err = _agree([0.0 if check.correct else 1.0, check.max_abs_error, check.max_rel_error],
                                       device)
        outcome = CaseOutcome(status="ok", correct=not bad, max_abs_error=abs_err, max_rel_error=rel_err,
                              tolerance=check.tolerance)
        # "hot": a collective's buffers are not flushed from L2 between iterations (nccl-tests).
        timer = make_timer(prepared.fn, device, "hot")
        for _ in range(warmup):
            prepared.fn()
        state = StoppingState(rule)
        observer.before_case()
        t_start = time.monotonic()
        _agree([0.0], device)  # start the first sample together
        while state.reason is None:
            ns = timer.sample_ns()
            slowest_ns, wall_s = _agree([float(ns), time.monotonic() - t_start], device)
            r = observer.reading()
            outcome.samples.append({
                "iteration": state.n, "latency_ns": int(slowest_ns), "sm_clock_mhz": r.sm_clock_mhz,
                "temperature_c": r.temperature_c, "power_w": r.power_w, "throttled": observer.throttled(r)})
            state.add(slowest_ns * 1e-9, wall_s)
        observer.after_case()
        outcome.stop_reason = state.reason
        return outcome
    except Exception as e:
        return _failure(e)
