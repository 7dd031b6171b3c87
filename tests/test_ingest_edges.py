"""Ingest at its edges, each case found by attacking it (2026-11-27): nvbench sample files
that arrive late and GPU names of another form factor, folders reached by links, values
Python or Arrow cannot hold, attempts set aside or cut short. The same promise as
test_ingest_integrity.py (never lose, double or mislabel a row; every file an outcome),
whose helpers these tests share. pyarrow only: no Spark.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config.lake import Lake
from test_ingest import nv_state, nvbench_doc, shard_rows, write_shard
from test_ingest_integrity import by_reason, lake_rows, run


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def test_an_nvbench_sample_file_that_arrives_later_completes_the_run_instead_of_landing_it_twice(tmp_path, lake):
    d = tmp_path / "nv"
    d.mkdir()
    (d / "result.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1.1e-6, 3, "s0.bin"),
                                                           nv_state("2048", 2e-6, 3, "s1.bin")])))
    np.array([1e-6, 1.1e-6, 1.2e-6], dtype="<f4").tofile(d / "s0.bin")  # s1.bin is missing
    first = run([d], lake)
    assert any("s1.bin is missing" in i.reason for i in first.issues)
    np.array([2e-6, 2.1e-6, 2.2e-6], dtype="<f4").tofile(d / "s1.bin")
    second = run([d], lake)
    assert not second.conflicts and any("completes the copy" in n for n in second.notices), second.notices
    assert len(lake_rows(lake, "runs")) == 1  # one run id: the JSON's, whatever the sample files held
    assert list(lake_rows(lake, "case_results").values()) == [2]
    assert list(lake_rows(lake, "samples").values()) == [6]


@pytest.mark.parametrize("name", ["NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA A100-PCIE-40GB"])
def test_an_nvbench_gpu_of_another_form_factor_or_size_is_not_inferred_into_a_pool(tmp_path, lake, name):
    doc = nvbench_doc([nv_state("1024", 1e-6, 3)])
    doc["devices"][0].update(name=name, number_of_sms=None)
    (tmp_path / "result.json").write_text(json.dumps(doc))
    report = run([tmp_path / "result.json"], lake, pool=None)
    assert "unknown pool: no registered pool has gpu_name" in report.issues[-1].reason
    assert lake_rows(lake, "runs") == {}


def test_an_nvbench_gpu_whose_sm_count_is_not_the_skus_is_not_inferred_into_its_pool(tmp_path, lake):
    doc = nvbench_doc([nv_state("1024", 1e-6, 3)])
    doc["devices"][0].update(name="NVIDIA H100", number_of_sms=114)  # a PCIe card's count
    (tmp_path / "result.json").write_text(json.dumps(doc))
    assert "unknown pool" in run([tmp_path / "result.json"], lake, pool=None).issues[-1].reason


def test_a_linked_folder_is_walked_and_a_folder_reached_twice_is_judged_once(tmp_path, lake):
    write_shard(tmp_path / "elsewhere" / "s1", run_id="r1")
    (tmp_path / "up").mkdir()
    write_shard(tmp_path / "up" / "s0", run_id="r0")
    (tmp_path / "up" / "s1").symlink_to(tmp_path / "elsewhere" / "s1")
    (tmp_path / "up" / "loop").symlink_to(tmp_path / "up")
    report = run([tmp_path / "up", tmp_path / "elsewhere" / "s1"], lake)
    assert report.ok and len(report.files) == 6
    assert {k[2] for k in lake_rows(lake, "samples")} == {"r0", "r1"}


def test_a_run_timestamp_python_cannot_hold_refuses_its_shard_by_field_and_the_neighbour_lands(tmp_path, lake):
    write_shard(tmp_path / "in" / "a-good", run_id="r-good")
    bad = write_shard(tmp_path / "in" / "b-bad", run_id="r-bad")
    t = pq.read_table(bad / "run.parquet")
    i = t.schema.get_field_index("finished_at")
    past_9999 = pa.array([253402300800 * 10**6 + 1], pa.int64()).cast(t.schema.field(i).type)
    pq.write_table(t.set_column(i, t.schema.field(i), past_9999), bad / "run.parquet")
    report = run([tmp_path / "in"], lake)
    assert "finished_at cannot be read as a value" in by_reason(report, "b-bad/run.parquet")
    assert {k[2] for k in lake_rows(lake, "samples")} == {"r-good"}


def test_a_file_arrow_cannot_convert_is_refused_and_every_file_of_its_folder_gets_an_outcome(tmp_path, lake):
    d = write_shard(tmp_path / "a", run_id="r1")
    t = pq.read_table(d / "case_results.parquet")
    i = t.schema.get_field_index("params")
    nested = pa.array([[("k", [("x", "y")])]] * t.num_rows, pa.map_(pa.string(), pa.map_(pa.string(), pa.string())))
    pq.write_table(t.set_column(i, pa.field("params", nested.type), nested), d / "case_results.parquet")
    report = run([d], lake)
    assert sorted(Path(f.path).name for f in report.files) == ["case_results.parquet", "run.parquet",
                                                               "samples.parquet"]
    assert "cannot be converted to the landing schema" in by_reason(report, "case_results.parquet")
    assert "\n" not in by_reason(report, "case_results.parquet") and lake_rows(lake, "runs") == {}


def test_nvbench_json_written_as_utf16_lands_like_utf8(tmp_path, lake):
    doc = json.dumps(nvbench_doc([nv_state("1024", 1.1e-6, 3)]))
    (tmp_path / "a.json").write_bytes(doc.encode("utf-16"))  # what Windows PowerShell's `>` writes
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "a.json").write_text(doc)
    assert run([tmp_path / "a.json"], lake).ok
    again = run([tmp_path / "b" / "a.json"], lake)
    assert again.counts["skipped"] == 1 and list(lake_rows(lake, "case_results").values()) == [1]


def test_a_later_attempt_with_a_row_set_aside_never_silently_displaces_a_whole_earlier_one(tmp_path, lake):
    def shard(name, attempt, bad=False):
        rows = shard_rows("r1")
        for kind in rows:
            for r in rows[kind]:
                r["attempt"] = attempt
        if bad:
            rows["samples"][3]["latency_ns"] = -1
        return write_shard(tmp_path / name, rows)

    a1, a2 = shard("a1", 1), shard("a2", 2, bad=True)
    together = run([a2, a1], lake)  # one call: the whole a1 lands, the partial a2 is kept aside
    assert {f.outcome for f in together.files if "/a2/" in f.path} == {"conflict"}
    assert set(pq.read_table(lake.landing_file("samples", "2032-03-01", "dq-a", "r1", 0)).column(
        "attempt").to_pylist()) == {1}
    other = Lake(tmp_path / "other")  # two calls, the partial later attempt first
    assert not run(a2, other).ok and other.landing_file("samples", "2032-03-01", "dq-a", "r1", 0).exists()
    late = run(a1, other)
    assert late.conflicts and "had 1 rows set aside" in late.conflicts[0]["reason"]


def test_after_a_replacement_cut_short_the_earlier_attempt_is_told_to_wait_and_the_later_one_finishes_it(tmp_path,
                                                                                                     lake):
    def shard(name, attempt):
        rows = shard_rows("r1")
        for kind in rows:
            for r in rows[kind]:
                r["attempt"] = attempt
        return write_shard(tmp_path / name, rows)

    a1, a2 = shard("a1", 1), shard("a2", 2)
    assert run(a1, lake).ok
    # attempt 2's replacement killed after its first file (samples land first)
    shutil.copy(a2 / "samples.parquet", lake.landing_file("samples", "2032-03-01", "dq-a", "r1", 0))
    again = run(a1, lake)
    assert again.conflicts and "a replacement by attempt 2 that did not finish" in again.conflicts[0]["reason"]
    assert run(a2, lake).ok
    for kind in ("samples", "case_results", "runs"):
        assert set(pq.read_table(lake.landing_file(kind, "2032-03-01", "dq-a", "r1", 0)).column(
            "attempt").to_pylist()) == {2}

