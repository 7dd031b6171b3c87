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
from pyspark.sql import functions as F

from pipelines.mining.clean import clean_samples, latest_attempt


def frame(spark, rows: list[dict], table):
    """`rows` in `table`'s schema (every column nullable, absent ones null)."""
    from pyspark.sql import types as T

    from schemas.spark import spark_schema

    schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in spark_schema(table).fields])
    return spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)


SAMPLE = "run_id string, case_id string, attempt int, iteration int, latency_ns bigint, throttled boolean"


def test_a_sample_without_an_attempt_is_quarantined_not_dropped_unseen(spark):
    """Found: clean_samples had no reason for a null attempt, so the row went on as good
    and latest_attempt (attempt = max(attempt) is null) dropped it: neither published nor
    quarantined."""
    rows = [("r", "c", 1, 0, 100, False), ("r", "c", 1, 1, 101, False), ("r", "c", None, 2, 102, False)]
    good, bad = clean_samples(spark.createDataFrame(rows, SAMPLE))
    assert [r.reason for r in bad.collect()] == ["missing attempt"]
    assert sorted(r.iteration for r in latest_attempt(good).collect()) == [0, 1]


NULL_ATTEMPT_NIGHT = "2036-03-01"


@pytest.fixture(scope="module")
def null_attempts(spark, lake, tmp_path_factory):
    """One night, two pools, one mine: in pool peer-na one sample has no attempt, in
    peer-nr one case_results row (each written by another harness's writer: the same
    types, attempt nullable)."""
    from jobs.mine import mine
    from pipelines.landing.files import land_shard
    from test_ingest import shard_rows, write_shard

    tmp = tmp_path_factory.mktemp("null-attempts")
    night, landed = NULL_ATTEMPT_NIGHT, {}
    for pool, name in (("peer-na", "samples"), ("peer-nr", "case_results")):
        rid = f"{pool}-1"
        rows = shard_rows(rid, cases=2, samples=20, started=dt.datetime(2036, 3, 1, 2, tzinfo=dt.timezone.utc))
        rows["runs"][0]["hardware_fingerprint"] = pool  # series of their own in the session's lake
        staging = write_shard(tmp / rid, rows)
        table = pq.read_table(staging / f"{name}.parquet")
        schema = table.schema.set(table.schema.get_field_index("attempt"), pa.field("attempt", pa.int32()))
        records = table.to_pylist()
        if name == "samples":
            records.append({**records[0], "iteration": 99, "attempt": None})
        else:
            records[1]["attempt"] = None
        pq.write_table(pa.Table.from_pylist(records, schema=schema), staging / f"{name}.parquet")
        land_shard(staging, lake, dt=night, pool=pool, run_id=rid, shard=0)
        assert pq.read_table(lake.landing_file(name, night, pool, rid, 0)).column("attempt").null_count == 1
        landed[pool] = records
    summary = mine(spark, lake, night, ["peer-na", "peer-nr"])

    night_rows = spark.sql(f"SELECT reason, record FROM perf.quarantine WHERE dt = '{night}' "
                           "AND stage = 'mine'").collect()
    # Nothing else of the night is quarantined: one row per pool, each naming its run.
    assert sorted(r.reason for r in night_rows) == ["missing attempt"] * 2, night_rows

    def quarantined(pool: str) -> list:
        return [r for r in night_rows if f"{pool}-1" in r.record]

    return summary, landed, quarantined


def _stats(spark, pool: str) -> list:
    return spark.sql(f"SELECT case_id, n, n_kept FROM perf.case_stats WHERE dt = '{NULL_ATTEMPT_NIGHT}' "
                     f"AND pool = '{pool}' ORDER BY case_id").collect()


@pytest.mark.slow
def test_one_sample_without_an_attempt_does_not_hold_its_committed_shard_back(spark, null_attempts):
    """Found: the committed-shard check asked every sample for its run row's attempt, and
    null matches nothing, so one such row left the whole shard pending on every mine
    (nothing of it published, nothing quarantined)."""
    summary, _, quarantined = null_attempts
    assert summary.shards_pending == 0
    assert [(r.n, r.n_kept) for r in _stats(spark, "peer-na")] == [(20, 20), (20, 20)]
    assert [r.reason for r in quarantined("peer-na")] == ["missing attempt"]


@pytest.mark.slow
def test_a_case_result_without_an_attempt_is_quarantined_and_does_not_hold_its_shard_back(spark, null_attempts):
    """Found (as for samples above): a case_results row with a null attempt matched no
    run row, so its whole shard stayed pending on every mine."""
    summary, landed, quarantined = null_attempts
    results = landed["peer-nr"]
    assert summary.shards_pending == 0
    stats = _stats(spark, "peer-nr")
    assert [r.case_id for r in stats] == [results[0]["case_id"]] and stats[0].n == 20
    rows_q = quarantined("peer-nr")
    assert [r.reason for r in rows_q] == ["missing attempt"] and results[1]["case_id"] in rows_q[0].record


def _land(lake, tmp_path, night: str, pool: str, rid: str, *, bad_latency: int | None = None,
          attempt: int = 1) -> None:
    """One shard of two cases x 60 samples, its first sample's latency `bad_latency` if given."""
    from pipelines.landing.files import land_shard
    from test_ingest import shard_rows, write_shard

    rows = shard_rows(rid, cases=2, samples=60, started=dt.datetime.fromisoformat(night).replace(
        hour=2, tzinfo=dt.timezone.utc))
    for kind in rows.values():
        for r in kind:
            r["attempt"] = attempt
    rows["runs"][0]["hardware_fingerprint"] = pool  # series of their own in the session's lake
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


def test_an_energy_that_is_not_positive_or_finite_is_no_point_of_the_energy_series(spark):
    """Found: regression_points kept every non-null energy_per_call_j, so a series whose
    energy counter read 0 J for some nights and then worked (or a reset counter, NaN)
    went to the detector as is: a 'confirmed' energy regression of change_pct = inf."""
    from pipelines.mining.regressions import regression_points
    from schemas.tables import CASE_STATS, RUNS

    energies = [0.0, -1e-3, float("nan"), float("inf"), None, 1e-3, 1.1e-3]
    stats, runs = [], []
    for i, e in enumerate(energies):
        rid = f"peer-energy-{i}"
        stats.append({"run_id": rid, "case_id": "c", "attempt": 1, "status": "ok", "gpu_sku": "H100-SXM5-80GB",
                      "device_kind": "gpu", "median_ns": 1000.0 + i, "energy_per_call_j": e,
                      "dt": f"2036-04-0{i + 1}", "pool": "p"})
        runs.append({"run_id": rid, "shard": 0, "attempt": 1, "hardware_fingerprint": "hw", "dt": f"2036-04-0{i + 1}",
                     "pool": "p", "started_at": dt.datetime(2036, 4, i + 1, 2, tzinfo=dt.timezone.utc)})

    points = regression_points(frame(spark, stats, CASE_STATS), frame(spark, runs, RUNS)).collect()
    assert sorted(r.value for r in points if r.metric == "energy") == [1e-3, 1.1e-3]
    assert len([r for r in points if r.metric == "latency"]) == len(energies)


def test_joules_per_tflop_is_null_where_the_energy_is_no_measurement(spark):
    """Found with the one above: tflops_per_watt asked for energy > 0, joules_per_tflop
    did not, so a 0 J (or negative) energy per call was published as 0 (or negative)
    joules per TFLOP: a kernel that costs nothing."""
    from jobs.mine import hardware_frame
    from pipelines.mining.aggregate import case_stats
    from schemas.tables import CASE_RESULTS, RUNS, SAMPLES

    energies = {"zero": 0.0, "negative": -2.0, "measured": 2.0}
    results = [{"run_id": "r", "shard": 0, "case_id": c, "attempt": 1, "status": "ok", "dtype": "bf16",
                "flops_per_call": 1e12, "energy_per_call_j": e, "dt": "2036-04-10", "pool": "p"}
               for c, e in energies.items()]
    samples = frame(spark, [{"run_id": "r", "case_id": c, "attempt": 1, "iteration": 0, "latency_ns": 1000,
                             "throttled": False} for c in energies], SAMPLES)
    flagged = samples.withColumn("outlier", F.lit(False)).withColumn("kept", F.lit(True))
    runs = frame(spark, [{"run_id": "r", "shard": 0, "attempt": 1, "gpu_sku": "H100-SXM5-80GB"}], RUNS)
    got = {r.case_id: r for r in case_stats(flagged, frame(spark, results, CASE_RESULTS), runs,
                                             hardware_frame(spark)).collect()}
    assert got["measured"].joules_per_tflop == pytest.approx(2.0)
    assert got["zero"].joules_per_tflop is None and got["negative"].joules_per_tflop is None
    assert got["zero"].tflops_per_watt is None


@pytest.mark.slow
def test_a_retry_that_fails_a_case_takes_the_superseded_point_out_of_its_series(spark, lake, tmp_path):
    """Found: a shard retried after its night was mined (attempt 2) in which a case
    failed left perf.series as the first mine made it: the series kept the superseded
    attempt's run as its latest point (n_runs, last_run_id, last_median_ns), and a series
    whose only point it was kept its row, where the whole history (series_table) has
    neither. The night's update looked only at the series measured
    ok that night."""
    from jobs.mine import mine
    from pipelines.landing.files import land_shard
    from pipelines.mining.history import series_points, series_table
    from test_ingest import shard_rows, write_shard

    pool, nights = "peer-rt", ["2036-05-01", "2036-05-02"]

    def land(night: str, cases: int, attempt: int = 1, failed: tuple = ()) -> list[str]:
        rid = f"peer-rt-{night}"
        rows = shard_rows(rid, cases=cases, samples=20, started=dt.datetime.fromisoformat(night).replace(
            hour=2, tzinfo=dt.timezone.utc))
        for kind in rows.values():
            for r in kind:
                r["attempt"] = attempt
        rows["runs"][0]["hardware_fingerprint"] = pool  # series of their own: other tests land the same cases
        ids = [r["case_id"] for r in rows["case_results"]]
        for r in rows["case_results"]:
            if ids.index(r["case_id"]) in failed:
                r.update(status="failed", error="RuntimeError: boom")
        rows["samples"] = [s for s in rows["samples"] if ids.index(s["case_id"]) not in failed]
        land_shard(write_shard(tmp_path / f"{rid}-{attempt}", rows), lake, dt=night, pool=pool, run_id=rid, shard=0)
        return ids

    land(nights[0], cases=2)
    mine(spark, lake, nights[0], [pool])
    ids = land(nights[1], cases=3)  # case 2 is new that night
    mine(spark, lake, nights[1], [pool])
    land(nights[1], cases=3, attempt=2, failed=(1, 2))  # the retry: cases 1 and 2 fail
    mine(spark, lake, nights[1], [pool])

    def series() -> dict:
        rows = spark.sql(f"SELECT case_id, n_runs, last_dt FROM perf.series WHERE pool = '{pool}'").collect()
        return {r.case_id: (r.n_runs, r.last_dt) for r in rows}

    got = series()
    assert got == {ids[0]: (2, nights[1]), ids[1]: (1, nights[0])}
    stats = spark.table("perf.case_stats").where(F.col("pool") == pool)
    whole = series_table(series_points(stats, spark.table("perf.runs"))).collect()  # what the whole history gives
    assert {r.case_id: (r.n_runs, r.last_dt) for r in whole} == got


@pytest.mark.slow
def test_a_retry_in_which_every_case_fails_takes_the_superseded_samples_out_of_the_night(spark, lake, tmp_path):
    """Found: a pool's night re-mined after a retry (attempt 2) in which every case
    failed kept attempt 1's rows in perf.samples: the retry lands no samples, and a
    partition the mine writes no row of was left as the first mine published it."""
    from jobs.mine import mine
    from pipelines.landing.files import land_shard
    from test_ingest import shard_rows, write_shard

    night, pool, rid = "2036-06-01", "peer-af", "peer-af-1"

    def land(attempt: int, fail: bool) -> None:
        rows = shard_rows(rid, cases=2, samples=20, started=dt.datetime(2036, 6, 1, 2, tzinfo=dt.timezone.utc))
        for kind in rows.values():
            for r in kind:
                r["attempt"] = attempt
        rows["runs"][0]["hardware_fingerprint"] = pool
        if fail:
            for r in rows["case_results"]:
                r.update(status="failed", error="RuntimeError: boom")
            rows["samples"] = []
        land_shard(write_shard(tmp_path / f"{rid}-{attempt}", rows), lake, dt=night, pool=pool, run_id=rid, shard=0)

    def published() -> tuple[int, list]:
        n = spark.sql(f"SELECT count(*) FROM perf.samples WHERE dt = '{night}' AND pool = '{pool}'").first()[0]
        stats = spark.sql(f"SELECT attempt, status, n FROM perf.case_stats WHERE dt = '{night}' AND pool = '{pool}'")
        return n, sorted(tuple(r) for r in stats.collect())

    land(1, fail=False)
    mine(spark, lake, night, [pool])
    assert published() == (40, [(1, "ok", 20), (1, "ok", 20)])
    land(2, fail=True)
    mine(spark, lake, night, [pool])
    assert published() == (0, [(2, "failed", 0), (2, "failed", 0)])


@pytest.mark.slow
def test_a_clean_re_mine_of_a_night_leaves_no_stale_quarantine_rows(spark, lake, tmp_path):
    """Found: the night's (dt, mine) quarantine partition was written only when the mine
    quarantined something, so after the bad shard was re-landed clean and re-mined,
    perf.quarantine still named the rows the first mine had set aside."""
    from jobs.mine import mine

    night, pool = "2036-06-02", "peer-qc"
    _land(lake, tmp_path, night, pool, "peer-qc-1", bad_latency=-5)
    mine(spark, lake, night, [pool])

    def reasons() -> list[str]:
        return [r.reason for r in spark.sql(
            f"SELECT reason FROM perf.quarantine WHERE dt = '{night}' AND stage = 'mine'").collect()]

    assert reasons() == ["latency_ns is not positive: -5"]
    _land(lake, tmp_path / "clean", night, pool, "peer-qc-1", attempt=2)  # the shard retried, clean
    mine(spark, lake, night, [pool])
    assert reasons() == []


@pytest.mark.slow
def test_each_case_s_series_takes_the_hardware_of_the_shard_that_measured_it(spark, lake, tmp_path):
    """Found: perf.series took a run's hardware fingerprint (part of the series key) and
    software context from one arbitrary shard of the run (first() per run_id), so the
    cases of a shard on other hardware of the pool (another power limit, another
    driver) were filed under the other shard's series."""
    from jobs.mine import mine
    from pipelines.landing.files import land_shard
    from test_ingest import shard_rows, write_shard

    from pipelines.mining.history import series_points

    night, pool, rid = "2036-07-01", "peer-hw", "peer-hw-1"
    cases = {}
    for shard, (fp, driver, dtype) in enumerate((("fp-a", "580.1", "fp32"), ("fp-b", "590.2", "bf16"))):
        rows = shard_rows(rid, shard=shard, cases=1, samples=20, dtype=dtype,
                          started=dt.datetime(2036, 7, 1, 2, shard, tzinfo=dt.timezone.utc))
        rows["runs"][0].update(hardware_fingerprint=fp, driver_version=driver, num_shards=2)
        cases[rows["case_results"][0]["case_id"]] = (shard, fp, driver)
        land_shard(write_shard(tmp_path / f"{rid}-{shard}", rows), lake, dt=night, pool=pool, run_id=rid,
                   shard=shard)
    mine(spark, lake, night, [pool])
    stats = spark.sql(f"SELECT case_id, shard FROM perf.case_stats WHERE dt = '{night}' AND pool = '{pool}'")
    assert {r.case_id: r.shard for r in stats.collect()} == {c: s for c, (s, _, _) in cases.items()}
    series = spark.sql(f"SELECT case_id, hardware_fingerprint FROM perf.series WHERE pool = '{pool}'")
    assert {r.case_id: r.hardware_fingerprint for r in series.collect()} == {c: fp for c, (_, fp, _) in cases.items()}
    points = series_points(spark.table("perf.case_stats").where(F.col("pool") == pool), spark.table("perf.runs"))
    assert {r.case_id: (r.hardware_fingerprint, r.driver_version) for r in points.collect()} == {
        c: (fp, driver) for c, (_, fp, driver) in cases.items()}


@pytest.mark.slow
def test_what_ingest_refused_for_a_night_is_in_perf_quarantine_once_the_night_is_mined(spark, lake, tmp_path):
    """Found by a red-team: the README lists perf.quarantine beside quarantine/ingest/, but
    ingest's refusals stayed in its files: `perflake sql` could not see them. The mine
    publishes the night's as stage `ingest`, whole on every mine of the night."""
    from jobs.mine import mine
    from pipelines.landing.ingest import ingest
    from test_ingest import REGISTRY, shard_rows, write_shard

    night = "2036-06-09"
    rows = shard_rows("peer-ing-1", cases=2, samples=30, started=dt.datetime(2036, 6, 9, 2, tzinfo=dt.timezone.utc))
    rows["runs"][0]["hardware_fingerprint"] = "peer-ing"  # a series of its own in the session's lake
    rows["samples"][0]["latency_ns"] = -7
    report = ingest([write_shard(tmp_path / "in", rows)], lake, registry=REGISTRY, pool="dq-a",
                    now=dt.datetime(2036, 6, 9, 12, tzinfo=dt.timezone.utc))
    assert [i.reason for i in report.issues] == ["row 0: latency_ns -7 is not positive (field latency_ns)"]

    def ingest_rows() -> list:
        return [(r.reason, r.source) for r in spark.sql(
            f"SELECT reason, source FROM perf.quarantine WHERE dt = '{night}' AND stage = 'ingest'").collect()]

    mine(spark, lake, night, ["dq-a"])
    assert ingest_rows() == [(report.issues[0].reason, report.issues[0].source)]
    mine(spark, lake, night, ["dq-a"])  # a re-mine publishes it again, once
    assert len(ingest_rows()) == 1
