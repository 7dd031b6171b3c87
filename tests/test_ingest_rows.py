"""Ingest sets aside, row by row with the field named, what cannot be a measurement and
lands the rest; it converts what converts losslessly and refuses a lossy conversion (#25).
The shard-level promises (never lose, double or mislabel a landed copy) are in
test_ingest_integrity.py, whose helpers these tests share. pyarrow only: no Spark.
"""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config.lake import Lake
from test_ingest import shard_rows, write_shard
from test_ingest_integrity import by_path, by_reason, lake_rows, pandas_style, run


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


# --------------------------------------------------------------------------- 6. impossible values

@pytest.mark.parametrize("field, value, expected", [
    ("latency_ns", 0, "latency_ns 0 is not positive"),
    ("latency_ns", 10**18, "more than an hour per call"),
    ("sm_clock_mhz", 9_000, "sm_clock_mhz 9000 is above 2178 MHz"),
    ("sm_clock_mhz", -5, "sm_clock_mhz -5 is negative"),
    ("power_w", -1.0, "power_w -1.0 is negative"),
    ("temperature_c", -300.0, "temperature_c -300.0 is not a possible reading"),
    ("iteration", -2, "iteration -2 is negative"),
    ("device_kind", "simulated", "simulated and measured data never mix"),
])
def test_an_impossible_sample_is_quarantined_by_row_and_field_and_the_rest_lands(tmp_path, lake, field, value,
                                                                                 expected):
    rows = shard_rows("r1")
    rows["samples"][4][field] = value
    report = run(write_shard(tmp_path / "a", rows), lake)
    issue = next(i for i in report.issues if expected in i.reason)
    assert issue.reason.startswith("row 4:") and f"field {field}" in issue.reason
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 9}


def test_a_float_latency_beyond_int64_is_quarantined_by_row_not_the_whole_file(tmp_path, lake):
    d = write_shard(tmp_path / "a", run_id="r1")
    t = pq.read_table(d / "samples.parquet")
    lat = [float(v) for v in t.column("latency_ns").to_pylist()]
    lat[2] = 1e19
    pq.write_table(t.set_column(t.schema.get_field_index("latency_ns"), "latency_ns", pa.array(lat)),
                   d / "samples.parquet")
    report = run(d, lake)
    assert [i.reason for i in report.issues] == ["row 2: latency_ns 10000000000000000000 overflows int64 "
                                                 "(field latency_ns)"]
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 9}


def test_an_int64_iteration_beyond_int32_is_quarantined_by_row(tmp_path, lake):
    d = write_shard(tmp_path / "a", run_id="r1")
    t = pq.read_table(d / "samples.parquet")
    it = t.column("iteration").to_pylist()
    it[7] = 2**40
    pq.write_table(t.set_column(t.schema.get_field_index("iteration"), "iteration", pa.array(it, pa.int64())),
                   d / "samples.parquet")
    report = run(d, lake)
    assert "row 7: iteration 1099511627776 overflows int32" in report.issues[0].reason
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 9}


def test_repeated_keys_land_once_and_a_repeat_with_other_values_is_quarantined(tmp_path, lake):
    rows = shard_rows("r1")
    rows["samples"] += [dict(rows["samples"][1]), dict(rows["samples"][1]), {**rows["samples"][2], "latency_ns": 7}]
    rows["case_results"].append(dict(rows["case_results"][0]))
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert [i.reason.split(" with")[0] for i in report.issues] == [
        f"row 12: samples key {{'run_id': 'r1', 'case_id': '{rows['samples'][2]['case_id']}', 'attempt': 1, "
        "'iteration': 2} repeats row 2"]
    assert any("2 rows repeat another row exactly" in n for n in report.notices)
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 10}
    assert lake_rows(lake, "case_results") == {("2032-03-01", "dq-a", "r1", 0): 2}


def test_case_results_claiming_samples_the_shard_lacks_refuse_the_shard(tmp_path, lake):
    rows = shard_rows("r1", samples=200)
    rows["samples"] = []
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert "claims n_samples 200 (field n_samples), the samples file holds 0" in report.issues[-1].reason
    assert lake_rows(lake, "runs") == {} and lake_rows(lake, "case_results") == {}


@pytest.mark.parametrize("field, value", [("flops_per_call", -1.0), ("avg_power_w", -3.0), ("n_samples", -1)])
def test_an_impossible_case_result_is_quarantined_with_its_samples(tmp_path, lake, field, value):
    rows = shard_rows("r1")
    rows["case_results"][1][field] = value
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert any(i.reason.startswith(f"row 1: {field}") for i in report.issues)
    assert lake_rows(lake, "case_results") == {("2032-03-01", "dq-a", "r1", 0): 1}
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 5}


def test_a_run_that_finished_before_it_started_is_refused(tmp_path, lake):
    rows = shard_rows("r1")
    rows["runs"][0]["finished_at"] = rows["runs"][0]["started_at"] - dt.timedelta(seconds=1)
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert "finished_at" in report.issues[-1].reason and lake_rows(lake, "runs") == {}


# --------------------------------------------------------------------------- 7. lossless and lossy conversions

def test_lossless_variants_land_and_are_recorded_in_the_report(tmp_path, lake):
    d = write_shard(tmp_path / "a", run_id="r1")
    pandas_style(d)
    report = run(d, lake)
    assert report.ok, report.issues
    notes = " ".join(report.notices)
    for fragment in ("all-null column typed null", "list of key/value pairs", "no time zone, read as UTC",
                     "unit ns read as us", "integer strings read as int64"):
        assert fragment in notes
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 10}
    # ...and are the same shard as the original encoding.
    again = run(write_shard(tmp_path / "b", run_id="r1"), lake)
    assert set(by_path(again).values()) == {"skipped"}


@pytest.mark.parametrize("mutate, expected", [
    (lambda t: t.set_column(t.schema.get_field_index("started_at"), "started_at",
                            pa.array([1_000_000_000_123_456_789], pa.timestamp("ns", tz="UTC"))),
     "sub-microsecond part"),
    (lambda t: t.set_column(t.schema.get_field_index("sm_count"), "sm_count", pa.array([132.5])),
     "132.5 is not a whole number"),
    (lambda t: t.set_column(t.schema.get_field_index("env"), "env",
                            pa.array([[["A", "1"], ["A", "2"]]], pa.list_(pa.list_(pa.string())))),
     "key 'A' appears twice"),
], ids=["ns-timestamp", "fractional-int", "map-duplicate-key"])
def test_lossy_conversions_are_refused_with_column_and_reason(tmp_path, lake, mutate, expected):
    d = write_shard(tmp_path / "a", run_id="r1")
    pq.write_table(mutate(pq.read_table(d / "run.parquet")), d / "run.parquet")
    report = run(d, lake)
    assert expected in by_reason(report, "run.parquet") and "column '" in by_reason(report, "run.parquet")
    assert lake_rows(lake, "runs") == {} and lake_rows(lake, "samples") == {}


# --------------------------------------------------------------------------- 8. found by red-teaming ingest

@pytest.mark.parametrize("kind, field, value", [("samples", "latency_ns", 0), ("case_results", "flops_per_call", -1.0)])
def test_an_impossible_first_copy_of_a_key_does_not_cost_its_valid_repeat_its_place(tmp_path, lake, kind, field,
                                                                                   value):
    rows = shard_rows("r1")
    rows[kind].insert(0, {**rows[kind][2 if kind == "samples" else 0], field: value})
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert [i.reason.split(" (field")[0].split(": ", 1)[1] for i in report.issues] == [
        f"{field} {value} is " + ("not positive" if kind == "samples" else "negative or not finite")]
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 10}
    assert lake_rows(lake, "case_results") == {("2032-03-01", "dq-a", "r1", 0): 2}


def test_a_nan_temperature_or_power_is_no_reading_and_the_sample_lands_with_null(tmp_path, lake):
    rows = shard_rows("r1")
    for r in rows["samples"]:
        r["temperature_c"], r["power_w"] = 61.0, 300.0
    for r in rows["samples"][:3]:
        r["temperature_c"], r["power_w"] = float("nan"), float("nan")
    rows["samples"][3]["power_w"] = float("inf")  # a broken reading, not a missing one
    report = run(write_shard(tmp_path / "a", rows), lake)
    assert [i.reason for i in report.issues] == ["row 3: power_w inf is negative or not finite (field power_w)"]
    assert any("3 rows have NaN in temperature_c, read as no reading (null)" in n for n in report.notices)
    got = pq.read_table(next((lake.landing / "samples").rglob("shard-0.parquet"))).to_pylist()
    assert len(got) == 9 and sum(r["temperature_c"] is None for r in got) == 3


def test_a_date_that_is_not_on_the_calendar_is_an_argument_error(tmp_path, lake):
    from pipelines.landing.ingest import ArgumentError

    for date in ("2026-13-45", "0000-00-00", "2026-02-30"):
        with pytest.raises(ArgumentError, match="is not a calendar date"):
            run(write_shard(tmp_path / "a", run_id="r1"), lake, date=date)
    assert lake_rows(lake, "runs") == {}


def _landed_both_ways(tmp_path, monkeypatch, rows: dict, name: str):
    """Ingest `rows` on the Arrow path and, with `_passing_samples` judging nothing
    (None), on the row-by-row path: (report, landed samples, rows that became Python
    objects) of each, Arrow first."""
    from pipelines.landing import relations

    out = []
    for arrow in (True, False):
        judged = []
        judge = relations._judge
        monkeypatch.setattr(relations, "_judge", lambda shard, kind, rows_, *a: (
            judged.append(len(rows_)) if kind == "samples" else None) or judge(shard, kind, rows_, *a))
        if not arrow:
            monkeypatch.setattr(relations, "_passing_samples", lambda *a: None)
        lake = Lake(tmp_path / f"lake-{name}-{arrow}")
        report = run(write_shard(tmp_path / f"in-{name}-{arrow}", rows), lake)
        files = list((lake.landing / "samples").rglob("*.parquet"))
        out.append((report, pq.read_table(files[0]) if files else None, sum(judged)))
        monkeypatch.undo()
    return out


def test_a_clean_shard_judged_in_arrow_lands_exactly_what_the_row_by_row_path_lands(tmp_path, monkeypatch):
    """filter_samples takes a shard whose every row passes in Arrow without a Python
    object per row (1.2 M rows: 11 s -> 1.5 s, benchmarks/NOTES-scale.md); the row-by-row
    path must land the same table."""
    rows = shard_rows("r-fast", samples=30)
    for i, r in enumerate(rows["samples"]):
        r["temperature_c"] = 50.0 + i % 7
    rows["samples"][3]["temperature_c"] = float("nan")  # a NaN reading lands as null on both paths
    (fast_report, fast, fast_objects), (slow_report, slow, slow_objects) = _landed_both_ways(
        tmp_path, monkeypatch, rows, "clean")
    for report in (fast_report, slow_report):
        assert report.ok and report.counts["landed"] == 3
        assert any("1 rows have NaN in temperature_c" in n for n in report.notices)
    assert (fast_objects, slow_objects) == (0, 60)  # the Arrow path made no row a Python object
    assert fast.num_rows == 60 and fast.equals(slow)
    assert fast.column("temperature_c").null_count == 1


def test_a_shard_with_a_few_bad_rows_judges_only_those_row_by_row_and_lands_what_the_row_path_lands(
        tmp_path, monkeypatch):
    """Rows that pass every rule and whose key no other row has land in Arrow; the
    doubtful ones (a rule failed, a repeated key) are judged row by row, each reason
    naming its row in the file, exactly as when the whole shard goes row by row."""
    rows = shard_rows("r-mixed", samples=40)
    smp = rows["samples"]
    smp[5]["latency_ns"] = 0                                   # a rule fails
    smp[17]["device_kind"] = "simulated"                       # another
    smp.insert(30, dict(smp[29]))                              # an exact repeat: lands once
    smp.insert(50, {**smp[49], "latency_ns": 777})             # the same key, other values: set aside
    smp.insert(60, {**smp[5], "latency_ns": 1005})             # the key of the bad row 5: this copy lands
    (arrow_report, arrow, arrow_objects), (row_report, by_row, row_objects) = _landed_both_ways(
        tmp_path, monkeypatch, rows, "mixed")
    reasons = sorted(i.reason for i in row_report.issues)
    assert sorted(i.reason for i in arrow_report.issues) == reasons and len(reasons) == 3
    assert sorted(r.split(":")[0] for r in reasons) == ["row 17", "row 5", "row 50"]
    assert [n.replace("-True", "") for n in arrow_report.notices] == [n.replace("-False", "") for n in row_report.notices]
    assert any("1 rows repeat another row exactly" in n for n in arrow_report.notices)
    assert arrow.equals(by_row) and arrow.num_rows == 83 - 3 - 1
    assert row_objects == 83 and arrow_objects == 7  # rows 5, 17, 29-30, 49-50 and 60
