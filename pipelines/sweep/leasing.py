"""GPU leasing on a worker host: one shard per device, whatever the scheduler does.

A lease is an exclusive, non-blocking `flock` on a per-device lock file; the kernel
releases it if the holder dies, so a crashed shard never leaks a GPU.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from pipelines.config.lake import safe_name

LOCK_DIR = Path(os.environ.get("PERFLAKE_LOCK_DIR", "/tmp/perflake-device-locks"))


@contextlib.contextmanager
def lease_device(pool: str, count: int, timeout_s: float = 3600.0, poll_s: float = 0.2):
    """Yield the index of a free device of `pool` (0..count-1), held until exit."""
    safe_name(pool, "pool")  # it names the lock file
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    while True:
        for index in range(count):
            fd = os.open(LOCK_DIR / f"{pool}-{index}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                yield index
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no free device in pool {pool!r} ({count} devices) after {timeout_s:.0f} s")
        time.sleep(poll_s)
