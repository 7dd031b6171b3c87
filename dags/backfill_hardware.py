"""backfill_hardware: run the sweep catalog on a (new) pool, so that its results land
comparable to the existing history. Triggered by hand with Params."""
from __future__ import annotations

import datetime

from airflow.sdk import Param, dag

from sweep_tasks import DEFAULTS, POOLS, sweep


@dag(
    dag_id="backfill_hardware",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,
    default_args=DEFAULTS,
    tags=["perflake", "sweep", "backfill"],
    params={
        "pools": Param(["sim-h200"], type="array", minItems=1, items={"type": "string", "enum": sorted(POOLS)},
                       description="the pool(s) of the new hardware"),
        "suites": Param(["llm-gemm", "memory"], type="array", minItems=1, items={"type": "string"},
                        description="suites of the sweep catalog to run"),
        "kernel": Param(None, type=["null", "string"], description="glob over kernel names"),
        "stopping": Param(None, type=["null", "object"], description="sample budget: stopping-rule overrides"),
        "inject": Param(None, type=["null", "array"], description="sim pools only: injected regressions"),
        "reason": Param("backfill", type="string", enum=["backfill", "manual"]),
        "inject_failure": Param(None, type=["null", "object"], description="testing only"),
    },
    doc_md=__doc__,
)
def backfill_hardware():
    sweep()


backfill_hardware()
