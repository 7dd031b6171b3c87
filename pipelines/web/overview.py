"""Page 1, the overview: the newest night of each pool (coverage, pools missing), the
open regressions and improvements by cause, unstable cases and overdue triage."""
from __future__ import annotations

import datetime

from fastapi import APIRouter, Request

from pipelines.web import params
from pipelines.web.reader import Reader
from pipelines.web.render import page
from pipelines.web.sql import night_filter

router = APIRouter()
OPEN = ("provisional", "confirmed")


def newest_nights(reader: Reader, as_of: str | None) -> list[dict]:
    """(pool, dt) of each pool's newest night on or before `as_of`, newest first."""
    if not reader.has("runs"):
        return []
    return reader.rows("SELECT pool, max(dt) AS dt, count(DISTINCT run_id) AS runs FROM perf.runs "
                       "WHERE ? IS NULL OR dt <= ? GROUP BY pool ORDER BY dt DESC, pool", [as_of, as_of])


def night_before(reader: Reader, as_of: str | None) -> dict[str, dict]:
    """pool -> {"a": a run of the night before its newest, "b": a run of its newest}: the
    overview links each pool's newest night to its comparison with the night before."""
    if not reader.has("runs"):
        return {}
    rows = reader.rows("SELECT pool, dt, max(run_id) AS run_id, dense_rank() OVER (PARTITION BY pool ORDER BY dt DESC) "
                       "AS rank FROM perf.runs WHERE ? IS NULL OR dt <= ? GROUP BY pool, dt QUALIFY rank <= 2",
                       [as_of, as_of])
    out: dict[str, dict] = {}
    for r in rows:
        out.setdefault(r["pool"], {})["b" if r["rank"] == 1 else "a"] = r["run_id"]
    return {pool: pair for pool, pair in out.items() if len(pair) == 2}


def coverage(reader: Reader, nights: list[dict]) -> list[dict]:
    """Per pool's newest night: cases by status (latest attempt) and unstable ones."""
    if not nights or not reader.has("case_stats"):
        return []
    where, args = night_filter(nights)
    rows = reader.rows(
        f"SELECT pool, dt, count(*) AS cases, count(*) FILTER (status = 'ok') AS ok, "
        f"count(*) FILTER (status = 'failed') AS failed, count(*) FILTER (status = 'timeout') AS timeout, "
        f"count(*) FILTER (status = 'stopped') AS stopped, count(*) FILTER (status = 'skipped') AS skipped, "
        f"count(*) FILTER (status NOT IN ('ok', 'failed', 'timeout', 'stopped', 'skipped')) AS other, "
        f"count(*) FILTER (status = 'ok' AND NOT coalesce(stable, true)) AS unstable, "
        f"bool_or(device_kind = 'simulated') AS simulated "
        f"FROM perf.case_stats WHERE {where} GROUP BY pool, dt ORDER BY dt DESC, pool", args)
    return rows


def open_changes(reader: Reader, as_of: str | None) -> list[dict]:
    """Provisional and confirmed changes by direction, status, cause and device kind (a
    simulated series never pooled with a real one), with how many series share each."""
    if not reader.has("regressions"):
        return []
    return reader.rows(
        "SELECT direction, status, coalesce(cause, '(no attribute changed)') AS cause, device_kind, "
        "count(*) AS changes, count(DISTINCT series_key) AS series, min(change_dt) AS first_dt, "
        "max(change_dt) AS last_dt, median(change_pct) AS median_change_pct FROM perf.regressions "
        "WHERE list_contains(?, status) AND (? IS NULL OR change_dt <= ?) "
        "GROUP BY ALL ORDER BY direction DESC, status, series DESC, cause", [list(OPEN), as_of, as_of])


def unstable_cases(reader: Reader, nights: list[dict], limit: int = 20) -> list[dict]:
    if not nights or not reader.has("case_stats"):
        return []
    where, args = night_filter(nights, "cs.")
    return reader.rows(
        f"SELECT cs.series_key, cs.pool, cs.dt, cs.kernel, cs.backend, cs.dtype, cs.gpu_sku, cs.device_kind, "
        f"cs.rel_noise, cs.median_ns, cs.n, cs.n_kept FROM perf.case_stats cs "
        f"WHERE ({where}) AND cs.status = 'ok' AND NOT coalesce(cs.stable, true) "
        f"ORDER BY cs.rel_noise DESC NULLS LAST LIMIT ?", [*args, limit])


def overdue(reader: Reader, today: str, limit: int = 50) -> list[dict]:
    if not reader.has("regressions"):
        return []
    return reader.rows(
        "SELECT regression_id, series_key, owner, triage_due_dt, pool, kernel, dtype, gpu_sku, device_kind, metric, "
        "change_dt, change_pct, cause, status FROM perf.regressions "
        "WHERE direction = 'regression' AND list_contains(?, status) AND triage_due_dt < ? "
        "ORDER BY triage_due_dt, owner, regression_id LIMIT ?", [list(OPEN), today, limit])


@router.get("/")
def overview(request: Request, date: str | None = None):
    as_of = params.date(date)
    reader: Reader = request.app.state.reader
    nights = newest_nights(reader, as_of)
    newest = max((n["dt"] for n in nights), default=None)
    missing = [n for n in nights if n["dt"] != newest]
    today = as_of or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    shown = dict(coverage=coverage(reader, nights), changes=open_changes(reader, as_of),
                 unstable=unstable_cases(reader, nights), overdue=overdue(reader, today))
    simulated = any(r.get("simulated") or r.get("device_kind") == "simulated" for rows in shown.values() for r in rows)
    return page(request, "overview.html", current="overview", as_of=as_of, newest=newest, nights=nights,
                missing=missing, today=today, pairs=night_before(reader, as_of), simulated=simulated, **shown)
