"""nightly_sweep: every night, sweep the suites over the chosen pools, land the raw
samples, mine them into the perf tables, and re-run unstable cases once.

On demand (trigger with conf), the same Params pick a suite subset, a kernel filter and
a sample budget.
"""
from __future__ import annotations

import datetime

from airflow.sdk import Param, dag

from sweep_tasks import DEFAULTS, POOLS, sweep


@dag(
    dag_id="nightly_sweep",
    schedule="0 2 * * *",
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["perflake", "sweep"],
    params={
        # The CPU pool by default (the demo); a registry without one ($PERFLAKE_POOLS) its first pool.
        "pools": Param(["cpu"] if "cpu" in POOLS else sorted(POOLS)[:1], type="array",
                       items={"type": "string", "enum": sorted(POOLS)},
                       description="pools to sweep"),
        "suites": Param(["gemm-demo"], type="array", items={"type": "string"}, description="suites to run"),
        "kernel": Param(None, type=["null", "string"], description="glob over kernel names"),
        "stopping": Param(None, type=["null", "object"], description="stopping-rule overrides (sample budget)"),
        "inject": Param(None, type=["null", "array"], description="sim pools only: injected regressions"),
        "reason": Param("nightly", type="string", enum=["nightly", "manual"],
                        description="recorded with the rows; unless given here, nightly for a scheduled "
                                    "run and manual for one triggered by hand"),
        "inject_failure": Param(None, type=["null", "object"],
                                description="testing only: {'shard': i, 'attempts': n} fails a shard after landing"),
    },
    doc_md=__doc__,
)
def nightly_sweep():
    sweep()


nightly_sweep()
