"""The triage lifecycle of perf.regressions: who owns a regression, whether it is late,
and acknowledging or closing it (by `perflake triage`, pipelines/cli/triage.py).

A regression is addressed by its regression_id, a short hash of its key (series_key,
metric, change_run_id): stable across re-mining. Its owner and due date are set by the
mine that first sees it (pipelines.config.owners) and kept.
- ack: status `acknowledged`, with who, when and a note: someone is on it; it is no
  longer open, so never overdue.
- close: status `closed`, with who, when and a note: triage is finished (fixed, expected,
  or won't fix). Final: later mines keep it, and the change stays a known level of its
  series, so the detector does not report the same step again; a later fix shows up as
  an improvement of its own.
A cleared change (its next run or rerun did not agree) needs no triage and takes
neither; a closed one cannot be acknowledged again.
"""
from __future__ import annotations

import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.warehouse import catalog
from pipelines.config.lake import Lake
from schemas.tables import REGRESSIONS

OPEN = ("provisional", "confirmed")        # regressions waiting for their owner
_FIELDS = {"acknowledged": ("acknowledged_by", "acknowledged_at", "note"),
           "closed": ("closed_by", "closed_at", "close_note")}


def overdue(today: datetime.date | str) -> Column:
    """Open regressions (not improvements) whose triage due date is before `today`."""
    return ((F.col("direction") == "regression") & F.col("status").isin(*OPEN)
            & (F.col("triage_due_dt") < F.lit(str(today))))


def items(regressions: DataFrame, today: datetime.date | str, *, owner: str | None = None,
          statuses: tuple[str, ...] | None = ("provisional", "confirmed", "acknowledged"),
          direction: str | None = "regression", only_overdue: bool = False) -> DataFrame:
    """The regressions to triage, with an `overdue` flag, oldest due date first."""
    rows = regressions.withColumn("overdue", overdue(today))
    if owner is not None:
        rows = rows.where(F.col("owner") == F.lit(owner))
    if statuses:
        rows = rows.where(F.col("status").isin(*statuses))
    if direction is not None:
        rows = rows.where(F.col("direction") == F.lit(direction))
    if only_overdue:
        rows = rows.where(F.col("overdue"))
    return rows.orderBy("triage_due_dt", "owner", "change_dt", "regression_id")


def acknowledge(spark: SparkSession, lake: Lake, regression_id: str, by: str, note: str | None = None,
                at: datetime.datetime | None = None) -> None:
    set_status(spark, lake, F.col("regression_id") == F.lit(regression_id), f"id {regression_id!r}",
               "acknowledged", by, note, at)


def close(spark: SparkSession, lake: Lake, regression_id: str, by: str, note: str | None = None,
          at: datetime.datetime | None = None) -> None:
    set_status(spark, lake, F.col("regression_id") == F.lit(regression_id), f"id {regression_id!r}",
               "closed", by, note, at)


def set_status(spark: SparkSession, lake: Lake, where: Column, what: str, status: str, by: str,
               note: str | None = None, at: datetime.datetime | None = None) -> int:
    """Set `status` (acknowledged or closed) on the regressions `where` selects, with who,
    when and why; later mines keep it. Returns how many rows changed."""
    if status not in _FIELDS:
        raise ValueError(f"status {status!r}: a person sets one of {sorted(_FIELDS)}")
    if not by:
        raise ValueError("say who: --by NAME")
    at = at or datetime.datetime.now(datetime.timezone.utc)
    with catalog.table_lock(lake, REGRESSIONS):  # read, change, publish: no mine in between
        name = catalog.ensure_table(spark, lake, REGRESSIONS)
        table = spark.table(name)
        found = table.where(where).select("regression_id", "status").collect()
        if not found:
            raise KeyError(f"no regression with {what} in {name}; list them with: perflake triage list --all")
        if any(r.status == "cleared" for r in found):
            raise ValueError(f"the regression with {what} was cleared (its next run did not agree): nothing to triage")
        if any(r.status == "closed" for r in found):  # who closed it and why are kept, never overwritten
            raise ValueError(f"the regression with {what} is closed already; closing is final")
        who, when, why = _FIELDS[status]
        updates = {"status_since": F.when(F.col("status") != F.lit(status), F.lit(at)).otherwise(F.col("status_since")),
                   "status": F.lit(status), who: F.lit(by), when: F.lit(at), why: F.lit(note).cast("string")}
        for col, value in updates.items():
            table = table.withColumn(col, F.when(where, value).otherwise(F.col(col)))
        # The table is an input of its own new state; overwrite publishes a new snapshot
        # directory, so the plan reads the old files while it writes (catalog._publish_snapshot).
        catalog.overwrite(spark, lake, table, REGRESSIONS)
        return len(found)
