"""Ingest keeps a run whole and each row what it says it is: a run's shards land on one
night, repeats do not pad a short shard, and a case result that is not the case it names
is set aside (red-team findings of 2026-12-01; each test failed before its fix).

pyarrow only: no Spark.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from pipelines.config.lake import Lake
from test_ingest import shard_rows, write_shard
from test_ingest_integrity import lake_rows, run


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def _midnight_shards(tmp_path: Path) -> list[Path]:
    """Two shards of one run, started either side of midnight UTC."""
    out = []
    for shard, started in ((0, dt.datetime(2032, 2, 29, 23, 50, tzinfo=dt.timezone.utc)),
                           (1, dt.datetime(2032, 3, 1, 0, 10, tzinfo=dt.timezone.utc))):
        rows = shard_rows("r-midnight", shard=shard, started=started)
        rows["runs"][0]["num_shards"] = 2
        out.append(write_shard(tmp_path / f"s{shard}", rows))
    return out


def test_the_shards_of_a_run_that_crossed_midnight_land_on_one_night_in_one_call(tmp_path, lake):
    """Each night's mine publishes the cases landed under it: a run split over two nights
    had its cases published on both (found by a red-team: 36 case_stats rows for 18)."""
    report = run(_midnight_shards(tmp_path), lake)
    assert report.ok, report.issues
    assert lake_rows(lake, "samples") == {("2032-02-29", "dq-a", "r-midnight", 0): 10,
                                          ("2032-02-29", "dq-a", "r-midnight", 1): 10}
    assert any("lands on night 2032-02-29 with the other shards of run r-midnight" in n for n in report.notices)


def test_a_shard_ingested_after_its_runs_other_shards_lands_on_their_night(tmp_path, lake):
    first, second = _midnight_shards(tmp_path)
    assert run(first, lake).ok
    report = run(second, lake)
    assert report.ok, report.issues
    assert lake_rows(lake, "runs") == {("2032-02-29", "dq-a", "r-midnight", 0): 1,
                                       ("2032-02-29", "dq-a", "r-midnight", 1): 1}
    assert any("where run r-midnight's other shards landed (it names 2032-03-01)" in n for n in report.notices)


def test_samples_padded_with_repeats_to_the_claimed_count_are_an_incomplete_shard(tmp_path, lake):
    """Case 0 claims 6 samples and holds 3, each twice: a repeat stands in for no sample,
    so the shard is refused as short, not landed with 3 (exit 0 before: a red-team's
    250 of 500 samples, padded with exact repeats, landed as complete)."""
    rows = shard_rows("r-pad", samples=6)
    case0 = rows["samples"][0]["case_id"]
    keep = [r for r in rows["samples"] if r["case_id"] != case0 or r["iteration"] < 3]
    rows["samples"] = keep + [dict(r) for r in keep if r["case_id"] == case0]
    report = run(write_shard(tmp_path / "pad", rows), lake)
    assert not report.ok and lake_rows(lake, "samples") == {}
    assert (f"(case {case0}, status ok) claims n_samples 6 (field n_samples), the samples file holds 3 distinct "
            f"samples for it (6 rows, counting repeats)") in report.issues[0].reason


def test_case_results_whose_ids_do_not_match_their_definitions_are_set_aside_not_published_as_another_case(
        tmp_path, lake):
    """Two case results with their definitions swapped (kernel, dtype, params) kept their
    case ids: a red-team's matmul bf16 row was published as rms_norm fp32. Each such row
    is set aside with its reason, its samples with it; the rest lands."""
    rows = shard_rows("r-swap", cases=3, samples=4, dtype="bf16")
    a, b = rows["case_results"][0], rows["case_results"][1]
    for field in ("kernel", "backend", "dtype", "params"):
        a[field], b[field] = b[field], a[field]
    report = run(write_shard(tmp_path / "swap", rows), lake)
    reasons = [i.reason for i in report.issues]
    assert sum(f"case_id {r['case_id']!r} is not the id of the case the row describes" in why
               for r in (a, b) for why in reasons) == 2
    assert lake_rows(lake, "case_results") == {("2032-03-01", "dq-a", "r-swap", 0): 1}
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r-swap", 0): 4}
