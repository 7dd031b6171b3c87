"""Faults while landing, with real writer processes: one killed (SIGKILL) in the middle
of a write, a shard retried after a partial landing, and two writers at the same time.

Readers are the mining job's own: its file listing (landed_files), its file checks
(split_files), and the Spark read with the committed-shard filter (pipelines.mining.commit).
A writer is caught in the middle of its write by watching for its temporary file and
stopping it (SIGSTOP) the moment it appears, then killed (SIGKILL); big shards make that
window tens of milliseconds, and a try that finishes before it is caught is repeated.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.landing.checks import split_files
from pipelines.config.lake import Lake
from pipelines.landing.files import KINDS, LAND_ORDER, land_shard
from jobs.mine import landed_files, read_landed
from pipelines.mining.commit import uncommitted_shards, with_shard_key
from schemas.tables import CASE_RESULTS, RUNS, SAMPLES
from test_ingest import shard_rows, write_shard

REPO = Path(__file__).resolve().parent.parent
DT, POOL, RUN = "2034-08-01", "fault7", "f7-run"
TABLES = {"samples": SAMPLES, "case_results": CASE_RESULTS, "runs": RUNS}

# A writer process: lands one staged shard `repeat` times, after `go` exists ("-": at once).
WRITER = """
import os, sys, time
from pathlib import Path
from pipelines.config.lake import Lake
from pipelines.landing.files import land_shard
root, staging, dt, pool, run_id, shard, go, repeat = sys.argv[1:]
Path(staging, ".ready").touch()
while go != "-" and not os.path.exists(go):
    time.sleep(0.001)
for _ in range(int(repeat)):
    land_shard(Path(staging), Lake(Path(root)), dt=dt, pool=pool, run_id=run_id, shard=int(shard))
"""


def staged(directory: Path, *, attempt: int = 1, samples: int = 8, results: int = 2, seed: int = 0) -> Path:
    """A harness output directory of run RUN: `results` case results (the first two
    real, the rest copies with random case ids) and `samples` samples with random
    latencies, so that big shards stay big on disk."""
    rows = shard_rows(RUN, cases=2, samples=1)
    for kind in rows.values():
        for r in kind:
            r["attempt"] = attempt
    write_shard(directory, rows)
    rng = np.random.default_rng(seed)

    def inflate(name: str, n: int, columns: dict) -> None:
        t = pq.read_table(directory / name)
        t = t.take(pa.array(np.arange(n) % t.num_rows))
        for col, values in columns.items():
            i = t.schema.get_field_index(col)
            t = t.set_column(i, t.schema.field(col), pa.array(values, t.schema.field(col).type))
        pq.write_table(t, directory / name)

    inflate("samples.parquet", samples, {"iteration": np.arange(samples),
                                         "latency_ns": rng.integers(1_000, 10**12, samples)})
    if results > 2:
        ids = [rows["case_results"][i]["case_id"] for i in range(2)]
        ids += [rng.bytes(16).hex() for _ in range(results - 2)]
        inflate("case_results.parquet", results, {"case_id": ids})
    return directory


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_writer_outlives_its_test():
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:  # a failed test left it stopped or running
            proc.kill()
            proc.communicate()


def writer(lake: Lake, staging: Path, *, shard: int = 0, dt: str = DT, pool: str = POOL, go: str = "-",
           repeat: int = 1) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(lake.root), str(staging), dt, pool, RUN, str(shard),
                             go, str(repeat)], env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _STARTED.append(proc)
    return proc


def tmp_files(lake: Lake, kind: str, pid: int | None = None) -> list[Path]:
    d = lake.landing_file(kind, DT, POOL, RUN, 0).parent
    prefix = ".shard-0.parquet.tmp-" + (str(pid) if pid else "")
    return [d / n for n in os.listdir(d) if n.startswith(prefix)] if d.is_dir() else []


def stop_while_writing(lake: Lake, staging: Path, kind: str) -> subprocess.Popen | None:
    """Start a writer of `staging` and stop it (SIGSTOP) the moment its temporary `kind`
    file exists. None if it finished before it was caught."""
    proc = writer(lake, staging)
    while proc.poll() is None:
        if tmp_files(lake, kind, proc.pid):
            os.kill(proc.pid, signal.SIGSTOP)
            return proc
    proc.communicate()
    return None


def caught(tmp_path: Path, kind: str, *, samples: int, results: int = 2, before=None):
    """(lake, staging, stopped writer): a fresh lake in which a writer of shard 0 was
    stopped in the middle of writing `kind`."""
    for try_ in range(6):
        lake = Lake(tmp_path / f"lake{try_}")
        if before:
            before(lake)
        staging = staged(tmp_path / f"writer{try_}", samples=samples, results=results)
        proc = stop_while_writing(lake, staging, kind)
        if proc is not None:
            return lake, staging, proc
        samples, results = samples * 2, (results * 2 if results > 2 else results)
    pytest.fail("the writer always finished before it could be caught in the middle of its write")


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def run_writer(lake: Lake, staging: Path, **kw) -> None:
    proc = writer(lake, staging, **kw)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]


def visible(lake: Lake) -> dict[str, list[Path]]:
    """What the mining job would read for DT: landed files that pass its file checks."""
    return {kind: split_files(landed_files(lake, kind, DT), TABLES[kind])[0] for kind in KINDS}


def pending_shards(spark, lake: Lake) -> list[int]:
    """Shard numbers the mining job would withhold as not committed."""
    files = visible(lake)
    frames = {k: with_shard_key(read_landed(spark, f, TABLES[k])) for k, f in files.items() if f}
    parts = [frames[k] for k in ("case_results", "samples") if k in frames]
    return sorted(r._shard_file for r in uncommitted_shards(frames["runs"], *parts).collect())


def same_rows(landed: Path, staged_file: Path) -> bool:
    return pq.read_table(landed).equals(pq.read_table(staged_file))


# --------------------------------------------------------------------------- a writer killed mid-write

def test_a_writer_killed_mid_write_leaves_nothing_visible_and_the_rerun_lands_the_shard(tmp_path, spark):
    lake, staging, proc = caught(tmp_path, "samples", samples=1_500_000)
    kill(proc)
    partial = tmp_files(lake, "samples")
    assert len(partial) == 1 and partial[0].stat().st_size <= (staging / "samples.parquet").stat().st_size
    assert visible(lake) == {"samples": [], "case_results": [], "runs": []}
    assert not [p for p in lake.landing.rglob("*.parquet") if not p.name.startswith(".")]

    run_writer(lake, staging)  # the re-run
    for kind, name in KINDS.items():
        assert same_rows(lake.landing_file(kind, DT, POOL, RUN, 0), staging / name)
    assert tmp_files(lake, "samples") == []  # the dead writer's temporary file is cleared
    assert read_landed(spark, visible(lake)["samples"], SAMPLES).count() == pq.ParquetFile(
        staging / "samples.parquet").metadata.num_rows


def test_a_shard_retried_after_a_partial_landing_holds_exactly_the_rows_of_one_clean_run(tmp_path, spark):
    def shard_1_landed(lake):  # a complete shard beside it, so that the date has something to mine
        land_shard(staged(tmp_path / f"s1-{lake.root.name}", seed=1), lake, dt=DT, pool=POOL, run_id=RUN, shard=1)

    lake, _, proc = caught(tmp_path, "case_results", samples=8, results=400_000, before=shard_1_landed)
    kill(proc)
    # Samples landed, the run row did not: the mining job withholds shard 0 and reads shard 1.
    assert [len(visible(lake)[k]) for k in LAND_ORDER] == [2, 1, 1]
    assert pending_shards(spark, lake) == [0]

    retry = staged(tmp_path / "retry", attempt=2, samples=5, seed=2)
    run_writer(lake, retry)
    for kind, name in KINDS.items():
        assert same_rows(lake.landing_file(kind, DT, POOL, RUN, 0), retry / name)
    assert pending_shards(spark, lake) == []
    rows = read_landed(spark, visible(lake)["samples"], SAMPLES).groupBy("attempt").count().collect()
    assert sorted((r.attempt, r["count"]) for r in rows) == [(1, 8), (2, 5)]  # shard 1, and the retry of shard 0


# --------------------------------------------------------------------------- two writers at once

def start_together(procs_and_stagings: list[tuple], go: Path) -> None:
    deadline = time.monotonic() + 60
    while not all((s / ".ready").exists() for _, s in procs_and_stagings):
        assert time.monotonic() < deadline, "writers did not start"
        time.sleep(0.01)
    go.touch()
    for proc, _ in procs_and_stagings:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()[-2000:]


def test_two_writers_of_different_partitions_at_once_both_land(tmp_path):
    lake, go = Lake(tmp_path / "lake"), tmp_path / "go"
    nightly = staged(tmp_path / "nightly", samples=300_000, seed=3)
    backfill = staged(tmp_path / "backfill", samples=300_000, seed=4)
    start_together([(writer(lake, nightly, go=str(go), repeat=3), nightly),
                    (writer(lake, backfill, dt="2034-08-02", go=str(go), repeat=3), backfill)], go)
    for dt, staging in (("2034-08-01", nightly), ("2034-08-02", backfill)):
        for kind, name in KINDS.items():
            assert same_rows(lake.landing_file(kind, dt, POOL, RUN, 0), staging / name)


def test_two_writers_of_the_same_shard_end_with_one_complete_version_and_no_duplicates(tmp_path, spark):
    # A zombie attempt caught half way (its samples landed, its case results being
    # written) while the retry of the same shard lands: the retry waits for the
    # zombie's landing to finish, then replaces all of it.
    lake, _, proc = caught(tmp_path, "case_results", samples=8, results=400_000)
    retry = staged(tmp_path / "retry", attempt=2, samples=5, seed=7)
    second = writer(lake, retry)
    deadline = time.monotonic() + 60
    while not (retry / ".ready").exists():  # started, about to land
        assert time.monotonic() < deadline and second.poll() is None
        time.sleep(0.01)
    time.sleep(1.0)  # landing 5 samples takes milliseconds
    assert second.poll() is None, "the retry did not wait for the other writer of its shard"
    os.kill(proc.pid, signal.SIGCONT)
    for p in (proc, second):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-2000:]
    landed = {kind: lake.landing_file(kind, DT, POOL, RUN, 0) for kind in KINDS}
    for kind, name in KINDS.items():  # all three files of one writer: the one that landed last
        assert same_rows(landed[kind], retry / name)
    assert [len(v) for v in visible(lake).values()] == [1, 1, 1]
    assert not [p for p in lake.landing.rglob(".*.tmp-*")]
    assert pending_shards(spark, lake) == []
    samples = read_landed(spark, visible(lake)["samples"], SAMPLES)
    assert samples.count() == samples.dropDuplicates(["run_id", "case_id", "attempt", "iteration"]).count() == \
        pq.ParquetFile(retry / "samples.parquet").metadata.num_rows
