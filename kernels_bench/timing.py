"""Timing one sample: the whole order of a measurement in one readable place.

CPU: the monotonic nanosecond clock around one call, back to back with warm caches (the
timer mode does not apply). With `cpu_flush` a buffer twice the last-level cache is
written first, outside the interval, so that `fn` reads its operands from memory as a
model's layer does (benchmarks/model_e2e.py: a decode-shaped GEMM's weights fit in a
server CPU's L3, and measured 2.3x faster warm than after 64 MiB of other traffic). It is
off in the sweeps: the flush's ~2 ms per sample ran every demo case into its timeout
(gemm-demo: 6.1 s instead of 3-5 s, a quarter of the samples, `make demo` 130 s).

CUDA: a sample is the kernel's time on the GPU, never the CPU's time to launch it.
CUDA events are timestamps the GPU writes when it reaches them in its stream. If the GPU
is idle when the start event is queued, it writes the start at once and then waits
while the CPU goes through Python, torch's dispatcher and the driver to launch `fn`
(typically 5-20 us), and that wait lands inside the interval. So the timer keeps the
GPU busy while it queues the timed work. One sample, in this order:

1. flush (cold mode only): zero a buffer twice the L2 size. It evicts `fn`'s inputs
   from L2 outside the interval, and it is also GPU work that the CPU queues the next
   steps behind. No synchronize after it: that would idle the GPU and put the launch
   back in the interval (triton's `do_bench` queues its flush, start event, `fn` and
   end event the same way, and synchronizes once at the end).
2. block: a spin kernel (`torch.cuda._sleep`) that holds the stream while the CPU
   queues steps 3-5. nvbench's blocking kernel spins on a host flag that it releases
   after the end event is queued, so its length never needs sizing; torch has no such
   kernel, so the spin is sized instead: `BLOCK_MARGIN` times the CPU time that
   queueing steps 3-5 was measured to take, less what the flush already covers.
   Always in hot and graph modes (nothing else holds the GPU), in cold mode only where
   the flush is shorter than that, and on the first sample of every mode: the first
   call after set-up is the likeliest to meet one-off host costs.
3. record the start event,
4. call `fn`,
5. record the end event: queued while the GPU still works on 1-4, so it is written
   when `fn` ends, not when the CPU gets there,
6. synchronize on the end event: the only wait, once all timed work is queued, so the
   next sample's flush finds a quiet GPU.

Each sample checks itself: the CPU time steps 3-5 took is compared with the GPU work
queued ahead of them (flush + block). Where the CPU was slower (preemption, a page
fault), the launch may have leaked into the interval: the block grows and the sample
is taken again, up to `MAX_RETAKES` times (`CudaTimer.retakes` counts them). A call
whose queueing outlasts any block up to `BLOCK_CEILING_NS` waits for the GPU itself;
such samples, and any still uncovered after the retakes, are kept as they are and
counted in `CudaTimer.uncovered`.

Graph mode: `graph_calls` calls captured in one CUDA graph and replayed between the
events, as in hot mode, the time divided by the count.

The launch cost kept out of the samples is measured on its own, once per run, by
`launch_overhead_ns`; the runner records it in the run's `launch_overhead_ns` column.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

MODES = ("cold", "hot", "graph")
BLOCK_MARGIN = 2.0           # the spin lasts this many times the CPU's measured queueing time
BLOCK_FLOOR_NS = 10_000.0    # and never less: the events' own launches need a few microseconds
# and never more: a call that waits for the GPU itself (a host sync inside `fn`) cannot be
# covered by any block, and growing one for it would only waste GPU time
BLOCK_CEILING_NS = 2_000_000.0
CALIBRATION_CALLS = 5        # queueing times measured at set-up; the block is sized on the slowest
MAX_RETAKES = 3
SLEEP_CALIBRATION_CYCLES = 1_000_000  # about 0.5 ms at H100 clocks: the spin's rate is read off it


class CpuTimer:
    """The host clock around one call: CPU kernels run synchronously inside `fn`. With
    `flush`, a buffer twice the last-level cache is written before each sample, outside
    the interval; without, back-to-back calls with warm caches."""

    def __init__(self, fn: Callable[[], Any], flush: bool = False):
        self.fn = fn
        self.flush_buf = None
        if flush:
            import numpy as np

            self.flush_buf = np.zeros(2 * last_level_cache_bytes(), dtype=np.uint8)
        self._fill = 0

    def sample_ns(self) -> int:
        if self.flush_buf is not None:
            self._fill ^= 1  # a new value each time: every line is written, none can stay clean
            self.flush_buf.fill(self._fill)
        t0 = time.perf_counter_ns()
        self.fn()
        return time.perf_counter_ns() - t0


def last_level_cache_bytes(default: int = 32 << 20) -> int:
    """The largest CPU cache of cpu0 (Linux sysfs), or `default` where it cannot be read."""
    from pathlib import Path

    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        try:
            sizes.append(int(text[:-1]) << {"K": 10, "M": 20, "G": 30}[text[-1]] if text[-1] in "KMG" else int(text))
        except (ValueError, KeyError):
            continue
    return max(sizes, default=default)


class CudaTimer:
    """Times `fn` on one GPU between CUDA events, with its launch kept out of the interval.

    `sample_ns()` promises the GPU time from the start to the end event around one call
    of `fn` (in graph mode, per captured call), L2 flushed beforehand in cold mode, with
    more GPU work queued ahead of the start event than the CPU took to queue the start
    event, `fn` and the end event (checked on each sample; see the module docstring)."""

    def __init__(self, fn: Callable[[], Any], device: str, mode: str = "cold", graph_calls: int = 20):
        if mode not in MODES:
            raise ValueError(f"timer mode {mode!r}: expected one of {MODES}")
        import torch

        self.torch = torch
        self.fn, self.device, self.mode, self.calls = fn, device, mode, 1
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.flush_buf = None
        if mode == "cold":
            l2 = torch.cuda.get_device_properties(device).L2_cache_size
            self.flush_buf = torch.empty(max(2 * l2, 1 << 20), dtype=torch.int8, device=device)
        if mode == "graph":
            self.calls = graph_calls
            self.fn = _capture(torch, fn, device, graph_calls)
        self.retakes = self.uncovered = 0
        self._first = True
        self.cycles_per_ns = self._sleep_rate()
        self.queue_ns = self._slowest_queueing()
        self.flush_ns = self._flush_gpu_ns() if self.flush_buf is not None else 0.0
        self.block_ns = min(self._block_needed(self.queue_ns), BLOCK_CEILING_NS)

    def sample_ns(self) -> int:
        for attempt in range(MAX_RETAKES + 1):
            cover_ns = self._queue_cover()
            queued_ns = self._queue_timed()
            self.end.synchronize()
            if queued_ns <= cover_ns:
                break
            needed = self._block_needed(queued_ns)
            if attempt == MAX_RETAKES or needed > BLOCK_CEILING_NS:
                self.uncovered += 1
                break
            self.retakes += 1
            self.block_ns = max(self.block_ns, needed)
        self._first = False
        return int(self.start.elapsed_time(self.end) * 1e6 / self.calls)

    # -- one sample's steps ------------------------------------------------------------

    def _queue_cover(self) -> float:
        """Steps 1-2: queue the flush and the block; return the GPU ns they hold the stream."""
        cover = 0.0
        if self.flush_buf is not None:
            self.flush_buf.zero_()
            cover += self.flush_ns
        first = min(self._block_needed(self.queue_ns, ignore_flush=True), BLOCK_CEILING_NS) if self._first else 0.0
        block = max(self.block_ns, first)
        if block > 0:
            self._block(block)
            cover += block
        return cover

    def _queue_timed(self) -> int:
        """Steps 3-5: queue start event, `fn` and end event; return the CPU ns that took."""
        t0 = time.perf_counter_ns()
        self.start.record()
        self.fn()
        self.end.record()
        return time.perf_counter_ns() - t0

    def _block(self, ns: float) -> None:
        self.torch.cuda._sleep(max(1, int(ns * self.cycles_per_ns)))

    def _block_needed(self, queue_ns: float, ignore_flush: bool = False) -> float:
        """The spin that covers `queue_ns` of CPU queueing with margin, beyond the flush's
        cover (above BLOCK_CEILING_NS where no block can cover it; callers cap it)."""
        need = max(BLOCK_MARGIN * queue_ns, BLOCK_FLOOR_NS)
        if self.mode == "cold" and not ignore_flush:
            return max(need - self.flush_ns, 0.0)
        return need

    # -- calibration at set-up ---------------------------------------------------------

    def _sleep_rate(self) -> float:
        """Spin cycles per nanosecond. The spin counts SM clock cycles; it is timed behind
        another spin (so its own launch is outside the interval), and the GPU's maximum
        clock, where torch reports it, is a floor: a rate read at a low idle clock would
        make every later spin too short once the clock boosts."""
        torch, c = self.torch, SLEEP_CALIBRATION_CYCLES
        torch.cuda.synchronize()
        torch.cuda._sleep(c)
        self.start.record()
        torch.cuda._sleep(c)
        self.end.record()
        self.end.synchronize()
        measured = c / max(self.start.elapsed_time(self.end) * 1e6, 1.0)
        max_clock_khz = getattr(torch.cuda.get_device_properties(self.device), "clock_rate", 0) or 0
        return max(measured, max_clock_khz / 1e6)

    def _slowest_queueing(self) -> float:
        """The slowest of CALIBRATION_CALLS measured CPU times to queue steps 3-5."""
        times = []
        for _ in range(CALIBRATION_CALLS):
            self.torch.cuda.synchronize()
            times.append(self._queue_timed())
        self.torch.cuda.synchronize()
        return float(max(times))

    def _flush_gpu_ns(self) -> float:
        """GPU time of one flush (the median of three), timed behind a block."""
        times = []
        for _ in range(3):
            self._block(max(BLOCK_MARGIN * self.queue_ns, BLOCK_FLOOR_NS))
            self.start.record()
            self.flush_buf.zero_()
            self.end.record()
            self.end.synchronize()
            times.append(self.start.elapsed_time(self.end) * 1e6)
        return statistics.median(times)


def _capture(torch, fn: Callable[[], Any], device: str, calls: int) -> Callable[[], Any]:
    """`calls` calls of `fn` captured in one CUDA graph; returns its replay."""
    stream = torch.cuda.Stream(device)
    with torch.cuda.stream(stream):  # warm up on a side stream, as capture requires
        fn()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def launch_overhead_ns(device: str, calls: int = 50) -> float:
    """What launching one kernel costs before it can start, in ns: on CUDA, the median
    interval of a one-element add timed from an idle GPU (synchronize, start event,
    launch, end event: the order this module avoids) less the median of the same add
    timed by `CudaTimer` in hot mode, floored at 0. On the CPU, the timer floor: the
    median of an empty call between two clock reads, which every CPU sample includes."""
    if not device.startswith("cuda"):
        timer = CpuTimer(lambda: None)
        return float(statistics.median(timer.sample_ns() for _ in range(calls)))
    import torch

    x = torch.zeros(1, device=device)
    add = lambda: x.add_(1.0)  # noqa: E731  (the cheapest kernel torch launches through its dispatcher)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    idle = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start.record()
        add()
        end.record()
        end.synchronize()
        idle.append(start.elapsed_time(end) * 1e6)
    timer = CudaTimer(add, device, "hot")
    covered = [timer.sample_ns() for _ in range(calls)]
    return max(0.0, statistics.median(idle) - statistics.median(covered))


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def make_timer(fn: Callable[[], Any], device: str, mode: str = "cold", cpu_flush: bool = False):
    """The timer for `device`: `CudaTimer` in `mode` on cuda, `CpuTimer` elsewhere
    (`cpu_flush`: the last-level cache written before each sample)."""
    if device.startswith("cuda"):
        return CudaTimer(fn, device, mode)
    return CpuTimer(fn, cpu_flush)
