"""Page 4, regressions: open, acknowledged, closed (or cleared) changes grouped by cause
with the number of series sharing each, and the triage forms. Acknowledge and close
write through pipelines.triage.status, the path `perflake triage` takes, so the change
shows in `perflake triage list` as soon as the form returns."""
from __future__ import annotations

import threading
from itertools import groupby

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse
from starlette.exceptions import HTTPException

from pipelines.query import users as sqlusers
from pipelines.web import csrf, params
from pipelines.web.reader import Reader
from pipelines.web.render import link, page

router = APIRouter()
STATES = {"open": ("provisional", "confirmed"), "acknowledged": ("acknowledged",), "closed": ("closed",),
          "cleared": ("cleared",)}
MAX_ROWS = 1000
_WRITE = threading.Lock()  # one triage write at a time: each publishes a new snapshot of the table


def listed(reader: Reader, statuses: tuple[str, ...], pool: str | None, owner: str | None, family: str | None,
           direction: str | None) -> list[dict]:
    if not reader.has("regressions"):
        return []
    return reader.rows(
        "SELECT regression_id, series_key, metric, unit, pool, gpu_sku, device_kind, family, kernel, backend, dtype, "
        "change_dt, change_run_id, change_pct, sigmas, q_value, direction, status, "
        "coalesce(cause, '(no attribute changed)') AS cause, owner, triage_due_dt, acknowledged_by, acknowledged_at, "
        "note, closed_by, closed_at, close_note "
        "FROM perf.regressions WHERE list_contains(?, status) AND (? IS NULL OR pool = ?) "
        "AND (? IS NULL OR owner = ?) AND (? IS NULL OR family = ?) AND (? IS NULL OR direction = ?) "
        "ORDER BY cause, device_kind, direction, change_dt DESC, regression_id LIMIT ?",
        [list(statuses), pool, pool, owner, owner, family, family, direction, direction, MAX_ROWS])


def by_cause(rows: list[dict]) -> list[dict]:
    """Groups of rows sharing a cause and a device kind (simulated series are never
    pooled with real ones, as in the owners' digest), the largest (most series) first."""
    groups = [{"cause": cause, "device_kind": kind, "rows": list(g)}
              for (cause, kind), g in groupby(rows, key=lambda r: (r["cause"], r["device_kind"]))]
    for g in groups:
        g["series"] = len({r["series_key"] for r in g["rows"]})
    return sorted(groups, key=lambda g: (-g["series"], g["cause"], g["device_kind"] or ""))


@router.get("/regressions")
def regressions(request: Request, state: str | None = None, pool: str | None = None, owner: str | None = None,
                family: str | None = None, direction: str | None = None, done: str | None = None):
    state = params.choice(state, "state", tuple(STATES), "open")
    direction = params.choice(direction, "direction", ("regression", "improvement", "any"), "regression")
    filters = {"pool": params.name(pool, "pool"), "owner": params.name(owner, "owner"),
               "family": params.name(family, "family")}
    rows = listed(request.app.state.reader, STATES[state], *filters.values(), None if direction == "any" else direction)
    done = done if done and all(c.isalnum() or c in ":-" for c in done) and len(done) < 40 else None
    return page(request, "regressions.html", current="regressions", state=state, direction=direction,
                filters=filters, groups=by_cause(rows), total=len(rows),
                simulated=any(r["device_kind"] == "simulated" for r in rows), capped=len(rows) >= MAX_ROWS, done=done,
                states=tuple(STATES), identities=bool(sqlusers.users(request.app.state.lake)))


def check_identity(lake, who: str, password: str) -> None:
    """With users on the lake's SQL endpoint (`perflake sql-server add-user`), a triage
    write names one of them and proves it with that user's password: the same identities
    the JDBC endpoint authenticates and audits (docs/security.md). Without users the
    dashboard serves loopback (or a token) and `by` names the person."""
    if not sqlusers.users(lake):
        return
    if not password or not sqlusers.check_password(lake, who, password):
        raise HTTPException(401, f"{who} with this password is not a user of the SQL endpoint of this lake; triage "
                                 f"actions need the name and password you use for JDBC")


def _write(lake, action: str, regression_id: str, who: str, why: str) -> tuple[int, str] | None:
    """The write, through pipelines.triage.status, in a process of its own (triage.apply):
    the dashboard never holds a Spark JVM, nor with it the lake's embedded metastore.
    Where this process runs Spark on this lake already (the tests), in it."""
    from pyspark import SparkContext

    from pipelines.triage.apply import apply, write_here

    sc = SparkContext._active_spark_context  # any thread's (a session is the thread's that made it)
    here = sc is not None and sc.getConf().get("spark.sql.warehouse.dir", "").removeprefix("file:") == str(
        lake.warehouse)
    return (write_here if here else apply)(lake, action, regression_id, who, why)


@router.post("/regressions/{regression_id}/{action}")
def set_status(request: Request, regression_id: str, action: str, by: str = Form(""), note: str = Form(""),
               csrf_token: str = Form(""), state: str = Form("open"), password: str = Form("")):
    csrf.check(request, csrf_token)
    regression_id = params.regression_id(regression_id)
    action = params.choice(action, "action", ("ack", "close"), "")
    who, why = params.person(by), params.note(note)
    state = state if state in STATES else "open"
    lake = request.app.state.lake
    check_identity(lake, who, password)
    with _WRITE:
        try:
            refused = _write(lake, action, regression_id, who, why)
        finally:
            request.app.state.reader.reload("regressions")
    if refused:
        raise HTTPException(*refused)
    return RedirectResponse(link(request, "/regressions", state=state, done=f"{action}:{regression_id}"),
                            status_code=303)
