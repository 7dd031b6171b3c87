"""The terminal of a long in-process run (`perflake demo`, `perflake demo-history`): one
line per step on the terminal, everything else (Airflow's task logs, Spark's JVM, py4j,
the harness's child processes) in one log file under the lake, whose path is printed
once. Verbose mode leaves the output where it was and still prints the step lines.

The redirection is of the file descriptors 1 and 2, not only of sys.stdout: the JVM
and child processes started inside inherit them, so their output lands in the file too.
"""
from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

from pipelines.config.lake import Lake


def log_path(lake: Lake, what: str) -> Path:
    """<lake>/logs/<what>-<UTC time>.log"""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return lake.root / "logs" / f"{what}-{stamp}.log"


class Console:
    """`with Console(path, verbose) as out: out.say(line)`. Quiet (not verbose), the
    process's stdout and stderr go to `path` until the block ends."""

    def __init__(self, path: Path, verbose: bool = False):
        self.path, self.verbose = Path(path), verbose
        self.started = time.monotonic()
        self._saved: tuple[int, int] | None = None
        self._term = None

    def __enter__(self) -> "Console":
        sys.stdout.flush()
        sys.stderr.flush()
        self._term = os.fdopen(os.dup(1), "w", buffering=1)
        if not self.verbose:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._saved = (os.dup(1), os.dup(2))
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        return self

    def __exit__(self, *exc) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        if self._saved:
            os.dup2(self._saved[0], 1)
            os.dup2(self._saved[1], 2)
            for fd in self._saved:
                os.close(fd)
            self._saved = None
        self._term.close()

    def say(self, line: str = "") -> None:
        """One line on the terminal (and, quiet, in the log, so that it reads in order)."""
        self._term.write(line + "\n")
        self._term.flush()
        if not self.verbose:
            print(f"[perflake] {line}", flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def quiet_exit() -> None:
    """py4j logs the Spark gateway's shutdown at exit, after the console is back on the
    terminal: not a step of the run."""
    import logging

    logging.getLogger("py4j").setLevel(logging.WARNING)


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 100 else f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


class TaskLines:
    """An Airflow listener (task SDK hooks) that says one line per finished task
    instance: how far the run is, the task and its shard, its pool, the outcome and how
    long it took. Tasks of pools outside the run (they plan nothing) are not shown."""

    def __init__(self, console: Console, task_ids: list[str], hidden: set[str] = frozenset()):
        self.console = console
        self.shown = [t for t in task_ids if t not in hidden]
        self.hidden = set(hidden)
        self.done: set[str] = set()
        self.last = time.monotonic()
        self.width = max(map(len, self.shown), default=10)

    def _line(self, ti, outcome: str) -> None:
        if ti.task_id in self.hidden:
            return
        self.done.add(ti.task_id)
        # dag.test() runs one task at a time: a task's time is since the previous one
        # ended, Airflow's own work for it (state, XCom, the in-process API) included.
        now = time.monotonic()
        took, self.last = now - self.last, now
        label = getattr(ti, "rendered_map_index", None) or ""
        pool = getattr(ti.task, "pool", None)
        where = f" on pool {pool}" if pool and pool != "default_pool" else ""
        width = len(str(len(self.shown)))
        self.console.say(f"  [{len(self.done):>{width}}/{len(self.shown)}] {ti.task_id:<{self.width}} "
                         f"{label + ' ' if label else ''}{outcome}{where} ({took:.1f} s; "
                         f"{duration(self.console.elapsed())} elapsed)")

    def _hooks(self):
        from airflow.listeners import hookimpl

        lines = self

        class Hooks:
            @hookimpl
            def on_task_instance_success(self, previous_state, task_instance):
                lines._line(task_instance, "ok")

            @hookimpl
            def on_task_instance_skipped(self, previous_state, task_instance):
                lines._line(task_instance, "skipped")

            @hookimpl
            def on_task_instance_failed(self, previous_state, task_instance, error):
                first = str(error).strip().splitlines()[0][:160] if error else "no error given"
                lines._line(task_instance, f"FAILED ({first})")

        return Hooks()

    def __enter__(self) -> "TaskLines":
        from airflow.sdk.listener import get_listener_manager

        self.last = time.monotonic()
        self._registered = self._hooks()
        get_listener_manager().add_listener(self._registered)
        return self

    def __exit__(self, *exc) -> None:
        from airflow.sdk.listener import get_listener_manager

        get_listener_manager().pm.unregister(self._registered)
