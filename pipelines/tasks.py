"""The bodies of the DAGs' tasks, as plain functions (the DAG files only wire them).

Each takes what Airflow gives it (params, the run's date and ids) and returns
JSON-serialisable values for XCom."""
from __future__ import annotations

import hashlib
import re

from pipelines.lake import Lake


def run_date(logical_date, run_after) -> str:
    """The lake date (UTC) of a DAG run: its logical date, or when it ran if it has none."""
    when = logical_date or run_after
    return when.astimezone(__import__("datetime").timezone.utc).strftime("%Y-%m-%d")


def sweep_run_id(dag_run_id: str, dt: str) -> str:
    """A short, path-safe run id, stable for one DAG run (so retries land in place)."""
    digest = hashlib.sha256(dag_run_id.encode()).hexdigest()[:8]
    return f"{dt}-{digest}"


def plan(params: dict, pool: str, dt: str, dag_run_id: str, reason: str) -> list[dict]:
    from pipelines.sweep import plan_shards

    if pool not in params.get("pools", []):
        return []
    return plan_shards(run_id=sweep_run_id(dag_run_id, dt), dt=dt, pool=pool, suites=list(params["suites"]),
                       reason=reason, kernel=params.get("kernel") or None, stopping=params.get("stopping") or None,
                       inject=params.get("inject") or None)


def run_shard(shard: dict, attempt: int, dag_run_id: str) -> dict:
    from pipelines import sweep

    fail_at = (shard.get("inject_failure") or {})
    if fail_at.get("attempts", 0) >= attempt and fail_at.get("shard") == shard["landing_shard"]:
        # Test hook for fault tolerance: land the shard, then fail, as a worker dying
        # after a partial write would; the retry must replace the file, not add to it.
        sweep.run_shard(shard, Lake.from_env(), attempt=attempt, dag_run_id=dag_run_id)
        raise RuntimeError(f"injected failure after landing shard {shard['landing_shard']} (attempt {attempt})")
    return sweep.run_shard(shard, Lake.from_env(), attempt=attempt, dag_run_id=dag_run_id)


def mine(dt: str, pools: list[str]) -> dict:
    from pipelines.mine import mine as mine_date
    from pipelines.spark import get_spark

    lake = Lake.from_env()
    return mine_date(get_spark(lake), lake, dt, pools).__dict__


def publish_summary(dt: str, run_id: str) -> str:
    """A short text summary of the run's published stats (printed in the task log)."""
    from pipelines.sql import format_rows, run_query

    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", run_id):
        raise ValueError(f"run id {run_id!r} is not valid")
    q = (f"SELECT pool, kernel, dtype, count(*) AS cases, sum(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS ok, "
         f"round(percentile_approx(median_ns, 0.5) / 1000, 1) AS median_us, round(max(tflops), 3) AS max_tflops "
         f"FROM perf.case_stats WHERE dt = '{dt}' AND run_id = '{run_id}' GROUP BY pool, kernel, dtype "
         f"ORDER BY pool, kernel, dtype")
    cols, rows = run_query(q, engine="spark", lake=Lake.from_env())
    return format_rows(cols, rows)
