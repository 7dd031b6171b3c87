"""Measure one case on a real device (cpu or cuda): correctness first, then warm-up,
then samples until the stopping rule says stop. Runs inside the worker child process."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

from kernels_bench.case import Case
from kernels_bench.kernels import Unsupported, kernel_for
from kernels_bench.stopping import StoppingRule, StoppingState
from kernels_bench.telemetry import Observer
from kernels_bench.timing import make_timer, synchronize

# Energy is read from the device's counter around a window of back-to-back calls (the
# counter updates every few milliseconds, far too coarsely for one call).
ENERGY_WINDOW_S = 0.3


@dataclass
class CaseOutcome:
    """What happened to one case. `samples` rows carry latency and telemetry."""

    status: str
    error: str | None = None
    correct: bool | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    tolerance: float | None = None
    stop_reason: str | None = None
    energy_per_call_j: float | None = None
    avg_power_w: float | None = None
    samples: list[dict] = field(default_factory=list)


def measure_case(case: Case, device: str, rule: StoppingRule, observer: Observer,
                 warmup: int = 3, timer_mode: str = "cold", cpu_flush: bool = False) -> CaseOutcome:
    """Check the case's result against its float64 reference, warm it up, then take
    samples until `rule` stops. Never raises for a failing kernel: its status (skipped,
    oom, failed) and error are in the outcome. `cpu_flush`: see kernels_bench/timing.py."""
    try:
        prepared = kernel_for(case.kernel).prepare(case, device)
        check = prepared.check()
    except Unsupported as e:
        return CaseOutcome(status="skipped", error=str(e))
    except MemoryError as e:
        return CaseOutcome(status="oom", error=f"MemoryError: {e}")
    except Exception as e:
        return _failure(e)
    outcome = CaseOutcome(status="ok", correct=check.correct, max_abs_error=check.max_abs_error,
                          max_rel_error=check.max_rel_error, tolerance=check.tolerance)
    try:
        # Warm up first: a CUDA timer calibrates its blocking kernel on the CPU cost of
        # queueing a call, and a first call (library handles, autotuning, lazy
        # allocation) would size it for a cost the samples never pay.
        for _ in range(warmup):
            prepared.fn()
        timer = make_timer(prepared.fn, device, timer_mode, cpu_flush)
        state = StoppingState(rule)
        observer.before_case()
        t_start = time.monotonic()
        while state.reason is None:
            ns = timer.sample_ns()
            r = observer.reading()
            outcome.samples.append({
                "iteration": state.n, "latency_ns": ns, "sm_clock_mhz": r.sm_clock_mhz,
                "temperature_c": r.temperature_c, "power_w": r.power_w,
                "throttled": observer.throttled(r)})
            state.add(ns * 1e-9, time.monotonic() - t_start)
        observer.after_case()
        outcome.stop_reason = state.reason
        outcome.energy_per_call_j, outcome.avg_power_w = _energy(prepared.fn, device, observer)
    except MemoryError as e:
        return CaseOutcome(status="oom", error=f"MemoryError: {e}")
    except Exception as e:
        return _failure(e)
    return outcome


def _energy(fn, device: str, observer: Observer) -> tuple[float | None, float | None]:
    """(joules per call, average watts) over a window of back-to-back calls, or
    (None, None) where the device has no energy counter (the CPU): never invented."""
    e0 = observer.energy_mj()
    if e0 is None:
        return None, None
    synchronize(device)
    t0, calls = time.monotonic(), 0
    while time.monotonic() - t0 < ENERGY_WINDOW_S:
        fn()
        calls += 1
    synchronize(device)
    seconds, e1 = time.monotonic() - t0, observer.energy_mj()
    joules = (e1 - e0) / 1000.0
    return joules / calls, joules / seconds


def _failure(e: BaseException) -> CaseOutcome:
    name = type(e).__name__
    text = str(e).lower()
    oom = "OutOfMemory" in name or "out of memory" in text or "can't allocate memory" in text
    status = "oom" if oom else "failed"
    tb = traceback.format_exception_only(type(e), e)[-1].strip()
    return CaseOutcome(status=status, error=tb[:2000])
