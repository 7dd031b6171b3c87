"""Progress of long commands on stderr: steps done, elapsed and time left."""
from __future__ import annotations

import sys
import time
from typing import Callable, TextIO


class Progress:
    """`step(label)` before each of `total` steps prints `[i/total] label (elapsed, ~left)`;
    the estimate is the mean time per finished step times the steps remaining."""

    def __init__(self, total: int, what: str = "", stream: TextIO | None = None, quiet: bool = False,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.what, self.quiet, self.clock = max(1, total), what, quiet, clock
        self.stream = stream
        self.done = 0
        self.started = clock()

    def step(self, label: str) -> None:
        elapsed = self.clock() - self.started
        left = f", ~{_duration(elapsed / self.done * (self.total - self.done))} left" if self.done else ""
        self.done += 1
        if not self.quiet:
            prefix = f"{self.what}: " if self.what else ""
            print(f"{prefix}[{self.done}/{self.total}] {label} ({_duration(elapsed)} elapsed{left})",
                  file=self.stream or sys.stderr, flush=True)

    def finish(self, message: str) -> None:
        if not self.quiet:
            prefix = f"{self.what}: " if self.what else ""
            print(f"{prefix}{message} in {_duration(self.clock() - self.started)}", file=self.stream or sys.stderr,
                  flush=True)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(seconds), 60)
    return f"{m} min {s:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"
