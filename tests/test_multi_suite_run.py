"""One run that sweeps several suites: each suite is sharded on its own, yet every shard
keeps a unique number in the run, so runs, case results and statistics never collide."""
from __future__ import annotations

from jobs.mine import mine
from pipelines.sweep.shards import plan_shards, run_shard

FAST = {"min_samples": 10, "min_time_s": 0.02, "max_noise": 0.05, "timeout_s": 0.5, "max_samples": 300}


def test_a_run_over_two_suites_gets_one_stats_row_per_case(spark, lake):
    dt = "2030-02-04"
    shards = plan_shards(run_id="two-suites", dt=dt, pool="sim-h200", suites=["gemm-demo", "memory"],
                         reason="manual", stopping=FAST)
    assert len({s["landing_shard"] for s in shards}) == len(shards) > 2
    for shard in shards:
        run_shard(shard, lake)
    mine(spark, lake, dt, ["sim-h200"])
    runs = spark.sql(f"SELECT shard FROM perf.runs WHERE dt = '{dt}'").collect()
    assert sorted(r.shard for r in runs) == sorted(s["landing_shard"] for s in shards)
    stats = spark.sql(f"SELECT count(*) AS n, count(DISTINCT case_id) AS d FROM perf.case_stats "
                      f"WHERE dt = '{dt}'").collect()[0]
    assert stats.n == stats.d > 6
