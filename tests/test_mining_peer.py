"""The mining job's output against an independent reading of its rules, on adversarial
but possible input (red-team findings; each test failed before its fix).

Held (checked against DuckDB's quantile_cont/median on the same rules, not kept as
tests here): ties and all-equal samples, cases of 1-3 samples, every sample throttled,
attempt gaps and a latest attempt with fewer samples, latencies near 2^63, duplicates,
a case that leaves and comes back, a night mined twice and an older night mined again.
"""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.mining.clean import clean_samples, latest_attempt

SAMPLE = "run_id string, case_id string, attempt int, iteration int, latency_ns bigint, throttled boolean"


def test_a_sample_without_an_attempt_is_quarantined_not_dropped_unseen(spark):
    """Found: clean_samples had no reason for a null attempt, so the row went on as good
    and latest_attempt (attempt = max(attempt) is null) dropped it: neither published nor
    quarantined."""
    rows = [("r", "c", 1, 0, 100, False), ("r", "c", 1, 1, 101, False), ("r", "c", None, 2, 102, False)]
    good, bad = clean_samples(spark.createDataFrame(rows, SAMPLE))
    assert [r.reason for r in bad.collect()] == ["missing attempt"]
    assert sorted(r.iteration for r in latest_attempt(good).collect()) == [0, 1]


@pytest.mark.slow
def test_one_sample_without_an_attempt_does_not_hold_its_committed_shard_back(spark, lake, tmp_path):
    """Found: the committed-shard check asked every sample for its run row's attempt, and
    null matches nothing, so one such row left the whole shard pending on every mine
    (nothing of it published, nothing quarantined)."""
    from jobs.mine import mine
    from pipelines.landing.files import land_shard
    from test_ingest import shard_rows, write_shard

    night, pool, rid = "2036-03-01", "peer-na", "peer-na-1"
    rows = shard_rows(rid, cases=2, samples=20, started=dt.datetime(2036, 3, 1, 2, tzinfo=dt.timezone.utc))
    staging = write_shard(tmp_path / rid, rows)
    # Another harness's writer: the same types, attempt nullable, one sample without it.
    samples = pq.read_table(staging / "samples.parquet")
    schema = samples.schema.set(samples.schema.get_field_index("attempt"), pa.field("attempt", pa.int32()))
    extra = {**rows["samples"][0], "iteration": 99, "attempt": None}
    pq.write_table(pa.Table.from_pylist(samples.to_pylist() + [extra], schema=schema), staging / "samples.parquet")
    land_shard(staging, lake, dt=night, pool=pool, run_id=rid, shard=0)
    assert pq.read_table(lake.landing_file("samples", night, pool, rid, 0)).column("attempt").null_count == 1

    summary = mine(spark, lake, night, [pool])
    assert summary.shards_pending == 0
    stats = spark.sql(f"SELECT n, n_kept FROM perf.case_stats WHERE dt = '{night}' AND pool = '{pool}'").collect()
    assert sorted((r.n, r.n_kept) for r in stats) == [(20, 20), (20, 20)]
    reasons = spark.sql(f"SELECT reason FROM perf.quarantine WHERE dt = '{night}' AND stage = 'mine'").collect()
    assert [r.reason for r in reasons] == ["missing attempt"]


def _land(lake, tmp_path, night: str, pool: str, rid: str, *, bad_latency: int | None = None) -> None:
    """One shard of two cases x 60 samples, its first sample's latency `bad_latency` if given."""
    from pipelines.landing.files import land_shard
    from test_ingest import shard_rows, write_shard

    rows = shard_rows(rid, cases=2, samples=60, started=dt.datetime.fromisoformat(night).replace(
        hour=2, tzinfo=dt.timezone.utc))
    if bad_latency is not None:
        rows["samples"][0]["latency_ns"] = bad_latency
    land_shard(write_shard(tmp_path / rid, rows), lake, dt=night, pool=pool, run_id=rid, shard=0)


@pytest.mark.slow
def test_mining_one_pool_keeps_the_other_pools_quarantined_rows_of_the_date(spark, lake, tmp_path):
    """Found: perf.quarantine is partitioned by (dt, stage) only, and `perflake mine
    --pool A` replaced the whole (dt, mine) partition with pool A's rejects: pool B's
    quarantined rows of that date were deleted."""
    from jobs.mine import mine

    night = "2036-03-02"
    _land(lake, tmp_path, night, "peer-qa", "peer-qa-1", bad_latency=-5)
    _land(lake, tmp_path, night, "peer-qb", "peer-qb-1", bad_latency=-7)
    mine(spark, lake, night, ["peer-qb"])
    mine(spark, lake, night, ["peer-qa"])
    reasons = spark.sql(f"SELECT reason FROM perf.quarantine WHERE dt = '{night}' AND stage = 'mine'").collect()
    assert sorted(r.reason for r in reasons) == ["latency_ns is not positive: -5", "latency_ns is not positive: -7"]
