"""Ingest attacked a second time (2026-11-27, round 2): nvbench states that repeat a case,
a lake that cannot be written, and the other edges found then. The same promise as
test_ingest_integrity.py (never lose, double or mislabel a row; every file one outcome
and a one-line reason), whose helpers these tests share. pyarrow only: no Spark.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines.config.lake import Lake
from test_ingest import nv_state, nvbench_doc, shard_rows, write_shard
from test_ingest_integrity import lake_rows, run


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def landed_table(lake: Lake, kind: str):
    files = sorted((lake.landing / kind).glob("dt=*/pool=*/run_id=*/shard-*.parquet"))
    assert len(files) == 1, files
    return pq.read_table(files[0])


def test_two_nvbench_states_of_one_case_never_mix_their_samples(tmp_path, lake):
    # The second state of the same case (same axes) is set aside as a repeated key; its
    # samples went through wherever their iteration numbers were new (3..5 here) and
    # landed under the first state's result, which claims 3.
    d = tmp_path / "nv"
    d.mkdir()
    np.array([1e-6] * 3, dtype="<f4").tofile(d / "s0.bin")
    np.array([5e-6] * 6, dtype="<f4").tofile(d / "s1.bin")
    (d / "r.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1e-6, 3, "s0.bin"),
                                                      nv_state("1024", 5e-6, 6, "s1.bin")])))
    report = run([d], lake)
    assert landed_table(lake, "case_results").column("n_samples").to_pylist() == [3]
    assert landed_table(lake, "samples").column("latency_ns").to_pylist() == [1000] * 3
    assert sum(i.rows for i in report.issues if "which was set aside; its samples go with it" in i.reason) == 6


def test_a_full_disk_refuses_the_shard_it_hit_and_never_reports_a_landed_shard_as_not_landed(tmp_path, lake,
                                                                                              monkeypatch):
    import errno

    import pipelines.landing.ingest as ingest_mod
    import pipelines.landing.records as records_mod

    rows = shard_rows("disk-a")
    rows["samples"][0]["latency_ns"] = -1  # one row set aside: its quarantine file is what the full disk hits
    write_shard(tmp_path / "in" / "a", rows)
    write_shard(tmp_path / "in" / "b", run_id="disk-b")
    real = ingest_mod.write_atomic

    def full(table, dst):
        if "disk-b" in str(dst) and "case_results" in str(dst) or "quarantine" in str(dst):
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(table, dst)

    monkeypatch.setattr(ingest_mod, "write_atomic", full)
    monkeypatch.setattr(records_mod, "write_atomic", full)
    report = run([tmp_path / "in"], lake)  # before: OSError out of ingest, no report at all
    outcome = {f.path.split("/in/")[1]: (f.outcome, f.reason) for f in report.files}
    assert outcome["a/samples.parquet"] == ("landed", "")
    assert outcome["b/run.parquet"][0] == "quarantined"
    assert "could not be written to the lake (OSError: [Errno 28]" in outcome["b/run.parquet"][1]
    assert "its samples file landed before the failure" in outcome["b/run.parquet"][1]
    assert any("the quarantine file could not be written" in i.reason for i in report.issues)
    assert set(k[2] for k in lake_rows(lake, "runs")) == {"disk-a"}
    assert lake_rows(lake, "samples")[("2032-03-01", "dq-a", "disk-a", 0)] == 9


def test_a_link_to_a_missing_file_in_a_shard_folder_is_named_never_left_out(tmp_path, lake):
    # Every case failed (n_samples 0): without the samples file the shard looked whole
    # and landed, and the broken samples.parquet link had no outcome at all.
    rows = shard_rows("link-1")
    for r in rows["case_results"]:
        r.update(status="failed", n_samples=0)
    d = write_shard(tmp_path / "in" / "s", rows)
    (d / "samples.parquet").unlink()
    (d / "samples.parquet").symlink_to(tmp_path / "unmounted" / "samples.parquet")
    report = run([tmp_path / "in"], lake)
    outcome = {f.path.split("/in/s/")[1]: (f.outcome, f.reason) for f in report.files}
    assert outcome["samples.parquet"][0] == "quarantined"
    assert "a link to " in outcome["samples.parquet"][1] and "which does not exist" in outcome["samples.parquet"][1]
    assert outcome["run.parquet"][0] == "quarantined" and lake_rows(lake, "runs") == {}


def test_a_second_file_of_a_kind_beside_the_harness_file_is_the_one_named_as_second(tmp_path, lake):
    # 'extra.parquet' (zero rows, samples columns) sorts before samples.parquet: the real
    # samples file was the one called "a second samples file" and refused by name.
    from test_ingest import TABLES

    d = write_shard(tmp_path / "in" / "s", run_id="two-names")
    pq.write_table(TABLES["samples"].arrow_schema(with_partitions=False).empty_table(), d / "extra.parquet")
    report = run([tmp_path / "in"], lake)
    outcome = {f.path.split("/in/s/")[1]: f.reason for f in report.files}
    assert outcome["extra.parquet"].startswith("a second samples file") and "(the first: samples.parquet)" in \
        outcome["extra.parquet"]
    assert "incomplete shard: extra.parquet was refused" in outcome["samples.parquet"]
    assert lake_rows(lake, "samples") == {}
