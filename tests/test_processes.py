"""`pipelines.config.processes.run_foreground`, which `make airflow` runs `airflow
standalone` under: Ctrl-C stops every process the command started, also those that
ignore it (as `airflow standalone`'s scheduler and workers outlived a Ctrl-C)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from pipelines.config.processes import alive

REPO = Path(__file__).resolve().parent.parent
WRAPPER = ("import sys; from pipelines.config.processes import run_foreground; "
           "sys.exit(run_foreground(sys.argv[1:], grace_s=2))")


def test_ctrl_c_stops_every_process_the_command_started_even_those_that_ignore_it(tmp_path):
    pids = tmp_path / "pids"
    # Two grandchildren that ignore SIGINT and SIGTERM (ignored signals are inherited), and
    # one in a session of its own, as Airflow 3 starts a task's worker.
    script = (f"trap '' INT TERM; sleep 300 & echo $! > {pids}; sleep 300 & echo $! >> {pids}; "
              f"setsid sleep 300 & echo $! >> {pids}; wait")
    wrapper = subprocess.Popen([sys.executable, "-c", WRAPPER, "bash", "-c", script], cwd=REPO,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pids.exists() and len(pids.read_text().split()) == 3):
        assert time.monotonic() < deadline, "the command never started its children"
        time.sleep(0.1)
    children = [int(p) for p in pids.read_text().split()]
    assert all(alive(p) for p in children)

    wrapper.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends the foreground process
    _, err = wrapper.communicate(timeout=30)
    assert wrapper.returncode == 0  # stopped as asked: no "Error" from make
    assert "stopping bash and every process it started" in err
    deadline = time.monotonic() + 5
    while any(alive(p) for p in children) and time.monotonic() < deadline:  # init reaps the orphans
        time.sleep(0.1)
    assert not any(alive(p) for p in children), "a process of the group outlived the stop"


def test_the_commands_own_exit_status_is_returned_when_it_ends_by_itself():
    out = subprocess.run([sys.executable, "-c", WRAPPER, "bash", "-c", "exit 3"], cwd=REPO)
    assert out.returncode == 3
