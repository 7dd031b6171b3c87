"""Bad input to `perflake ingest`: each fault is reported naming the file (and row and
field), set aside in quarantine with its reason, and the valid shard beside it lands."""
from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.landing.ingest import ingest
from pipelines.config.lake import Lake
from schemas.tables import QUARANTINE
from test_ingest import NOW, REGISTRY, landed, run_ingest, shard_rows, write_shard


@pytest.fixture
def tmp_lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


@pytest.fixture
def good(tmp_path):
    """A valid shard that goes into every batch beside the bad input."""
    return write_shard(tmp_path / "good", run_id="good-1")


def quarantined(lake: Lake) -> list[dict]:
    files = sorted((lake.quarantine / "ingest").glob("dt=*/*.parquet"))
    for f in files:
        assert pq.read_schema(f).names == QUARANTINE.arrow_schema(with_partitions=False).names
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def good_landed(lake: Lake, report) -> bool:
    return (any(s["run_id"] == "good-1" and s["samples"] == 10 for s in report.landed)
            and "good-1" in landed(lake, "runs").column("run_id").to_pylist())


def issue_for(report, fragment: str):
    hits = [i for i in report.issues if fragment in i.reason]
    assert hits, f"no issue mentions {fragment!r}: {report.issues}"
    return hits[0]


def test_a_file_that_is_neither_parquet_nor_json_is_refused_naming_it(tmp_path, tmp_lake, good):
    bad = tmp_path / "results.csv"
    bad.write_text("run_id,latency_ns\nr,5\n")
    report = run_ingest([bad, good], tmp_lake)
    assert issue_for(report, "not a Parquet or JSON file").source == str(bad)
    assert [q["source"] for q in quarantined(tmp_lake)] == [str(bad)]
    assert good_landed(tmp_lake, report)


def test_a_truncated_parquet_file_is_refused_and_nothing_of_its_shard_lands(tmp_path, tmp_lake, good):
    d = write_shard(tmp_path / "bad", run_id="bad-1")
    data = (d / "samples.parquet").read_bytes()
    (d / "samples.parquet").write_bytes(data[: len(data) // 2])
    report = run_ingest([d, good], tmp_lake)
    assert issue_for(report, "truncated Parquet").source == str(d / "samples.parquet")
    assert not any(s["run_id"] == "bad-1" for s in report.landed)
    assert landed(tmp_lake, "runs").column("run_id").to_pylist() == ["good-1"]
    outcomes = {f.path: f.outcome for f in report.files}
    assert outcomes[str(d / "run.parquet")] == outcomes[str(d / "samples.parquet")] == "quarantined"
    assert good_landed(tmp_lake, report)


def test_a_corrupt_parquet_file_is_refused(tmp_path, tmp_lake, good):
    d = write_shard(tmp_path / "bad", run_id="bad-1")
    data = bytearray((d / "samples.parquet").read_bytes())
    data[-40:-8] = b"\xff" * 32  # footer metadata garbled, magic bytes intact
    (d / "samples.parquet").write_bytes(bytes(data))
    report = run_ingest([d, good], tmp_lake)
    assert issue_for(report, "not a readable Parquet file").source == str(d / "samples.parquet")
    assert good_landed(tmp_lake, report)


@pytest.mark.parametrize("drift, expected", [
    (lambda t: t.drop(["latency_ns"]), "missing column 'latency_ns'"),
    (lambda t: t.append_column("gpu_temp_f", pa.array([1.0] * t.num_rows)), "unexpected columns ['gpu_temp_f']"),
    (lambda t: t.set_column(t.schema.get_field_index("latency_ns"), "latency_ns",
                            pa.array([f"{v / 1000} us" for v in t.column("latency_ns").to_pylist()])),
     "column 'latency_ns': row 0: string '1.0 us' is not an integer"),
], ids=["missing", "extra", "mistyped"])
def test_schema_drift_names_the_column_and_the_file(tmp_path, tmp_lake, good, drift, expected):
    d = write_shard(tmp_path / "bad", run_id="bad-1")
    pq.write_table(drift(pq.read_table(d / "samples.parquet")), d / "samples.parquet")
    report = run_ingest([d, good], tmp_lake)
    issue = issue_for(report, expected)
    assert issue.source == str(d / "samples.parquet") and "schema drift" in issue.reason
    assert good_landed(tmp_lake, report)


@pytest.mark.parametrize("field, value", [("kernel", "flash_mla"), ("dtype", "int4")])
def test_unknown_kernel_or_dtype_quarantines_that_case_and_its_samples(tmp_path, tmp_lake, field, value):
    d = write_shard(tmp_path / "mixed", run_id="mixed-1", **{field: value})
    report = run_ingest([d], tmp_lake)
    issue = issue_for(report, f"unknown {field} {value!r}")
    assert "row 0" in issue.reason and f"(field {field})" in issue.reason
    reasons = [q["reason"] for q in quarantined(tmp_lake)]
    assert sum(f"unknown {field}" in r for r in reasons) == 1
    assert sum("no accepted case result" in r for r in reasons) == 5  # that case's samples
    assert report.landed[0]["case_results"] == 1 and report.landed[0]["samples"] == 5  # the valid case


def test_a_shard_whose_hardware_matches_no_pool_is_refused_and_others_land(tmp_path, tmp_lake, good):
    rows = shard_rows("b200-1")
    rows["runs"][0]["gpu_sku"] = "B200"
    d = write_shard(tmp_path / "b200", rows)
    report = ingest([d, good], tmp_lake, registry=REGISTRY, now=NOW)  # no --pool: inferred per shard
    assert "sku 'B200'" in issue_for(report, "unknown pool").reason
    assert any(q["reason"].startswith("unknown pool") for q in quarantined(tmp_lake))
    assert good_landed(tmp_lake, report)


def test_an_unknown_pool_option_is_an_error_before_anything_lands(tmp_lake, good):
    with pytest.raises(ValueError, match="unknown pool 'h100-lab'"):
        run_ingest([good], tmp_lake, pool="h100-lab")
    assert not tmp_lake.landing.exists()


@pytest.mark.parametrize("kw", [{"pool": "../../etc"}, {"date": "2032-03-01/../x"}])
def test_names_that_become_paths_are_validated(tmp_lake, good, kw):
    with pytest.raises(ValueError, match="not a valid name|not YYYY-MM-DD"):
        run_ingest([good], tmp_lake, **kw)


def test_a_run_id_that_would_escape_the_landing_zone_is_refused(tmp_path, tmp_lake, good):
    d = write_shard(tmp_path / "evil", shard_rows("../../evil"))
    report = run_ingest([d, good], tmp_lake)
    assert "run.run_id (row 0) '../../evil' is not a valid name" in issue_for(report, "not a valid name").reason
    assert not list(tmp_lake.root.rglob("*evil*"))
    assert good_landed(tmp_lake, report)


def test_a_duplicate_upload_is_reported_and_not_landed_twice(tmp_path, tmp_lake, good):
    first = run_ingest([good], tmp_lake)
    copy = write_shard(tmp_path / "copy", run_id="good-1")  # same bytes under another path
    fresh = write_shard(tmp_path / "fresh", run_id="fresh-1")
    second = run_ingest([copy, fresh], tmp_lake, date="2032-03-05")
    assert first.landed and len(second.duplicates) == 3
    assert all("already ingested" in d for d in second.duplicates)
    assert [s["run_id"] for s in second.landed] == ["fresh-1"]
    assert landed(tmp_lake, "runs", "2032-03-05").column("run_id").to_pylist() == ["fresh-1"]


def test_an_empty_file_is_refused(tmp_path, tmp_lake, good):
    empty = tmp_path / "empty" / "samples.parquet"
    empty.parent.mkdir()
    empty.touch()
    report = run_ingest([empty, good], tmp_lake)
    assert issue_for(report, "empty file (0 bytes)").source == str(empty)
    assert good_landed(tmp_lake, report)


def test_an_empty_shard_is_refused_and_its_run_row_quarantined(tmp_path, tmp_lake, good):
    rows = shard_rows("empty-1")
    rows["case_results"], rows["samples"] = [], []
    report = run_ingest([write_shard(tmp_path / "empty", rows), good], tmp_lake)
    issue_for(report, "empty shard: no case results")
    assert [json.loads(q["record"])["run_id"] for q in quarantined(tmp_lake)] == ["empty-1"]
    assert good_landed(tmp_lake, report)


def test_samples_of_another_run_are_quarantined_naming_row_and_field(tmp_path, tmp_lake):
    rows = shard_rows("mix-1")
    rows["samples"][3]["run_id"] = "other-run"
    report = run_ingest([write_shard(tmp_path / "mix", rows)], tmp_lake)
    issue = issue_for(report, "does not match the shard's run metadata")
    assert "row 3: samples.run_id 'other-run'" in issue.reason and issue.rows == 1
    assert [json.loads(q["record"])["run_id"] for q in quarantined(tmp_lake)] == ["other-run"]
    assert report.landed[0]["samples"] == 9


def test_samples_without_any_run_metadata_are_quarantined(tmp_path, tmp_lake, good):
    d = write_shard(tmp_path / "orphan", run_id="orphan-1")
    (d / "run.parquet").unlink()
    report = run_ingest([d, good], tmp_lake)
    issue_for(report, "no run metadata")
    assert sum(json.loads(q["record"]).get("run_id") == "orphan-1" for q in quarantined(tmp_lake)) == 12
    assert good_landed(tmp_lake, report)


def test_a_run_in_the_future_is_refused_with_the_field_named(tmp_path, tmp_lake, good):
    d = write_shard(tmp_path / "future", run_id="future-1", started=NOW + dt.timedelta(days=3))
    report = run_ingest([d, good], tmp_lake)
    assert "run.started_at 2032-03-04" in issue_for(report, "is in the future").reason
    assert sum(q["reason"].startswith("run.started_at") for q in quarantined(tmp_lake)) == 13
    assert good_landed(tmp_lake, report)


def test_truncated_json_is_refused(tmp_path, tmp_lake, good):
    bad = tmp_path / "nvbench.json"
    bad.write_text('{"benchmarks": [{"name": "copy", "states": [')
    report = run_ingest([bad, good], tmp_lake)
    assert issue_for(report, "not valid JSON").source == str(bad)
    assert good_landed(tmp_lake, report)


def test_a_missing_path_is_reported(tmp_path, tmp_lake, good):
    report = run_ingest([tmp_path / "nope", good], tmp_lake)
    assert issue_for(report, "no such file").source == str(tmp_path / "nope")
    assert good_landed(tmp_lake, report)


def test_nan_and_infinite_float_latencies_are_quarantined_by_row_and_the_rest_of_the_file_lands(tmp_path, tmp_lake,
                                                                                                 good):
    # Another harness writes float nanoseconds: finite values are rounded and land; NaN and
    # infinity cannot be stored as integer nanoseconds, zero and negative ones are not
    # possible timings: each row is set aside here with its row and field named.
    d = write_shard(tmp_path / "floats", run_id="floats-1")
    t = pq.read_table(d / "samples.parquet")
    values = [1000.4, float("nan"), 1010.0, float("inf"), -3.0, 0.0, 1020.6, float("-inf"), 990.0, 1001.0]
    i = t.schema.get_field_index("latency_ns")
    pq.write_table(t.set_column(i, pa.field("latency_ns", pa.float64(), False), pa.array(values)), d / "samples.parquet")
    report = run_ingest([d, good], tmp_lake)
    reasons = sorted(i.reason for i in report.issues)
    assert reasons == ["row 1: latency_ns is nan (field latency_ns): not finite",
                       "row 3: latency_ns is inf (field latency_ns): not finite",
                       "row 4: latency_ns -3 is not positive (field latency_ns)",
                       "row 5: latency_ns 0 is not positive (field latency_ns)",
                       "row 7: latency_ns is -inf (field latency_ns): not finite"]
    assert all(i.source == f"{d / 'samples.parquet'} [samples]" for i in report.issues)
    records = {q["reason"].split(":")[0]: json.loads(q["record"]) for q in quarantined(tmp_lake)}
    assert {row: (r["iteration"], r["latency_ns"]) for row, r in records.items()} == {
        "row 1": (1, "nan"), "row 3": (3, "inf"), "row 4": (4, -3), "row 5": (0, 0),
        "row 7": (2, "-inf")}  # row 7: the second case's iteration 2
    lat = pq.read_table(tmp_lake.landing_file("samples", "2032-03-01", "dq-a", "floats-1", 0)).column("latency_ns")
    assert lat.type == pa.int64() and lat.to_pylist() == [1000, 1010, 1021, 990, 1001]
    assert any("rounded to whole ns" in n for n in report.notices)
    assert good_landed(tmp_lake, report)


def test_nan_and_infinite_nvbench_sample_times_are_quarantined_and_the_other_samples_land(tmp_path, tmp_lake, good):
    from test_ingest import nv_state, nvbench_doc

    d = tmp_path / "nv"
    d.mkdir()
    np.array([1e-6, np.nan, 1.2e-6, np.inf, 1.1e-6], dtype="<f4").tofile(d / "s0.bin")
    (d / "result.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1.1e-6, 5, "s0.bin")])))
    report = run_ingest([d, good], tmp_lake)
    reasons = sorted(i.reason for i in report.issues)
    assert len(reasons) == 2 and all("nv/cold/sample_times" in r and "latency_ns is not finite" in r for r in reasons)
    assert "sample 1 of nv/cold/sample_times is nan" in reasons[0] and "sample 3" in reasons[1]
    assert sorted(q["reason"] for q in quarantined(tmp_lake)) == reasons
    nv = next(s for s in report.landed if s["run_id"].startswith("nvbench-"))
    assert (nv["samples"], nv["case_results"]) == (3, 1)
    assert good_landed(tmp_lake, report)
