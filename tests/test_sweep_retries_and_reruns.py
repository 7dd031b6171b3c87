"""The real nightly_sweep DAG through dag.test() with a shard that fails after landing
(retried by Airflow) and injected noise that makes some cases unstable (rerun once with
a larger budget on a clean device): no duplicated rows, and the reruns clear the cases."""
from __future__ import annotations

import datetime

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipelines.orchestration.tasks import rerun_outcomes
from pipelines.sweep.ids import pool_run_id, sweep_run_id

DT = "2030-01-05"
POOL = "sim-h200"
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}
# bf16 matmuls are made noisy (unstable) on the nightly run only; the rerun sees a clean device.
NOISY = {"match": {"kernel": "matmul", "dtype": "bf16"}, "since": "2000-01-01", "jitter": 0.3,
         "reasons": ["nightly"]}


@pytest.fixture(scope="module")
def sweep(spark, lake):
    from pipelines.orchestration.airflow_env import prepare_airflow, sync_pools
    from pipelines.orchestration.demo import load_dag

    prepare_airflow(lake)
    sync_pools()
    dag = load_dag("nightly_sweep")
    conf = {"pools": [POOL], "suites": ["gemm-demo"], "stopping": FAST, "inject": [NOISY], "reason": "nightly",
            "inject_failure": {"shard": 0, "attempts": 1}}
    dag_run = dag.test(logical_date=datetime.datetime(2030, 1, 5, 2, tzinfo=datetime.timezone.utc), run_conf=conf)
    sweep_id = sweep_run_id(dag_run.run_id, DT)
    return {"dag_run": dag_run, "info": {"dt": DT, "run_id": sweep_id, "pools": [POOL]},
            "run_id": pool_run_id(sweep_id, POOL), "rerun_id": pool_run_id(sweep_id, POOL, rerun=True)}


def test_the_sweep_succeeds_after_the_injected_shard_failure(sweep):
    assert "success" in str(sweep["dag_run"].state)
    tis = {(ti.task_id, ti.map_index): ti for ti in sweep["dag_run"].get_task_instances()}
    assert tis[("run_sim_h200", 0)].try_number == 2  # failed once after landing, then retried


def test_a_retried_shard_lands_exactly_one_clean_run(sweep, spark, lake):
    run_id = sweep["run_id"]
    files = sorted((lake.landing / "samples" / f"dt={DT}" / f"pool={POOL}" / f"run_id={run_id}").glob("*.parquet"))
    assert [f.name for f in files] == ["shard-0.parquet", "shard-1.parquet"]  # 6 cases, 2 shards
    assert set(pq.read_table(files[0]).column("attempt").to_pylist()) == {2}  # the retry replaced attempt 1
    assert set(pq.read_table(files[1]).column("attempt").to_pylist()) == {1}
    landed = pd.concat([pq.read_table(f).to_pandas() for f in files])
    assert not landed.duplicated(["case_id", "iteration"]).any()
    published = spark.sql(f"SELECT count(*) AS n, count(DISTINCT case_id, attempt, iteration) AS d "
                          f"FROM perf.samples WHERE dt = '{DT}' AND run_id = '{run_id}'").collect()[0]
    assert published.n == published.d == len(landed)
    stats = spark.sql(f"SELECT count(*) AS n FROM perf.case_stats WHERE run_id = '{run_id}'").collect()[0]
    assert stats.n == 6  # one row per case, not one per attempt


def test_only_the_noisy_cases_are_flagged_unstable(sweep, spark):
    rows = spark.sql(f"SELECT dtype, stable FROM perf.case_stats WHERE run_id = '{sweep['run_id']}'").collect()
    assert sorted((r.dtype, r.stable) for r in rows) == [("bf16", False)] * 3 + [("fp32", True)] * 3


def test_unstable_cases_are_rerun_once_with_reason_rerun_and_cleared(sweep, spark):
    rerun = spark.sql(f"SELECT DISTINCT reason FROM perf.runs WHERE run_id = '{sweep['rerun_id']}'").collect()
    assert [r.reason for r in rerun] == ["rerun"]
    rerun_cases = spark.sql(f"SELECT case_id, dtype, stable, n FROM perf.case_stats "
                            f"WHERE run_id = '{sweep['rerun_id']}'").collect()
    assert sorted(r.dtype for r in rerun_cases) == ["bf16"] * 3
    assert all(r.stable and r.n > 0 for r in rerun_cases)
    assert rerun_outcomes(sweep["info"]) == {POOL: {r.case_id: "cleared" for r in rerun_cases}}
