"""mine: run the Spark mining jobs for landed partitions.

Scheduled by the raw-samples Asset (result files landed by ingest or by another
producer) and daily by time, so history is re-mined by date with Airflow 3's backfill:

  airflow backfill create --dag-id mine --from-date 2026-10-01 --to-date 2026-10-31

Mining is idempotent: reprocessing a date after a rule change gives the same tables as a
clean run. Landings that their own DAG already mined are not mined twice.
"""
from __future__ import annotations

import datetime

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, get_current_context, task

from sweep_tasks import DEFAULTS, RAW_SAMPLES


@dag(
    dag_id="mine",
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("0 6 * * *", timezone="UTC"), assets=[RAW_SAMPLES]),
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULTS,
    tags=["perflake", "mining"],
    doc_md=__doc__,
)
def mine():
    @task
    def dates_to_mine() -> list[dict]:
        from pipelines.orchestration.tasks import dates_to_mine as pick

        ctx = get_current_context()
        return pick(ctx.get("logical_date"), ctx.get("triggering_asset_events") or {})

    @task(map_index_template="{{ item['dt'] }}")
    def mine_date(item: dict) -> dict:
        from pipelines.orchestration.tasks import mine as mine_one

        get_current_context()["item"] = item
        return mine_one(item["dt"], item.get("pools"))

    mine_date.expand(item=dates_to_mine())


mine()
