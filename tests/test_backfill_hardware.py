"""The real backfill_hardware DAG through dag.test(): the sweep catalog, narrowed by its
Params (suite, kernel glob, sample budget), runs on the new hardware's pool and lands as
reason 'backfill' with the same case ids as every other run of those suites, so the new
GPU's rows line up with the existing history."""
from __future__ import annotations

import datetime

import pytest

from kernels_bench.suite import load_suite

DT = "2030-02-01"
POOL = "sim-h100"
FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


@pytest.fixture(scope="module")
def backfill(spark, lake):
    from pipelines.orchestration.airflow_env import prepare_airflow, sync_pools
    from pipelines.orchestration.demo import load_dag

    prepare_airflow(lake)
    sync_pools()
    conf = {"pools": [POOL], "suites": ["memory"], "kernel": "copy", "stopping": FAST}
    return load_dag("backfill_hardware").test(
        logical_date=datetime.datetime(2030, 2, 1, 3, tzinfo=datetime.timezone.utc), run_conf=conf)


def test_the_backfill_lands_the_filtered_catalog_on_the_new_pool_as_reason_backfill(backfill, spark):
    assert "success" in str(backfill.state)
    runs = spark.sql(f"SELECT DISTINCT reason, gpu_sku, device_kind FROM perf.runs "
                     f"WHERE dt = '{DT}' AND pool = '{POOL}'").collect()
    assert [(r.reason, r.gpu_sku, r.device_kind) for r in runs] == [("backfill", "H100-SXM5-80GB", "simulated")]
    stats = spark.sql(f"SELECT case_id, kernel, status, median_ns FROM perf.case_stats "
                      f"WHERE dt = '{DT}' AND pool = '{POOL}'").collect()
    expected = {pc.case.case_id for pc in load_suite("memory").filter("copy").cases}
    assert {r.case_id for r in stats} == expected  # comparable: the suite's own case ids
    assert all(r.kernel == "copy" and r.status == "ok" and r.median_ns > 0 for r in stats)
