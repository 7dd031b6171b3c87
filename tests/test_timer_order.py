"""The CUDA timer's order of operations, checked on the CPU with a stand-in for torch.

A sample must keep the GPU busy while the CPU queues the timed work (issue #22): the
L2 flush and, where needed, a spin kernel are queued, then the start event, the call
and the end event, and only then one wait. A wait between the flush and the start
event (the old order) puts the CPU's launch cost inside the interval.
"""
from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace

import pytest

from kernels_bench import timing


class _Event:
    def __init__(self, log):
        self.log, self.name = log, "event"

    def record(self, stream=None):
        self.log.append(self.name)

    def synchronize(self):
        self.log.append(f"wait {self.name}")

    def elapsed_time(self, other):
        return 0.5  # ms: long enough that the flush covers any queueing in these tests


class _FakeTorch:
    """Records, in order, every call a CUDA timer makes: flush, block, start, end, waits."""

    int8 = "int8"

    def __init__(self):
        self.log: list[str] = []
        log = self.log

        class _Graph:
            def replay(self):
                log.append("replay")

        self.cuda = SimpleNamespace(
            Event=lambda enable_timing=False: _Event(log),
            synchronize=lambda device=None: log.append("synchronize"),
            _sleep=lambda cycles: log.append("block"),
            get_device_properties=lambda device: SimpleNamespace(L2_cache_size=50 << 20, clock_rate=0),
            Stream=lambda device=None: object(),
            stream=lambda s: contextlib.nullcontext(),
            current_stream=lambda device=None: SimpleNamespace(wait_stream=lambda s: None),
            CUDAGraph=_Graph,
            graph=lambda g: contextlib.nullcontext(),
        )

    def empty(self, n, dtype=None, device=None):
        return SimpleNamespace(zero_=lambda: self.log.append("flush"))

    def zeros(self, n, device=None):
        return SimpleNamespace(add_=lambda v: self.log.append("fn"))


class _Clock:
    """A host clock that advances 1 us per read, plus whatever `fn` spends."""

    def __init__(self):
        self.now = 0

    def perf_counter_ns(self):
        self.now += 1_000
        return self.now


@pytest.fixture
def fake(monkeypatch):
    torch = _FakeTorch()
    clock = _Clock()
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(timing, "time", clock)
    return SimpleNamespace(torch=torch, clock=clock)


def _timer(fake, mode, fn=None):
    log = fake.torch.log
    t = timing.CudaTimer(fn or (lambda: log.append("fn")), "cuda:0", mode)
    t.start.name, t.end.name = "start", "end"
    log.clear()  # set-up (calibration) is not a sample
    return t


def _one_sample(fake, t) -> list[str]:
    fake.torch.log.clear()
    assert t.sample_ns() == 500_000 // t.calls  # the events' 0.5 ms, per captured call
    return list(fake.torch.log)


def test_cold_sample_queues_flush_then_events_around_fn_and_waits_once_at_the_end(fake):
    t = _timer(fake, "cold")
    _one_sample(fake, t)
    assert _one_sample(fake, t) == ["flush", "start", "fn", "end", "wait end"]


def test_no_wait_between_the_flush_and_the_start_event(fake):
    t = _timer(fake, "cold")
    for _ in range(3):
        log = _one_sample(fake, t)
        assert log.index("flush") < log.index("start") < log.index("fn") < log.index("end")
        waits = [e for e in log if e == "synchronize" or e.startswith("wait")]
        assert waits == ["wait end"] and log[-1] == "wait end"


def test_first_sample_is_held_behind_a_block_even_in_cold_mode(fake):
    t = _timer(fake, "cold")
    assert _one_sample(fake, t) == ["flush", "block", "start", "fn", "end", "wait end"]


def test_hot_sample_queues_a_block_before_the_start_event_every_time(fake):
    t = _timer(fake, "hot")
    for _ in range(3):
        assert _one_sample(fake, t) == ["block", "start", "fn", "end", "wait end"]


def test_graph_sample_replays_behind_a_block_and_divides_by_the_captured_calls(fake):
    t = _timer(fake, "graph")
    log = _one_sample(fake, t)
    assert log == ["block", "start", "replay", "end", "wait end"]
    assert t.calls == 20


def test_a_sample_queued_slower_than_its_cover_is_retaken_behind_a_longer_block(fake):
    slow = {"on": False}

    def fn():
        fake.torch.log.append("fn")
        if slow["on"]:
            fake.clock.now += 40_000  # the CPU took 40 us to launch: longer than the 10 us block

    t = _timer(fake, "hot", fn)
    block_before = t.block_ns
    slow["on"] = True
    log = _one_sample(fake, t)
    assert log == ["block", "start", "fn", "end", "wait end"] * 2
    assert t.retakes == 1 and t.block_ns > block_before
    assert t.block_ns >= timing.BLOCK_MARGIN * 40_000


def test_a_call_that_waits_for_the_gpu_itself_is_not_chased_with_ever_longer_blocks(fake):
    slow = {"on": False}

    def fn():
        fake.torch.log.append("fn")
        if slow["on"]:
            fake.clock.now += 5_000_000  # 5 ms on the host: fn synchronizes inside

    t = _timer(fake, "hot", fn)
    block_before = t.block_ns
    slow["on"] = True
    for _ in range(3):
        assert _one_sample(fake, t) == ["block", "start", "fn", "end", "wait end"]
    assert t.retakes == 0 and t.uncovered == 3 and t.block_ns == block_before


def test_block_is_sized_from_the_measured_queueing_with_margin(fake):
    t = _timer(fake, "hot")
    assert t.queue_ns == 1_000  # the fake clock moves 1 us between the reads around start, fn, end
    assert t.block_ns == max(timing.BLOCK_MARGIN * t.queue_ns, timing.BLOCK_FLOOR_NS)


def test_cold_mode_needs_no_block_when_the_flush_outlasts_the_queueing(fake):
    t = _timer(fake, "cold")
    assert t.flush_ns == 500_000 and t.block_ns == 0.0


def test_an_unknown_mode_is_refused_with_the_modes_named(fake):
    with pytest.raises(ValueError, match="cold"):
        timing.CudaTimer(lambda: None, "cuda:0", "warm")


def test_launch_overhead_on_cpu_is_the_timer_floor_and_never_negative():
    assert timing.launch_overhead_ns("cpu", calls=20) >= 0


def test_launch_overhead_on_cuda_is_idle_timing_less_covered_timing(fake):
    # The stand-in's events say 0.5 ms both ways: nothing is left once the cover is taken off.
    assert timing.launch_overhead_ns("cuda:0", calls=3) == 0.0


def test_a_simulated_run_row_carries_the_models_launch_cost_and_samples_leave_it_out(tmp_path):
    import pyarrow.parquet as pq

    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.sim import HOST_LAUNCH_NS, KERNEL_FLOOR_NS
    from kernels_bench.suite import load_suite

    suite = load_suite("roofline").filter("noop", None)
    spec = ShardSpec(run_id="r1", shard=0, num_shards=1, pool="sim-h100", device="sim:H100-SXM5-80GB",
                     dt="2026-01-01")
    paths = run_shard(suite, spec, tmp_path, progress=lambda m: None)
    (run,) = pq.read_table(paths["runs"]).to_pylist()
    assert run["launch_overhead_ns"] == HOST_LAUNCH_NS
    lat = pq.read_table(paths["samples"]).column("latency_ns").to_pylist()
    assert lat and max(lat) < HOST_LAUNCH_NS and min(lat) > 0.5 * KERNEL_FLOOR_NS


def test_a_launch_cost_that_cannot_be_measured_is_null_and_said_why(monkeypatch):
    from kernels_bench import runner

    def broken(device):
        raise RuntimeError("CUDA error: no kernel image")

    monkeypatch.setattr(timing, "launch_overhead_ns", broken)
    said = []
    assert runner._launch_overhead_ns("cuda:0", said.append) is None
    assert said == ["launch overhead not measured: RuntimeError: CUDA error: no kernel image"]


def test_a_cpu_run_measures_its_timer_floor():
    from kernels_bench import runner

    assert runner._launch_overhead_ns("cpu", print) > 0


def test_a_flushing_cpu_sample_writes_the_whole_buffer_before_the_clock_starts_and_a_plain_one_writes_none():
    seen = []
    timer = timing.CpuTimer(lambda: seen.append((int(timer.flush_buf.min()), int(timer.flush_buf.max()))), flush=True)
    assert timer.flush_buf.nbytes == 2 * timing.last_level_cache_bytes()
    timer.sample_ns()
    timer.sample_ns()
    assert seen == [(1, 1), (0, 0)]  # every byte written, with a new value each sample
    assert timing.make_timer(lambda: None, "cpu", "cold").flush_buf is None  # the sweeps' CPU timer: warm
    assert timing.make_timer(lambda: None, "cpu", "cold", cpu_flush=True).flush_buf is not None
