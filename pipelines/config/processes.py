"""What the host says about its processes (Linux /proc): state, parent, group, memory.
One reader for the SQL server's pid checks, the test launchers' process groups and the
benchmarks' memory sampling."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GONE = ("Z", "X")  # zombie or dead: exited, holds no resources


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    ppid: int
    pgrp: int
    rss_bytes: int


def stat(pid: int) -> ProcStat | None:
    """The process's /proc/<pid>/stat, or None when it is gone (or /proc is absent)."""
    try:
        # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[21]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, IndexError, ValueError):
        return None


def all_stats() -> list[ProcStat]:
    """Every process visible now (those that end while being read are skipped)."""
    found = (stat(int(p.name)) for p in Path("/proc").glob("[0-9]*"))
    return [s for s in found if s is not None]


def alive(pid: int) -> bool:
    """The pid exists and has not exited (a zombie not yet reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    s = stat(pid)
    return s is None or s.state not in GONE


def cmdline(pid: int) -> bytes:
    """The process's command line (NUL-separated), b'' when it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group."""
    return [s.pid for s in all_stats() if s.pgrp == pgid and s.state not in GONE]


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    stats = all_stats()
    children: dict[int, list[int]] = {}
    for s in stats:
        children.setdefault(s.ppid, []).append(s.pid)
    rss = {s.pid: s.rss_bytes for s in stats}
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def stop_group(pgid: int, *, timeout_s: float = 30.0) -> None:
    """End a process group that a detached service leads: SIGTERM, then SIGKILL to what
    is left after `timeout_s`; returns once none of it is alive."""
    stop_groups([pgid], timeout_s=timeout_s)


def stop_groups(pgids: list[int], *, timeout_s: float = 30.0) -> None:
    """stop_group for several groups at once: each is asked, then the wait is shared."""
    import signal
    import time

    def signal_all(sig: int) -> None:
        for pgid in pgids:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
            except PermissionError:
                try:
                    os.kill(pgid, sig)
                except OSError:
                    pass

    def any_alive() -> bool:
        return any(alive(g) or group_members(g) for g in pgids)

    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    if any_alive():
        signal_all(signal.SIGKILL)
        while any_alive() and time.monotonic() < deadline + 10:
            time.sleep(0.2)


def descendant_groups(pid: int) -> list[int]:
    """The process groups of `pid`'s descendants other than its own: those that left
    its group for one of their own (Airflow 3 starts each task's worker so)."""
    stats = all_stats()
    children: dict[int, list[int]] = {}
    for s in stats:
        children.setdefault(s.ppid, []).append(s.pid)
    pgrp = {s.pid: s.pgrp for s in stats}
    groups, todo = set(), list(children.get(pid, []))
    while todo:
        p = todo.pop()
        groups.add(pgrp.get(p, pid))
        todo += children.get(p, [])
    groups.discard(pgrp.get(pid, pid))
    return sorted(groups)


def run_foreground(cmd: list[str], *, grace_s: float = 10.0) -> int:
    """Run `cmd` as the leader of a process group of its own and return its exit status
    (0 once stopped as asked). Ctrl-C or SIGTERM stops the whole group, and the groups of
    its descendants that left it (stop_groups: SIGTERM, then SIGKILL to what is left after
    `grace_s`). `make airflow` runs `airflow
    standalone` so: stopped with Ctrl-C on its own, its scheduler, DAG processor and
    executor workers were still there two minutes and a second Ctrl-C later
    (apache/airflow#19260)."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(cmd, start_new_session=True)
    asked = []

    def stop(signum, frame) -> None:
        asked.append(signum)
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C does not cut the stop short
        print(f"\nstopping {os.path.basename(cmd[0])} and every process it started (SIGKILL after {grace_s:.0f} s)",
              file=sys.stderr, flush=True)
        # Its descendants' own groups too, found before anything stops: a worker whose
        # parent ends first is adopted by init and out of reach (found walking the docs:
        # a task's `airflow worker` and its Spark JVM outlived make airflow's Ctrl-C).
        stop_groups([proc.pid, *descendant_groups(proc.pid)], timeout_s=grace_s)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, stop)
    status = proc.wait()
    return 0 if asked else status
