"""A shard stopped midway (SIGTERM at a deadline, a task timeout, Ctrl-C) keeps what it
measured: the harness writes the finished cases and records the rest as `stopped`, and
the sweep lands that part before it reports the stop (the first H200 lease lost a whole
48-case shard that ran past its budget).

The suite runs two no-op cases, then one that hangs, then one more no-op (cases run in
case-id order; the ids below are stable hashes of the parameters)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from kernels_bench.runner import STOPPED_EXIT, run_harness, shard_complete
from pipelines.config.lake import Lake

SUITE = """\
name: stop-check
stopping: {min_samples: 5, min_time_s: 0.01, max_noise: 0.5, timeout_s: 0.2, max_samples: 50}
groups:
  - kernel: noop
    dtypes: [fp32]
    axes: {i: [1, 2, 3]}
  - kernel: fault_hang
    dtypes: [fp32]
    axes: {v: [2]}
"""
# Case-id order: noop i=3 (26aa...), noop i=1 (a81c...), the hang (aa27...), noop i=2 (f040...).
FIRST_TWO = {"26aab0b804230c4b", "a81c15d9acce7ba3"}
HANG, LAST = "aa27e85e0571d034", "f0409a0d5d6d9f2d"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def suite(tmp_path) -> Path:
    path = tmp_path / "stop-check.yaml"
    path.write_text(SUITE)
    return path


def _statuses(out: Path) -> dict[str, str]:
    t = pq.read_table(out / "case_results.parquet", columns=["case_id", "status"]).to_pylist()
    return {r["case_id"]: r["status"] for r in t}


def test_a_harness_stopped_by_sigterm_writes_the_cases_it_finished_and_marks_the_rest_stopped(suite, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "kernels_bench", "run", "--suite", str(suite), "--device", "cpu",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the progress line of the second case: the hang has begun
        line = proc.stderr.readline()
        seen.append(line)
        if line.startswith("[2/4]") or not line:
            break
    assert seen[-1].startswith("[2/4]"), "".join(seen)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == STOPPED_EXIT, err
    assert "stopped by SIGTERM after 2 of 4 cases" in err and "(the other cases are recorded as stopped)" in err
    assert _statuses(out) == {**dict.fromkeys(FIRST_TWO, "ok"), HANG: "stopped", LAST: "stopped"}
    samples = pq.read_table(out / "samples.parquet", columns=["case_id"]).column("case_id").to_pylist()
    assert set(samples) == FIRST_TWO and len(samples) >= 10
    run = pq.read_table(out / "run.parquet").to_pylist()[0]
    assert (run["status"], run["cases_planned"], run["cases_ok"]) == ("partial", 4, 2)
    assert not shard_complete(out)


def test_run_harness_at_its_deadline_sends_sigterm_and_waits_for_the_harness_to_write(tmp_path):
    marker = tmp_path / "written"
    child = ("import signal, sys, time\n"
             "def stop(*_):\n"
             f"    open({str(marker)!r}, 'w').write('stopped'); sys.exit({STOPPED_EXIT})\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             "print('started', flush=True)\n"
             "time.sleep(600)\n")
    done = run_harness([sys.executable, "-c", child], timeout_s=3, stop_grace_s=20)
    assert (done.returncode, done.stopped, done.stdout) == (STOPPED_EXIT, "deadline of 3 s reached", "started\n")
    assert marker.read_text() == "stopped"
    deaf = run_harness([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                              "time.sleep(600)"], timeout_s=1, stop_grace_s=1)
    assert deaf.returncode == -signal.SIGKILL  # one that does not answer SIGTERM is killed after the grace


class _TaskTimeout(Exception):
    """Stands for Airflow's AirflowTaskTimeout, which its task runner raises from SIGALRM."""


def test_a_sweep_shard_whose_task_times_out_lands_what_it_measured_then_reraises(suite, tmp_path):
    from pipelines.landing.files import landed_shard_state
    from pipelines.sweep.shards import _land_stopped, run_shard

    lake = Lake(tmp_path / "lake")
    shard = {"run_id": "stop-1", "dt": "2030-02-01", "pool": "cpu", "suite": str(suite), "kernel": None,
             "shard": 0, "num_shards": 1, "landing_shard": 0, "reason": "manual", "stopping": None,
             "inject": None, "cases": None}
    where = {"dt": "2030-02-01", "pool": "cpu", "run_id": "stop-1", "shard": 0}

    def alarm(*_):
        raise _TaskTimeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(35)  # as Airflow's execution_timeout does; the hang has begun by then
    try:
        with pytest.raises(_TaskTimeout):
            run_shard(shard, lake)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    landed = lake.landing_file("case_results", "2030-02-01", "cpu", "stop-1", 0)
    statuses = {r["case_id"]: r["status"] for r in pq.read_table(landed).to_pylist()}
    assert statuses == {**dict.fromkeys(FIRST_TWO, "ok"), HANG: "stopped", LAST: "stopped"}
    assert lake.landing_file("runs", "2030-02-01", "cpu", "stop-1", 0).exists()  # the shard is whole, not pending
    state = landed_shard_state(lake, **where)
    assert state["counts"]["samples"] >= 10

    # A retry that measured no more cases does not replace the part landed before, even
    # with more samples (a case measured longer); one that measured more cases does.
    def retry(name: str, measured: set, extra_samples: int) -> Path:
        """The landed part as attempt 2, having measured `measured` (the rest stopped),
        with `extra_samples` more sample rows."""
        staging = tmp_path / name
        staging.mkdir()
        for kind, file in (("runs", "run.parquet"), ("case_results", "case_results.parquet"),
                           ("samples", "samples.parquet")):
            t = pq.read_table(lake.landing_file(kind, "2030-02-01", "cpu", "stop-1", 0))
            i = t.schema.get_field_index("attempt")
            t = t.set_column(i, t.schema.field(i), pa.array([2] * t.num_rows, t.schema.field(i).type))
            if kind == "case_results":
                status = ["ok" if r["case_id"] in measured else "stopped" for r in t.to_pylist()]
                t = t.set_column(t.schema.get_field_index("status"), "status", pa.array(status))
            if kind == "samples" and extra_samples:
                more = t.slice(0, extra_samples)
                j = more.schema.get_field_index("iteration")
                later = pc.add(more["iteration"], 1000).cast(more.schema.field(j).type)
                t = pa.concat_tables([t, more.set_column(j, more.schema.field(j), later)])
            pq.write_table(t, staging / file)
        return staging

    assert _land_stopped(retry("same-cases-more-samples", FIRST_TWO, 50), lake, where) is None
    assert _land_stopped(retry("fewer-cases-more-samples", set(sorted(FIRST_TWO)[:1]), 50), lake, where) is None
    assert landed_shard_state(lake, **where) == state
    assert _land_stopped(retry("one-more-case", FIRST_TWO | {HANG}, 0), lake, where) == {"measured": 3,
                                                                                          "planned": 4}
    assert landed_shard_state(lake, **where)["attempt"] == 2
