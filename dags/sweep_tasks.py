"""The tasks of a sweep, shared by nightly_sweep and backfill_hardware: plan each pool's
shards, run them (one mapped task per shard, holding a slot of its pool and running on
its pool's queue), land, mine with Spark and publish, re-run unstable cases once, and
send each owner the night's digest.
Embedded, Spark tasks of two runs cannot overlap (Derby admits one process: the later one
waits, then fails and is retried); with the shared services (`make up`, docs/deploy.md)
the mines of different DAGs run side by side, each table's read-modify-write under its lock.

Only wiring lives here; the work is in pipelines.orchestration.tasks. Heavy imports stay inside tasks.
"""
from __future__ import annotations

import datetime

from airflow.sdk import Asset, get_current_context, task

from pipelines.config.pools import load_pools

RAW_SAMPLES = Asset(name="perflake_raw_samples", uri="file:///perflake/landing/samples")
DEFAULTS = {"retries": 2, "retry_delay": datetime.timedelta(seconds=5),
            "execution_timeout": datetime.timedelta(hours=2)}
POOLS = load_pools()


def _task_name(prefix: str, pool: str) -> str:
    return f"{prefix}_{pool.replace('-', '_')}"


@task
def run_info() -> dict:
    """The run's parameters, checked: a bad one fails the run here, at once and without
    retries, in one sentence that names it (pipelines.orchestration.tasks.check_params)."""
    from airflow.sdk.exceptions import AirflowFailException

    from pipelines.orchestration.tasks import run_info as info

    ctx = get_current_context()
    try:
        return info(ctx["params"], ctx.get("logical_date"), ctx["dag_run"])
    except ValueError as e:
        raise AirflowFailException(f"bad run parameters: {e}") from None


@task
def plan(info: dict, pool: str, rerun_of: dict | None = None) -> list[dict]:
    from pipelines.orchestration.tasks import plan as plan_pool

    return plan_pool(info, pool, rerun_of)


@task(map_index_template="{{ shard_label }}")
def run_shard(shard: dict) -> dict:
    from pipelines.sweep.shards import shard_label
    from pipelines.orchestration.tasks import run_shard as run

    ctx = get_current_context()
    ctx["shard_label"] = shard_label(shard)
    return run(shard, attempt=ctx["ti"].try_number, dag_run_id=ctx["dag_run"].run_id)


@task(outlets=[RAW_SAMPLES], trigger_rule="all_done")
def land(info: dict | None, results: list) -> dict:
    _refused(info)
    ctx = get_current_context()
    ctx["outlet_events"][RAW_SAMPLES].extra = {"dt": info["dt"], "pools": info["pools"], "mined_in_dag": True}
    landed = [r for group in results for r in (group or [])]
    return {"dt": info["dt"], "shards_landed": len(landed)}


@task
def mine(info: dict, landed: dict, rerun: bool = False) -> dict:
    """Mine the night's date, then publish: print the runs' summary and name the
    unstable cases, or, after the reruns, whether each was confirmed or cleared
    (one Spark session for all of it)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from pipelines.orchestration.tasks import mine_and_publish

    if not landed["shards_landed"]:
        raise AirflowSkipException("no shard landed: nothing to mine")
    result = mine_and_publish(info, rerun)
    print(f"mined: {result['mined']}\n{result['summary']}")
    if rerun:
        print(f"confirmation reruns (stability): {result['confirmation']}\n"
              f"changes first seen in this sweep: {result['regressions']}")
    return result


@task(trigger_rule="all_done")
def notify(info: dict | None) -> dict:
    """Each owner's digest of the night: regressions confirmed since this run began (by
    cause), improvements, overdue triage and missing data (pipelines.triage.digest). Runs
    whatever mining did, so that a pool that produced nothing is reported."""
    from pipelines.triage.digest import notify_night

    _refused(info)
    dag_run = get_current_context()["dag_run"]
    return notify_night(info, since=dag_run.start_date or dag_run.run_after)


def _refused(info: dict | None) -> None:
    """Skip a task that runs whatever happened before it (all_done) when run_info refused
    the run's parameters: there is no run to land or report on."""
    from airflow.sdk.exceptions import AirflowSkipException

    if info is None:
        raise AirflowSkipException("the run's parameters were refused (run_info says why): nothing to do")


def sweep() -> None:
    """Wire a whole sweep inside a @dag function."""
    info = run_info()
    results = [run_shard.override(task_id=_task_name("run", name), pool=name, queue=p.queue)
               .expand(shard=plan.override(task_id=_task_name("plan", name))(info, name))
               for name, p in POOLS.items()]
    mined = mine(info, land(info, results))
    # Confirmation: unstable cases go back to their pool once, with a larger budget.
    rerun_results = [run_shard.override(task_id=_task_name("rerun", name), pool=name, queue=p.queue)
                     .expand(shard=plan.override(task_id=_task_name("plan_rerun", name))(info, name, mined))
                     for name, p in POOLS.items()]
    rerun_landed = land.override(task_id="land_reruns")(info, rerun_results)
    done = notify(info)
    mined_reruns = mine.override(task_id="mine_reruns")(info, rerun_landed, rerun=True)
    mined_reruns >> done
    # land, land_reruns and notify run whatever happened before them, and a run's state is its
    # leaves': without this verdict a sweep whose plan or every shard failed ended "success".
    # Its trigger rule sees its direct upstreams only: every task whose failure notify hides.
    [info, *results, mined, *rerun_results, rerun_landed, mined_reruns, done] >> verdict()


@task(trigger_rule="one_failed", retries=0)
def verdict() -> None:
    """Fails the run when any task of it failed (skipped when none did): what landed was
    mined and the digest went out, but the run is not a success."""
    raise RuntimeError("a task of this sweep failed (its log says why); what landed was mined and the digest sent")
