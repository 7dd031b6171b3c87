"""Cases run in a child process, so that a crash, an out-of-memory kill or a hang
costs one case, not the shard. The parent restarts the child and goes on."""
from __future__ import annotations

import multiprocessing as mp
import signal
from dataclasses import asdict

from kernels_bench.case import Case
from kernels_bench.measure import CaseOutcome
from kernels_bench.stopping import StoppingRule

_READY = "ready"
STARTUP_TIMEOUT_S = 300.0


def _child_main(conn, device: str, rule: StoppingRule, timer_mode: str, cpu_threads: int | None = None) -> None:
    threads = None
    if cpu_threads is not None:  # before torch is imported: OpenMP reads its variable then
        from kernels_bench.device import pin_cpu_threads

        threads = pin_cpu_threads(cpu_threads)
    import torch  # noqa: F401  (the slow part of start-up: paid before "ready", not by a case)

    from kernels_bench.measure import measure_case
    from kernels_bench.telemetry import observer_for

    observer = observer_for(device)
    conn.send((_READY, threads))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        outcome = measure_case(Case.from_dict(msg), device, rule, observer, timer_mode=timer_mode)
        conn.send(asdict(outcome))


class IsolatedMeasurer:
    """Measures cases one at a time in a long-lived child, restarted after a fault.
    `cpu_threads`: the child's torch intra-op thread count (kernels_bench.device,
    pin_cpu_threads), None to leave torch's default; `threads` is the count the child
    reported once started (None before, or when not pinned)."""

    def __init__(self, device: str, rule: StoppingRule, timer_mode: str = "cold",
                 grace_s: float = 60.0, cpu_threads: int | None = None):
        self.device, self.rule, self.timer_mode, self.cpu_threads = device, rule, timer_mode, cpu_threads
        self.threads: int | None = None
        # Setup (allocation, correctness check, warm-up) is outside the stopping rule's
        # timeout, so the hang timeout adds a grace period to it.
        self.case_timeout_s = rule.timeout_s + grace_s
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None

    def _start(self) -> CaseOutcome | None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_child_main, daemon=True,
                                       args=(child, self.device, self.rule, self.timer_mode, self.cpu_threads))
        self._proc.start()
        child.close()
        self._conn = parent
        # Start-up (interpreter, imports) is waited for here, so that it never counts
        # against a case's hang timeout, however short that is.
        ready = parent.poll(STARTUP_TIMEOUT_S)
        try:
            if ready:
                msg = parent.recv()
                if isinstance(msg, tuple) and msg[0] == _READY:
                    self.threads = msg[1]
                    return None
        except (EOFError, ConnectionError):
            pass
        self._proc.join(1)
        code = self._proc.exitcode
        self._kill()
        why = _describe_exit(code) if code is not None else f"not ready after {STARTUP_TIMEOUT_S:.0f} s"
        return CaseOutcome(status="crashed", error=f"worker process failed to start: {why}")

    @property
    def child_pid(self) -> int | None:
        """The live child's process id (None before the first case or after a kill)."""
        return self._proc.pid if self._proc is not None and self._proc.is_alive() else None

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(10)
        self._proc = self._conn = None

    def measure(self, case: Case) -> CaseOutcome:
        if self._proc is None or not self._proc.is_alive():
            failed_start = self._start()
            if failed_start is not None:
                return failed_start
        try:
            self._conn.send(case.to_dict())
            if not self._conn.poll(self.case_timeout_s):
                self._kill()
                return CaseOutcome(status="timeout", error=f"no result after {self.case_timeout_s:.0f} s; child killed")
            return CaseOutcome(**self._conn.recv())
        except (EOFError, ConnectionError, BrokenPipeError):
            self._proc.join(10)
            code = self._proc.exitcode
            self._kill()
            return CaseOutcome(status=_status_for_exit(code), error=_describe_exit(code))

    def close(self, wait: bool = True) -> None:
        """Let the child finish its case and exit (up to 10 s), or, with wait=False,
        kill it at once (the shard was stopped)."""
        if wait and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _status_for_exit(code: int | None) -> str:
    # SIGKILL from the kernel's OOM killer is the usual way a child dies of memory.
    return "oom" if code == -signal.SIGKILL else "crashed"


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (likely killed for memory)" if code == -signal.SIGKILL else ""
        return f"worker process died with signal {name}{hint}"
    return f"worker process exited with code {code}"
