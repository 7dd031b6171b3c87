"""nightly_sweep: plan each pool's shards from the suites, run them (one mapped task per
shard, holding a slot of its pool), land raw samples, mine them with Spark, publish.

Heavy libraries are imported inside the tasks, so parsing this file stays fast.
"""
from __future__ import annotations

import datetime

from airflow.sdk import Asset, Param, dag, get_current_context, task

from pipelines.pools import load_pools

RAW_SAMPLES = Asset(name="perflake_raw_samples", uri="file:///perflake/landing/samples")
DEFAULTS = {"retries": 2, "retry_delay": datetime.timedelta(seconds=5),
            "execution_timeout": datetime.timedelta(hours=2)}
POOLS = load_pools()


@dag(
    dag_id="nightly_sweep",
    schedule="0 2 * * *",
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["perflake", "sweep"],
    params={
        "pools": Param(["cpu"], type="array", items={"type": "string", "enum": sorted(POOLS)},
                       description="pools to sweep"),
        "suites": Param(["gemm-demo"], type="array", items={"type": "string"}, description="suites to run"),
        "kernel": Param(None, type=["null", "string"], description="glob over kernel names"),
        "stopping": Param(None, type=["null", "object"], description="stopping-rule overrides (sample budget)"),
        "inject": Param(None, type=["null", "array"], description="sim pools only: injected regressions"),
    },
    doc_md=__doc__,
)
def nightly_sweep():
    @task
    def run_info() -> dict:
        from pipelines.tasks import run_date, sweep_run_id

        ctx = get_current_context()
        dr = ctx["dag_run"]
        dt = run_date(ctx.get("logical_date"), dr.run_after)
        return {"dt": dt, "run_id": sweep_run_id(dr.run_id, dt), "pools": list(ctx["params"]["pools"])}

    @task
    def plan(info: dict, pool: str) -> list[dict]:
        from pipelines.tasks import plan as plan_pool

        ctx = get_current_context()
        return plan_pool(ctx["params"], pool, info["dt"], ctx["dag_run"].run_id, reason=_reason(ctx))

    @task(map_index_template="{{ shard_label }}")
    def run_shard(shard: dict) -> dict:
        from pipelines.sweep import shard_label
        from pipelines.tasks import run_shard as run

        ctx = get_current_context()
        ctx["shard_label"] = shard_label(shard)
        return run(shard, attempt=ctx["ti"].try_number, dag_run_id=ctx["dag_run"].run_id)

    @task(outlets=[RAW_SAMPLES], trigger_rule="all_done")
    def land(info: dict, results: list) -> dict:
        ctx = get_current_context()
        ctx["outlet_events"][RAW_SAMPLES].extra = {"dt": info["dt"], "pools": info["pools"], "mined_by": "nightly_sweep"}
        return {"dt": info["dt"], "shards": len(list(results))}

    @task
    def mine(info: dict, landed: dict) -> dict:
        from pipelines.tasks import mine as mine_date

        return mine_date(info["dt"], info["pools"])

    @task
    def publish(info: dict, mined: dict) -> str:
        from pipelines.tasks import publish_summary

        summary = publish_summary(info["dt"], info["run_id"])
        print(f"mined: {mined}\n{summary}")
        return summary

    info = run_info()
    shard_results = []
    for name, p in POOLS.items():
        shards = plan.override(task_id=f"plan_{name.replace('-', '_')}")(info, name)
        shard_results.append(run_shard.override(task_id=f"run_{name.replace('-', '_')}", pool=name,
                                                queue=p.queue).expand(shard=shards))
    landed = land(info, shard_results)
    publish(info, mine(info, landed))


def _reason(ctx) -> str:
    run_type = str(getattr(ctx["dag_run"], "run_type", "")).lower()
    return "nightly" if "scheduled" in run_type else "manual"


nightly_sweep()
