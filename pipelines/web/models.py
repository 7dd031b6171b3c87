"""Page 7, models: each nightly workload's projected step time and tokens/s on every GPU
(perf.workload_projections, written by the mine from the kernels measured up to each
night), its newest night against the night before with the software of both, what the
figures rest on, and the step time over the nights. Simulated data is labelled."""
from __future__ import annotations

import pandas as pd
from fastapi import APIRouter, Request
from markupsafe import Markup

from pipelines.projection.workload_table import night_changes, torch_versions
from pipelines.report.workloads import CHANGE_PCT, history_charts
from pipelines.web import params
from pipelines.web.reader import Reader, records
from pipelines.web.render import page

router = APIRouter()
HISTORY_NIGHTS = 60  # as-of nights read per page (the charts draw the newest 30)


def workloads(reader: Reader) -> list[str]:
    if not reader.has("workload_projections"):
        return []
    return [r["workload"] for r in reader.rows("SELECT DISTINCT workload FROM perf.workload_projections "
                                               "ORDER BY workload")]


def projections(reader: Reader, workload: str | None, as_of: str | None) -> pd.DataFrame:
    """perf.workload_projections of `workload` (or every one) as of the HISTORY_NIGHTS
    nights on or before `as_of` (or the newest)."""
    return reader.frame(
        "SELECT * FROM perf.workload_projections WHERE as_of_dt <> '' AND (? IS NULL OR as_of_dt <= ?) "
        "AND (? IS NULL OR workload = ?) AND as_of_dt IN (SELECT DISTINCT as_of_dt FROM perf.workload_projections "
        "WHERE as_of_dt <> '' AND (? IS NULL OR as_of_dt <= ?) ORDER BY as_of_dt DESC LIMIT ?)",
        [as_of, as_of, workload, workload, as_of, as_of, HISTORY_NIGHTS])


def torch_of(reader: Reader, dates) -> pd.DataFrame:
    """The torch versions of the runs of `dates`, per GPU and device kind."""
    if not reader.has("runs") or not len(dates):
        return pd.DataFrame()
    return torch_versions(reader.frame("SELECT DISTINCT dt, gpu_sku, device_kind, torch_version FROM perf.runs "
                                       "WHERE list_contains(?, dt)", [sorted(set(dates))]))


@router.get("/models")
def models_page(request: Request, workload: str | None = None, date: str | None = None):
    workload, as_of = params.name(workload, "workload"), params.date(date)
    reader: Reader = request.app.state.reader
    known = workloads(reader)
    if workload and workload not in known:
        raise params.NotFound(f"no workload {workload!r} in perf.workload_projections; "
                              f"projected: {', '.join(known) or 'none'}")
    rows = projections(reader, workload, as_of) if known else pd.DataFrame()
    newest = night_changes(rows, None, torch_of(reader, rows["as_of_dt"])) if not rows.empty else rows
    latest = newest["as_of_dt"].max() if not newest.empty else None
    return page(request, "models.html", current="models", workloads=known, workload=workload, as_of=as_of,
                rows=records(newest), latest=latest, change_pct=CHANGE_PCT,
                simulated=bool(not newest.empty and newest["simulated"].fillna(False).any()),
                sources=records(newest.drop_duplicates(["target_sku", "device_kind"])) if not newest.empty else [],
                charts=[Markup(c) for c in history_charts(rows, newest)] if not newest.empty else [])
