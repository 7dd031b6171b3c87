"""Page 2, the series explorer: every series, filtered by its case and hardware
attributes and a search, with a sparkline and the latest change per row; sortable and
paginated, every choice in the query string."""
from __future__ import annotations

import datetime

from fastapi import APIRouter, Request

from pipelines.web import params
from pipelines.web.reader import Reader
from pipelines.web.render import page
from pipelines.web.sql import SHAPE

router = APIRouter()
PER_PAGE = 50
SPARK_POINTS = 30
SPARK_WINDOW_DAYS = 120  # partitions read for the sparklines: the newest nights only
FACETS = ("family", "kernel", "backend", "dtype", "gpu_sku", "pool", "device_kind")
# sort name -> ORDER BY text (the dashboard's own; the URL only picks a key)
SORTS = {"kernel": "s.kernel, s.dtype, shape", "family": "s.family, s.kernel", "sku": "s.gpu_sku, s.kernel",
         "pool": "s.pool, s.kernel", "last": "s.last_dt", "median": "s.last_median_ns", "runs": "s.n_runs",
         "change": "abs(lc.change_pct)"}
_COLUMN = {"family": "s.family", "kernel": "s.kernel", "backend": "c.backend", "dtype": "s.dtype",
           "gpu_sku": "s.gpu_sku", "pool": "s.pool", "device_kind": "s.device_kind"}


def _latest_change(reader: Reader) -> str:
    if not reader.has("regressions"):
        return ("SELECT NULL::VARCHAR AS series_key, NULL::VARCHAR AS change_dt, NULL::DOUBLE AS change_pct, "
                "NULL::VARCHAR AS change_status, NULL::VARCHAR AS direction, NULL::VARCHAR AS metric WHERE false")
    return ("SELECT series_key, change_dt, change_pct, status AS change_status, direction, metric "
            "FROM perf.regressions QUALIFY row_number() OVER (PARTITION BY series_key "
            "ORDER BY change_dt DESC, metric) = 1")


def find_series(reader: Reader, filters: dict, shape: list[tuple[str, str]], q: str | None, sort: str,
                descending: bool, page_no: int) -> tuple[list[dict], int]:
    """(the page's rows, how many series match)."""
    if not reader.has("series"):
        return [], 0
    conds, args = [], []
    for facet in FACETS:
        if filters.get(facet):
            conds.append(f"{_COLUMN[facet]} = ?")
            args.append(filters[facet])
    for key, value in shape:
        conds.append("list_contains(map_extract(c.params, ?), ?)")
        args += [key, value]
    if q:
        for word in q.split():
            # a substring, not a LIKE pattern: '_' (allowed in names) is no wildcard here
            conds.append(f"contains(lower(concat_ws(' ', s.family, s.kernel, c.backend, s.dtype, s.gpu_sku, "
                         f"s.pool, {SHAPE})), lower(?))")
            args.append(word)
    order = SORTS[sort] + (" DESC NULLS LAST" if descending else " NULLS LAST")
    rows = reader.rows(
        f"WITH lc AS ({_latest_change(reader)}) "
        f"SELECT s.series_key, s.family, s.kernel, c.backend, s.dtype, {SHAPE} AS shape, s.gpu_sku, s.pool, "
        f"s.device_kind, s.case_id, s.last_dt, s.n_runs, s.last_median_ns, s.baseline_ns, lc.change_dt, "
        f"lc.change_pct, lc.change_status, lc.direction, lc.metric, count(*) OVER () AS total "
        f"FROM perf.series s LEFT JOIN perf.cases c USING (case_id) LEFT JOIN lc USING (series_key) "
        f"WHERE {' AND '.join(conds) or 'true'} ORDER BY {order}, s.series_key LIMIT ? OFFSET ?",
        [*args, PER_PAGE, (page_no - 1) * PER_PAGE])
    return rows, (rows[0]["total"] if rows else 0)


def sparklines(reader: Reader, rows: list[dict]) -> dict[str, list]:
    """series_key -> [[dt, median_ns], ...], the newest SPARK_POINTS runs of each row's series."""
    if not rows or not reader.has("case_stats"):
        return {}
    newest = max(r["last_dt"] for r in rows if r["last_dt"]) if any(r["last_dt"] for r in rows) else None
    since = ((datetime.date.fromisoformat(newest) - datetime.timedelta(days=SPARK_WINDOW_DAYS)).isoformat()
             if newest else "0000-00-00")
    points = reader.frame(
        "SELECT series_key, dt, median_ns FROM perf.case_stats "
        "WHERE dt >= ? AND list_contains(?, series_key) AND status = 'ok' AND median_ns IS NOT NULL "
        "QUALIFY row_number() OVER (PARTITION BY series_key ORDER BY dt DESC, run_id DESC) <= ? "
        "ORDER BY series_key, dt, run_id", [since, [r["series_key"] for r in rows], SPARK_POINTS])
    return {key: g[["dt", "median_ns"]].values.tolist() for key, g in points.groupby("series_key")}


def facet_values(reader: Reader) -> dict[str, list[str]]:
    if not reader.has("series"):
        return {f: [] for f in FACETS}
    df = reader.frame("SELECT DISTINCT s.family, s.kernel, c.backend, s.dtype, s.gpu_sku, s.pool, s.device_kind "
                      "FROM perf.series s LEFT JOIN perf.cases c USING (case_id)")
    return {f: sorted(v for v in df[f].dropna().unique()) for f in FACETS}


@router.get("/explorer")
def explorer(request: Request, q: str | None = None, shape: str | None = None, sort: str | None = None,
             order: str | None = None, family: str | None = None,
             kernel: str | None = None, backend: str | None = None, dtype: str | None = None,
             gpu_sku: str | None = None, pool: str | None = None, device_kind: str | None = None):
    filters = {"family": params.name(family, "family"), "kernel": params.name(kernel, "kernel"),
               "backend": params.name(backend, "backend"), "dtype": params.name(dtype, "dtype"),
               "gpu_sku": params.name(gpu_sku, "gpu_sku"), "pool": params.name(pool, "pool"),
               "device_kind": params.name(device_kind, "device_kind")}
    pairs, text = params.shape(shape), params.search(q)
    sort = params.choice(sort, "sort", tuple(SORTS), "kernel")
    descending = params.choice(order, "order", ("asc", "desc"), "asc") == "desc"
    number = params.page(request.query_params.get("page"))  # `page` is the renderer's name here
    reader: Reader = request.app.state.reader
    rows, total = find_series(reader, filters, pairs, text, sort, descending, number)
    state = {**filters, "q": text, "shape": shape or None, "sort": sort, "order": "desc" if descending else None}
    return page(request, "explorer.html", current="explorer", rows=rows, total=total, page_no=number,
                pages=max(1, -(-total // PER_PAGE)), state=state, facets=facet_values(reader),
                sparks=sparklines(reader, rows))
