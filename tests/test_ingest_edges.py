"""Ingest at its edges, each case found by attacking it (2026-11-27): nvbench sample files
that arrive late and GPU names of another form factor, folders reached by links, values
Python or Arrow cannot hold, attempts set aside or cut short. The same promise as
test_ingest_integrity.py (never lose, double or mislabel a row; every file an outcome),
whose helpers these tests share. pyarrow only: no Spark.
"""
from __future__ import annotations

import datetime as dt
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



# --------------------------------------------------------------------------- found by a red team (2026-11-30)

def _quarantined(lake: Lake) -> list[dict]:
    files = sorted((lake.quarantine / "ingest").glob("dt=*/*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def test_an_ingest_killed_after_landing_leaves_its_quarantine_and_manifest_to_the_next_run(tmp_path, lake,
                                                                                          monkeypatch):
    import pipelines.landing.ingest as ingest_module

    rows = shard_rows("r1")
    rows["samples"][0]["latency_ns"] = -1
    src = write_shard(tmp_path / "a", rows)

    def killed(*a, **kw):  # the process dies between publishing the rows and its bookkeeping
        raise SystemExit(137)

    monkeypatch.setattr(ingest_module, "record_landed", killed)
    with pytest.raises(SystemExit):
        run(src, lake, pool="dq-c", force_pool=True)
    monkeypatch.undo()
    assert lake_rows(lake, "samples") and not _quarantined(lake)
    again = run(src, lake)  # the right pool this time: the same rows are skipped where they landed
    assert {f.outcome for f in again.files} == {"skipped"} and not again.ok  # the bad row is still named
    assert any("latency_ns -1 is not positive" in i.reason for i in again.issues)
    assert any("of other hardware than this shard's" in f.reason for f in again.files)
    [bad] = _quarantined(lake)
    assert json.loads(bad["record"])["latency_ns"] == -1
    manifest = [json.loads(p.read_text()) for p in (lake.landing / "_ingested").glob("*.json")]
    assert len(manifest) == 3 and all("--force-pool put it there" in m["override"] for m in manifest)
    run(src, lake)  # once more: the quarantine file is the same one, not a second copy of the row
    copy = write_shard(tmp_path / "renamed", rows)
    run(copy, lake)  # another copy of the same shard under another name: still one quarantined row
    assert len(_quarantined(lake)) == 1


def test_a_killed_writers_temporary_files_are_removed_by_the_next_ingest(tmp_path, lake):
    stale = lake.landing / "_ingested" / ".abc.json.tmp-999999999"
    stale.parent.mkdir(parents=True)
    stale.write_text("{")
    run(write_shard(tmp_path / "a", run_id="r1"), lake)
    assert not stale.exists()


def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, lake, monkeypatch):
    from pipelines.landing.ingest import ArgumentError

    write_shard(tmp_path / "someone-elses", run_id="r1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArgumentError, match="an empty PATH"):
        run([""], lake)
    assert lake_rows(lake, "runs") == {}


@pytest.mark.parametrize("member", ["samples-0.parquet", "samples.parquet"])
def test_a_broken_file_of_a_shards_folder_keeps_the_whole_shard_out(tmp_path, lake, member):
    rows = shard_rows("r1")
    for r in rows["case_results"]:
        r["n_samples"] = None  # nothing would say that samples are missing
    d = write_shard(tmp_path / "a", rows)
    (d / "samples.parquet").unlink()
    good = write_shard(tmp_path / "good", run_id="r1").joinpath("samples.parquet").read_bytes()
    if member == "samples.parquet":
        (d / member).write_text('{"rows": []}')  # JSON under a member's name
    else:
        (d / member).write_bytes(good[: len(good) // 2] + b"PAR1")  # cut short
    report = run(d, lake)
    assert lake_rows(lake, "runs") == {} and not report.ok
    assert any(f"incomplete shard: {member} was refused" in i.reason for i in report.issues), report.issues


def test_an_nvbench_sample_beyond_int64_nanoseconds_is_set_aside_alone(tmp_path, lake):
    d = tmp_path / "nv"
    d.mkdir()
    (d / "result.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1.1e-6, 3, "s0.bin"),
                                                           nv_state("2048", 2e-6, 3, "s1.bin")])))
    np.array([1e-6, 1e11, 1.2e-6], dtype="<f4").tofile(d / "s0.bin")
    np.array([2e-6, 2.1e-6, 2.2e-6], dtype="<f4").tofile(d / "s1.bin")
    report = run([d], lake)
    assert any("does not fit a 64-bit count of nanoseconds (field latency_ns)" in i.reason for i in report.issues)
    assert list(lake_rows(lake, "samples").values()) == [5]
    assert not any("no nvbench JSON of this call names" in i.reason for i in report.issues)


def test_nan_in_a_case_results_energy_or_power_is_no_reading_and_the_case_lands(tmp_path, lake):
    rows = shard_rows("r1")
    rows["case_results"][0]["energy_per_call_j"] = float("nan")
    rows["case_results"][1]["avg_power_w"] = float("nan")
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert report.ok, report.issues
    assert any("NaN in energy_per_call_j, read as no reading" in n for n in report.notices)
    results = pq.read_table(lake.landing_file("case_results", "2032-03-01", "dq-a", "r1", 0)).to_pylist()
    assert [r["energy_per_call_j"] for r in results] == [None, None] and len(results) == 2
    assert list(lake_rows(lake, "samples").values()) == [10]


def test_labels_the_run_contradicts_are_refused_or_said(tmp_path, lake):
    old = shard_rows("r1", started=dt.datetime(1900, 1, 1, tzinfo=dt.timezone.utc))
    report = run(write_shard(tmp_path / "old", old), lake)
    assert "run.started_at 1900-01-01T00:00:00+00:00 is before 2000-01-01" in report.issues[-1].reason
    report = run(write_shard(tmp_path / "a", run_id="r2"), lake, date="2099-01-01")
    assert report.ok and lake_rows(lake, "runs") == {("2099-01-01", "dq-a", "r2", 0): 1}
    assert any("labelled night 2099-01-01 as --date asks, but the run started 2032-03-01" in n for n in report.notices)
    case_status, run_status = shard_rows("r3"), shard_rows("r4")
    case_status["case_results"][0]["status"] = "fine"
    run_status["runs"][0]["status"] = "great"
    report = run([write_shard(tmp_path / "c", case_status), write_shard(tmp_path / "r", run_status)], lake)
    assert any("status 'fine' is not one of ok, failed" in i.reason for i in report.issues)
    assert any("status 'great' is not one of ok, partial, failed" in i.reason for i in report.issues)
    assert [k[2] for k in lake_rows(lake, "runs")].count("r4") == 0


def test_a_hidden_folder_is_named_not_silently_left_out(tmp_path, lake):
    write_shard(tmp_path / "in" / ".uploads" / "s", run_id="r1")
    report = run(tmp_path / "in", lake)
    assert "holds no files but hidden ones, left out" in report.issues[0].reason and ".uploads" in report.issues[0].reason
    write_shard(tmp_path / "in" / "visible", run_id="r2")
    report = run(tmp_path / "in", lake)
    assert report.ok and any("left out 1 hidden entry" in n for n in report.notices)
    assert run(tmp_path / "in" / ".uploads", lake).ok  # named, it is ingested


def test_a_pipe_is_named_as_such_and_a_sample_row_without_a_case_is_named_in_the_refusal(tmp_path, lake):
    import os

    d = write_shard(tmp_path / "a", run_id="r1")
    os.mkfifo(d / "extra.parquet")
    os.mkfifo(tmp_path / "given")
    report = run([d, tmp_path / "given"], lake)
    assert any(i.source.endswith("given") and "a pipe, socket or device" in i.reason for i in report.issues)
    assert any(i.source.endswith("extra.parquet") and "not a file" in i.reason for i in report.issues)
    b = write_shard(tmp_path / "b", run_id="r2")
    samples = pq.read_table(b / "samples.parquet").to_pylist()
    samples[0]["case_id"] = None  # another writer's file, whose schema lets it be null
    pq.write_table(pa.Table.from_pylist(samples), b / "samples.parquet")
    report = run(b, lake)
    assert "1 sample rows could not be read, first: row 0: field case_id is null" in report.issues[-1].reason


@pytest.mark.parametrize("rows, says", [(0, "run.parquet holds no row; a shard has exactly one (a shard that never finished?)"),
                                        (2, "run.parquet holds 2 rows; a shard has exactly one (several shards' run files")])
def test_a_run_file_without_exactly_one_row_is_refused_saying_what_it_holds(tmp_path, lake, rows, says):
    from test_ingest import shard_rows, write_shard

    data = shard_rows("r-runs")
    data["runs"] = data["runs"] * rows
    report = run(write_shard(tmp_path / "in", data), lake)
    assert not report.ok and says in report.issues[0].reason
