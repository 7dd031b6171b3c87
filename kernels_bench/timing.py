"""Timing one sample: the whole order of a measurement in one readable place.

CPU: the monotonic nanosecond clock around one call.
CUDA (cold, the default): flush L2 by writing a buffer twice its size, synchronise,
record the start event, launch, record the end event, synchronise; flushing happens
outside the timed region. Hot: no flush. Graph: `graph_calls` launches captured in one
CUDA graph, replayed between the events, and the time divided by the count, for kernels
too short for launch overhead to be ignored.
"""
from __future__ import annotations

import time
from typing import Any, Callable


class CpuTimer:
    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def sample_ns(self) -> int:
        t0 = time.perf_counter_ns()
        self.fn()
        return time.perf_counter_ns() - t0


class CudaTimer:
    def __init__(self, fn: Callable[[], Any], device: str, mode: str = "cold", graph_calls: int = 20):
        import torch

        self.torch = torch
        self.fn = fn
        self.mode = mode
        self.calls = 1
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.flush_buf = None
        if mode == "cold":
            l2 = torch.cuda.get_device_properties(device).L2_cache_size
            self.flush_buf = torch.empty(max(2 * l2, 1 << 20), dtype=torch.int8, device=device)
        if mode == "graph":
            self.calls = graph_calls
            stream = torch.cuda.Stream(device)
            with torch.cuda.stream(stream):  # warm up on a side stream, as capture requires
                fn()
            torch.cuda.current_stream(device).wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                for _ in range(graph_calls):
                    fn()
            self.fn = self.graph.replay

    def sample_ns(self) -> int:
        torch = self.torch
        if self.flush_buf is not None:
            self.flush_buf.zero_()
        torch.cuda.synchronize()
        self.start.record()
        self.fn()
        self.end.record()
        self.end.synchronize()
        return int(self.start.elapsed_time(self.end) * 1e6 / self.calls)


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def make_timer(fn: Callable[[], Any], device: str, mode: str = "cold"):
    if device.startswith("cuda"):
        return CudaTimer(fn, device, mode)
    return CpuTimer(fn)
