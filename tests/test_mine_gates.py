"""The mining job with its data-quality gates, end to end on the test lake: results
ingested with `perflake ingest` and shards landed as workers land them, mined three
times for one date.

1. pool dq7-a: an outside harness's Parquet with float latencies (NaN, inf, -5, 0 among
   valid ones) goes through `perflake ingest` and `perflake mine`;
2. pool dq7-a gets a broken shard (every latency negative), pool dq7-b a good shard with
   an unknown run reason (a soft expectation) and a shard whose worker died before its
   run row landed; the Airflow task body mines the date and fails;
3. the broken shard and the dead worker's shard are re-landed; `perflake mine` publishes.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.landing.files import atomic_copy, land_shard
from test_ingest import shard_rows, write_shard

DT = "2034-07-01"
FAILED_SAMPLES_BATCH = f"samples [samples dt={DT} pool=dq7-a]"
LATENCY_GATE = "expect_column_values_to_be_between(latency_ns)"
POOLS_YAML = "dq7-a: {sku: H100-SXM5-80GB, device_kind: gpu, slots: 1}\n"


def cli(*argv: str) -> tuple[int, str]:
    from pipelines.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(argv))
    return rc, out.getvalue()


def float_latency_shard(directory: Path, run_id: str) -> Path:
    """A shard whose samples hold float nanoseconds, two of them not finite and two not
    positive, one of each per case; 148 valid samples per case."""
    # Measured an hour ago (ingest refuses runs from the future) and filed under DT by --date.
    rows = shard_rows(run_id, samples=150, started=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
    bad = {(0, 3): math.nan, (0, 4): -5.0, (1, 3): math.inf, (1, 4): 0.0}
    cases = [r["case_id"] for r in rows["case_results"]]
    latencies = [bad.get((cases.index(s["case_id"]), s["iteration"]), s["latency_ns"] + 0.4) for s in rows["samples"]]
    write_shard(directory, rows)
    t = pq.read_table(directory / "samples.parquet")
    i = t.schema.get_field_index("latency_ns")
    pq.write_table(t.set_column(i, pa.field("latency_ns", pa.float64(), False), pa.array(latencies, pa.float64())),
                   directory / "samples.parquet")
    return directory


def land(tmp: Path, lake, rows: dict, pool: str, shard: int = 0) -> None:
    staging = write_shard(tmp / f"{pool}-{rows['runs'][0]['run_id']}-{rows['runs'][0]['attempt']}", rows)
    land_shard(staging, lake, dt=DT, pool=pool, run_id=rows["runs"][0]["run_id"], shard=shard)


def retried(rows: dict, attempt: int) -> dict:
    for kind in rows.values():
        for r in kind:
            r["attempt"] = attempt
    return rows


def snapshot(spark) -> dict:
    def q(sql):
        return [r.asDict() for r in spark.sql(sql).collect()]

    return {
        "case_stats": q(f"SELECT pool, run_id, case_id, attempt, n, median_ns FROM perf.case_stats "
                        f"WHERE dt = '{DT}' ORDER BY pool, run_id, case_id"),
        "samples": q(f"SELECT pool, run_id, attempt, count(*) AS c FROM perf.samples WHERE dt = '{DT}' "
                     f"GROUP BY pool, run_id, attempt ORDER BY pool, run_id, attempt"),
        "runs": q(f"SELECT pool, run_id, attempt FROM perf.runs WHERE dt = '{DT}' ORDER BY pool, run_id"),
        "dq": {r["batch"]: r for r in q(f"SELECT * FROM perf.dq_results WHERE dt = '{DT}'")},
        "quarantine": q(f"SELECT reason, record FROM perf.quarantine WHERE dt = '{DT}' AND stage = 'mine'")
        if spark.catalog.tableExists("perf.quarantine") else [],
    }


@pytest.fixture(scope="module")
def mined(spark, lake, tmp_path_factory):
    from airflow.sdk.exceptions import AirflowFailException

    from pipelines.orchestration.tasks import mine as mine_task

    tmp = tmp_path_factory.mktemp("gates")
    (tmp / "pools.yaml").write_text(POOLS_YAML)
    steps = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFLAKE_POOLS", str(tmp / "pools.yaml"))
        mp.setenv("PERFLAKE_HOME", str(lake.root))
        # 1. outside results, ingested and mined through the CLI
        rc, out = cli("ingest", str(float_latency_shard(tmp / "outside", "g7-a1")), "--pool", "dq7-a",
                      "--date", DT)
        steps["ingest"] = (rc, json.loads(out))
        progress = io.StringIO()
        with contextlib.redirect_stderr(progress):
            steps["mine1"] = cli("mine", "--date", DT)
        steps["mine1 progress"] = progress.getvalue()
        steps[1] = snapshot(spark)

        # 2. a broken shard in dq7-a; in dq7-b a good shard and a dead worker's partial one
        broken = shard_rows("g7-a2", samples=150)
        for s in broken["samples"]:
            s["latency_ns"] = -s["latency_ns"]
        land(tmp, lake, broken, "dq7-a")
        soft = shard_rows("g7-b1")
        soft["runs"][0]["reason"] = "experiment"
        land(tmp, lake, soft, "dq7-b")
        partial = write_shard(tmp / "partial-1", shard_rows("g7-b2"))
        for kind, name in (("samples", "samples.parquet"), ("case_results", "case_results.parquet")):
            atomic_copy(partial / name, lake.landing_file(kind, DT, "dq7-b", "g7-b2", 0))
        with pytest.raises(AirflowFailException) as failed:
            mine_task(DT, None)
        steps["failure"] = str(failed.value)
        steps[2] = snapshot(spark)

        # 3. the broken shard fixed (its retry), and the dead worker's shard retried
        land(tmp, lake, retried(shard_rows("g7-a2", samples=150), 2), "dq7-a")
        land(tmp, lake, retried(shard_rows("g7-b2", samples=4), 2), "dq7-b")
        rc, out = cli("mine", "--date", DT)
        steps["mine3"] = (rc, json.loads(out))
        steps[3] = snapshot(spark)
    return steps


def stats_of(snap: dict, pool: str) -> list[tuple]:
    return [(r["run_id"], r["attempt"], r["n"], r["median_ns"]) for r in snap["case_stats"] if r["pool"] == pool]


# --------------------------------------------------------------------------- 1. ingest -> mine


def test_the_mine_command_says_each_step_as_it_starts_it(mined):
    lines = [line.split(" (")[0] for line in mined["mine1 progress"].splitlines() if line.startswith("mine: ")]
    assert lines[:5] == ["mine: [1/5] starting Spark", f"mine: [2/5] reading 3 landed files of {DT}, checking and "
                         f"cleaning them", "mine: [3/5] publishing the night of pools dq7-a",
                         "mine: [4/5] updating the history", "mine: [5/5] detecting changes"]
    assert lines[5].startswith("mine: ") and f"case statistics published for {DT} in " in lines[5]


def test_ingested_results_are_mined_into_case_stats(mined):
    rc, report = mined["ingest"]
    assert rc == 1 and [s["samples"] for s in report["landed"]] == [296]  # 1: rows were set aside
    assert mined["mine1"][0] == 0
    assert [(r, a, n) for r, a, n, _ in stats_of(mined[1], "dq7-a")] == [("g7-a1", 1, 148), ("g7-a1", 1, 148)]
    assert mined[1]["samples"] == [{"pool": "dq7-a", "run_id": "g7-a1", "attempt": 1, "c": 296}]


def test_nan_inf_negative_and_zero_latencies_are_set_aside_with_their_reason_and_the_rest_publish(mined):
    _, report = mined["ingest"]
    # Impossible values are set aside at ingest, row by row with the field (#25), so the
    # mine finds nothing more to quarantine.
    reasons = {i["reason"].split(":")[0]: i["reason"] for i in report["issues"]}
    assert sorted(reasons) == ["row 153", "row 154", "row 3", "row 4"]  # inf, 0 in case 1; NaN, -5 in case 0
    assert all("(field latency_ns)" in r for r in reasons.values())
    assert "not finite" in reasons["row 3"] and "not positive" in reasons["row 4"]
    assert mined[1]["quarantine"] == []
    medians = [m for *_, m in stats_of(mined[1], "dq7-a")]
    assert all(1000 < m < 1150 for m in medians)  # the rounded float latencies, not the bad ones


def test_every_batch_of_a_clean_run_passes_and_is_recorded(mined):
    dq = mined[1]["dq"]
    assert {b for b in dq if b.endswith("pool=dq7-a")} == {
        f"{s} dt={DT} pool=dq7-a" for s in ("runs", "case_results", "samples", "case_stats")}
    assert all(r["success"] and r["hard_failures"] == 0 for r in dq.values())


# --------------------------------------------------------------------------- 2. a hard failure

def test_a_hard_failure_fails_the_task_naming_suite_batch_and_expectation(mined):
    msg = mined["failure"]
    assert FAILED_SAMPLES_BATCH in msg and LATENCY_GATE in msg and "[hard]" in msg
    assert "dq7-b" not in msg  # a soft failure does not fail the task


def test_the_withheld_partition_keeps_its_previous_good_version(mined):
    assert stats_of(mined[2], "dq7-a") == stats_of(mined[1], "dq7-a")
    assert [r for r in mined[2]["samples"] if r["pool"] == "dq7-a"] == mined[1]["samples"]
    assert [r["run_id"] for r in mined[2]["runs"] if r["pool"] == "dq7-a"] == ["g7-a1"]


def test_other_pools_publish_and_soft_failures_are_recorded_as_warnings(mined):
    assert [(r, n) for r, _, n, _ in stats_of(mined[2], "dq7-b")] == [("g7-b1", 5), ("g7-b1", 5)]
    dq = mined[2]["dq"]
    failed = dq[f"samples dt={DT} pool=dq7-a"]
    assert (failed["success"], failed["hard_failures"]) == (False, 1)
    assert json.loads(failed["failed_expectations"])[0]["column"] == "latency_ns"
    warned = dq[f"runs dt={DT} pool=dq7-b"]
    assert (warned["success"], warned["hard_failures"], warned["soft_failures"]) == (False, 0, 1)
    assert "experiment" in json.loads(warned["failed_expectations"])[0]["observed"]
    assert dq[f"case_stats dt={DT} pool=dq7-b"]["success"]


def test_each_validation_has_a_data_docs_page(mined, lake):
    pages = list((lake.root / "dq" / "docs" / "validations" / "samples").glob(f"*dt={DT}_pool=dq7-a/**/*.html"))
    assert pages
    assert (lake.root / "dq" / "docs" / "index.html").is_file()


def test_a_shard_whose_run_row_never_landed_is_not_published(mined):
    assert "g7-b2" not in {r["run_id"] for r in mined[2]["case_stats"] + mined[2]["samples"] + mined[2]["runs"]}


# --------------------------------------------------------------------------- 3. fixed and retried

def test_after_the_fix_the_rerun_publishes_the_withheld_pool(mined):
    rc, summary = mined["mine3"]
    assert rc == 0 and summary["pools_withheld"] == [] and summary["shards_pending"] == 0
    assert summary["dq_warnings"] == 1  # dq7-b's run reason, still
    assert [r["run_id"] for r in mined[3]["runs"] if r["pool"] == "dq7-a"] == ["g7-a1", "g7-a2"]
    assert mined[3]["dq"][f"samples dt={DT} pool=dq7-a"]["success"]


def test_a_shard_retried_after_a_partial_landing_publishes_exactly_its_retry(mined):
    assert [(r, a, n) for r, a, n, _ in stats_of(mined[3], "dq7-b") if r == "g7-b2"] == [("g7-b2", 2, 4)] * 2
    assert [r for r in mined[3]["samples"] if r["run_id"] == "g7-b2"] == [
        {"pool": "dq7-b", "run_id": "g7-b2", "attempt": 2, "c": 8}]
