"""A fault in a case costs that case, not the shard: each fault is recorded with its
status and error, a dead or hung child is replaced, and the next case is measured.

Real child processes and real faults (a null-pointer read, a 1 PiB allocation, an
exception, a sleep), in the order a shard would meet them."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from kernels_bench.case import Case
from kernels_bench.isolation import IsolatedMeasurer
from kernels_bench.stopping import StoppingRule

RULE = StoppingRule(min_samples=5, min_time_s=0.01, timeout_s=0.5, max_samples=10)
GRACE_S = 2.0  # a hang is declared after timeout_s + grace: 2.5 s here

NOOP = Case.make("selftest", "noop", "python", "fp32")
TINY_MATMUL = Case.make("gemm", "matmul", "torch", "fp32", m=8, n=8, k=8)


def fault(kind: str) -> Case:
    return Case.make("selftest", f"fault_{kind}", "python", "fp32")


@pytest.fixture(scope="module", autouse=True)
def one_thread_children():
    # Toy cases need no thread pool, and on a busy CI machine a pool's waiting threads
    # turn microsecond calls into milliseconds: keep the children's timing far from the
    # short hang timeout these tests use. (Children read this when they import torch.)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        yield


@pytest.fixture(scope="module")
def measurer(one_thread_children):
    m = IsolatedMeasurer("cpu", RULE, grace_s=GRACE_S)
    yield m
    m.close()


def assert_measured(outcome):
    assert outcome.status == "ok" and outcome.correct, outcome
    assert len(outcome.samples) >= RULE.min_samples


def test_a_good_case_is_measured_in_a_child_process(measurer):
    assert_measured(measurer.measure(TINY_MATMUL))
    assert measurer.child_pid not in (None, os.getpid())


def test_a_raising_kernel_is_failed_with_its_error_and_the_child_lives_on(measurer):
    assert_measured(measurer.measure(NOOP))
    pid = measurer.child_pid
    out = measurer.measure(fault("raise"))
    assert out.status == "failed" and "RuntimeError: selftest: the kernel raised" in out.error
    assert not out.samples
    assert measurer.child_pid == pid
    assert_measured(measurer.measure(TINY_MATMUL))


def test_an_allocation_beyond_memory_is_oom_and_the_child_lives_on(measurer):
    assert_measured(measurer.measure(NOOP))
    pid = measurer.child_pid
    out = measurer.measure(fault("oom"))
    assert out.status == "oom" and "allocate" in out.error
    assert measurer.child_pid == pid
    assert_measured(measurer.measure(TINY_MATMUL))


def test_a_segfault_is_crashed_with_the_signal_and_a_new_child_measures_the_next_case(measurer):
    assert_measured(measurer.measure(NOOP))
    pid = measurer.child_pid
    out = measurer.measure(fault("segv"))
    assert out.status == "crashed" and "SIGSEGV" in out.error
    assert measurer.child_pid is None  # the dead child is gone, not reused
    assert_measured(measurer.measure(TINY_MATMUL))
    assert measurer.child_pid not in (None, pid)


def test_a_hang_is_a_timeout_after_the_rule_timeout_plus_grace_and_the_child_is_replaced(measurer):
    assert_measured(measurer.measure(NOOP))
    pid = measurer.child_pid
    t0 = time.monotonic()
    out = measurer.measure(fault("hang"))
    waited = time.monotonic() - t0
    assert out.status == "timeout" and "child killed" in out.error
    # Never before the rule's timeout plus grace; the upper bound is loose, as a busy machine
    # delays the kill and the restart, not the decision.
    assert RULE.timeout_s + GRACE_S <= waited < RULE.timeout_s + GRACE_S + 30
    assert_measured(measurer.measure(NOOP))
    assert measurer.child_pid not in (None, pid)


def test_a_child_killed_by_sigkill_is_recorded_as_likely_out_of_memory(measurer):
    # The kernel's OOM killer ends a process with SIGKILL; here the test plays its part
    # on a real child stuck in a real case.
    assert_measured(measurer.measure(NOOP))
    pid = measurer.child_pid
    killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
    killer.start()
    try:
        out = measurer.measure(fault("hang"))
    finally:
        killer.cancel()
    assert out.status == "oom" and "SIGKILL" in out.error and "memory" in out.error
    assert_measured(measurer.measure(TINY_MATMUL))
    assert measurer.child_pid not in (None, pid)


def test_close_stops_the_child():
    m = IsolatedMeasurer("cpu", RULE, grace_s=GRACE_S)
    assert_measured(m.measure(NOOP))
    pid = m.child_pid
    m.close()
    assert m.child_pid is None
    with pytest.raises(ProcessLookupError):  # exited and reaped
        os.kill(pid, 0)
