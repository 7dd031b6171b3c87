"""End to end: the real nightly_sweep DAG through dag.test() on the test lake, then the
published tables checked against the raw samples."""
from __future__ import annotations

import datetime

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines.sweep.ids import pool_run_id, sweep_run_id
from pipelines.warehouse import snapshots

DT = datetime.datetime(2030, 1, 2, 2, 0, tzinfo=datetime.timezone.utc)
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


@pytest.fixture(scope="module")
def nightly(spark, lake):
    from pipelines.orchestration.airflow_env import prepare_airflow, sync_pools
    from pipelines.orchestration.demo import load_dag

    prepare_airflow(lake)
    sync_pools()
    dag = load_dag("nightly_sweep")
    dag_run = dag.test(logical_date=DT, run_conf={"pools": ["cpu", "sim-h100"], "suites": ["gemm-demo"],
                                                   "stopping": FAST})
    sweep_id = sweep_run_id(dag_run.run_id, "2030-01-02")
    return dag_run, "(" + ", ".join(f"'{pool_run_id(sweep_id, p)}'" for p in ("cpu", "sim-h100")) + ")"


def test_nightly_sweep_succeeds(nightly):
    dag_run, _ = nightly
    assert "success" in str(dag_run.state)


def test_every_planned_case_has_stats_per_pool(nightly, spark):
    _, run_ids = nightly
    rows = spark.sql(f"SELECT pool, count(*) AS c, sum(CAST(status = 'ok' AS INT)) AS ok FROM perf.case_stats "
                     f"WHERE run_id IN {run_ids} GROUP BY pool").collect()
    counts = {r.pool: (r.c, r.ok) for r in rows}
    assert counts == {"cpu": (6, 6), "sim-h100": (6, 6)}


def test_gemm_flops_are_2mnk(nightly, spark):
    _, run_ids = nightly
    rows = spark.sql(f"SELECT s.flops_per_call, c.m, c.n, c.k FROM perf.case_stats s JOIN perf.cases c "
                     f"USING (case_id) WHERE s.run_id IN {run_ids}").collect()
    assert rows and all(r.flops_per_call == 2 * r.m * r.n * r.k for r in rows)


def test_medians_match_the_raw_samples(nightly, spark, lake):
    _, run_ids = nightly
    stats = {(r.pool, r.case_id): r for r in spark.sql(
        f"SELECT * FROM perf.case_stats WHERE run_id IN {run_ids}").collect()}
    files = list((lake.landing / "samples" / "dt=2030-01-02").glob("pool=*/run_id=*/*.parquet"))
    files = [f for f in files if f"'{f.parent.name.removeprefix('run_id=')}'" in run_ids]
    assert files
    for f in files:
        pool = f.parent.parent.name.removeprefix("pool=")
        raw = pq.read_table(f).to_pandas()
        for case_id, group in raw.groupby("case_id"):
            s = stats[(pool, case_id)]
            assert s.n == len(group)
            kept = spark.sql(f"SELECT latency_ns FROM perf.samples WHERE run_id IN {run_ids} AND pool = '{pool}' "
                             f"AND case_id = '{case_id}' AND NOT throttled AND NOT outlier").toPandas()
            assert s.n_kept == len(kept)
            assert s.median_ns == pytest.approx(float(np.median(kept.latency_ns)))
            assert s.median_ns > 0
            assert s.median_ci_low_ns <= s.median_ns <= s.median_ci_high_ns
            assert s.p10_ns <= s.median_ns <= s.p90_ns


def test_simulated_rows_are_labelled_and_cpu_rows_are_not(nightly, spark):
    _, run_ids = nightly
    kinds = dict(spark.sql(f"SELECT DISTINCT pool, device_kind FROM perf.case_stats "
                           f"WHERE run_id IN {run_ids}").collect())
    assert kinds == {"cpu": "cpu", "sim-h100": "simulated"}


def test_rerunning_the_mine_for_the_date_changes_nothing(nightly, spark, lake):
    from jobs.mine import mine

    _, run_ids = nightly
    q = f"SELECT count(*) AS c, sum(median_ns) AS s FROM perf.case_stats WHERE dt = '2030-01-02'"
    before = spark.sql(q).collect()[0]
    hardware = snapshots.current(lake.table_path("hardware"))
    mine(spark, lake, "2030-01-02")
    after = spark.sql(q).collect()[0]
    assert (after.c, after.s) == (before.c, before.s)
    # the hardware catalog did not change: no new snapshot of it (catalog.holds)
    assert hardware is not None and snapshots.current(lake.table_path("hardware")) == hardware
    assert spark.sql("SELECT count(*) FROM perf.samples WHERE dt = '2030-01-02'").collect()[0][0] == \
        sum(pq.ParquetFile(f).metadata.num_rows for f in (lake.landing / "samples" / "dt=2030-01-02").rglob("*.parquet"))


def test_each_published_partition_is_compacted_into_one_file(nightly, lake):
    for table in ("samples", "case_stats", "runs"):
        parts = list((lake.table_path(table) / "dt=2030-01-02").glob("pool=*"))
        assert {p.name for p in parts} == {"pool=cpu", "pool=sim-h100"}
        assert all(len(snapshots.live_files(p)) == 1 for p in parts), table


@pytest.mark.parametrize("conf, said", [
    ({"pools": ["cpu"], "suite": ["llm-gemm"]}, "unknown run parameter 'suite' (did you mean 'suites'?)"),
    ({"pools": ["cpu"], "suites": ["gemm-demo"], "stopping": {"timeout_s": 1e12}}, "stopping.timeout_s is"),
])
def test_a_run_with_a_bad_parameter_fails_at_once_naming_it_and_the_run_is_failed(spark, lake, conf, said, capfd):
    from pipelines.orchestration.airflow_env import prepare_airflow, sync_pools
    from pipelines.orchestration.demo import load_dag

    prepare_airflow(lake)
    sync_pools()
    dag_run = load_dag("nightly_sweep").test(
        logical_date=datetime.datetime(2030, 2, 1 + len(said) % 20, 2, tzinfo=datetime.timezone.utc), run_conf=conf)
    assert "failed" in str(dag_run.state)  # not "success", as it was when only notify's state counted
    states = {ti.task_id: (str(ti.state), ti.try_number) for ti in dag_run.get_task_instances()}
    assert states["run_info"][0].endswith("failed") and states["run_info"][1] == 1  # no retries of it
    assert states["verdict"][0].endswith("failed")
    assert states["land"][0].endswith("skipped") and states["notify"][0].endswith("skipped")
    out = capfd.readouterr()
    assert f"bad run parameters: {said}" in out.out + out.err
