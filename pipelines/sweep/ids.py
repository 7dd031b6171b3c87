"""The ids of a sweep: its lake date, its run id, and one run id per pool."""
from __future__ import annotations

import datetime
import hashlib


def run_date(logical_date, run_after) -> str:
    """The lake date (UTC) of a DAG run: its logical date, or when it ran if it has none."""
    when = logical_date or run_after
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d")


def sweep_run_id(dag_run_id: str, dt: str) -> str:
    """A short, path-safe run id, stable for one DAG run (so retries land in place)."""
    digest = hashlib.sha256(dag_run_id.encode()).hexdigest()[:8]
    return f"{dt}-{digest}"


def pool_run_id(sweep_id: str, pool: str, rerun: bool = False) -> str:
    """The run id of one pool's part of a sweep. Each pool's run has its own id, so that
    (run_id, case_id, attempt, iteration) identifies a sample across the whole lake."""
    return f"{sweep_id}-{pool}" + ("-rerun" if rerun else "")


def sweep_run_ids(info: dict, rerun: bool = False) -> list[str]:
    """The run ids of every pool of a sweep."""
    return [pool_run_id(info["run_id"], pool, rerun) for pool in info["pools"]]
