"""perf.workload_projections: the summaries of `perflake model`, kept per workload,
scenario, GPU, software and as-of night, so that a model's projected step time has a
history (replace by key: projecting the same thing again replaces its row)."""
from __future__ import annotations

import datetime

import pandas as pd

# Key columns hold '' rather than null: a null key would never match its own replacement.
_KEY_BLANKS = ("device_kind", "software", "as_of_dt")


def workload_rows(summaries: list[dict]) -> pd.DataFrame:
    """The summaries as perf.workload_projections rows (blank keys for absent values)."""
    from schemas.tables import WORKLOAD_PROJECTIONS

    rows = pd.DataFrame(summaries)
    for k in _KEY_BLANKS:
        rows[k] = rows[k].fillna("")
    rows["projected_at"] = datetime.datetime.now(datetime.timezone.utc)
    return rows.reindex(columns=WORKLOAD_PROJECTIONS.column_names)


def write_workload_projections(lake, summaries: list[dict], spark=None) -> None:
    """Replace the rows with the same key in perf.workload_projections (a Spark write)."""
    from pipelines.projection.roofline import _plain
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import get_spark
    from schemas.spark import ordered_columns, spark_schema
    from schemas.tables import WORKLOAD_PROJECTIONS

    spark = spark or get_spark(lake)
    frame = workload_rows(summaries).reindex(columns=ordered_columns(WORKLOAD_PROJECTIONS))
    records = [[_plain(v) for v in r] for r in frame.astype(object).where(frame.notna(), None).values.tolist()]
    catalog.replace_by_key(spark, lake, spark.createDataFrame(records, spark_schema(WORKLOAD_PROJECTIONS)),
                           WORKLOAD_PROJECTIONS)
