"""GPU leasing: concurrent shard processes on one host never hold the same device."""
from __future__ import annotations

import json
import multiprocessing as mp
import time

import pytest

from pipelines.sweep import leasing


def _hold(lock_dir: str, out_path: str, hold_s: float) -> None:
    leasing.LOCK_DIR = __import__("pathlib").Path(lock_dir)
    with leasing.lease_device("pool-a", 2, timeout_s=30) as index:
        start = time.monotonic()
        time.sleep(hold_s)
        with open(out_path, "a") as f:
            f.write(json.dumps({"device": index, "start": start, "end": time.monotonic()}) + "\n")


def test_concurrent_processes_never_share_a_device(tmp_path):
    out = tmp_path / "leases.jsonl"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_hold, args=(str(tmp_path / "locks"), str(out), 0.3)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    leases = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(leases) == 6
    assert {x["device"] for x in leases} == {0, 1}
    for dev in (0, 1):
        spans = sorted((x["start"], x["end"]) for x in leases if x["device"] == dev)
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"device {dev} was leased twice at once"


def test_a_lease_is_released_when_its_holder_dies(tmp_path, monkeypatch):
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_hold, args=(str(tmp_path / "locks"), str(tmp_path / "x"), 60))
    p.start()
    time.sleep(0.5)
    p.kill()
    p.join()
    monkeypatch.setattr(leasing, "LOCK_DIR", tmp_path / "locks")
    with leasing.lease_device("pool-a", 1, timeout_s=5) as index:
        assert index == 0


def test_no_free_device_times_out_with_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(leasing, "LOCK_DIR", tmp_path / "locks")
    with leasing.lease_device("pool-b", 1, timeout_s=5):
        with pytest.raises(TimeoutError, match="no free device in pool 'pool-b'"):
            with leasing.lease_device("pool-b", 1, timeout_s=0.3):
                pass
