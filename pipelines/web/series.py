"""Page 3, one series: its history (median with the 95 % CI of the median, p10-p90),
change points with their lifecycle state, markers where the run's software changed (with
the difference), efficiency and energy on the same timeline, and the raw samples of any
night with its throttled and outlier samples."""
from __future__ import annotations

from fastapi import APIRouter, Request

from pipelines.web import params
from pipelines.web.reader import Reader
from pipelines.web.render import page
from pipelines.web.sql import PROVENANCE

router = APIRouter()
MAX_SAMPLES = 20_000  # raw samples sent for one night's distribution


def series_row(reader: Reader, key: str) -> dict | None:
    if not reader.has("series"):
        return None
    rows = reader.rows("SELECT s.*, c.backend, c.params, c.flops_per_call, c.bytes_per_call FROM perf.series s "
                       "LEFT JOIN perf.cases c USING (case_id) WHERE s.series_key = ?", [key])
    if not rows:
        return None
    row = rows[0]
    p = row.get("params") or {}
    row["shape"] = ",".join(f"{k}={v}" for k, v in sorted(dict(p).items()))
    return row


def history(reader: Reader, s: dict) -> list[dict]:
    """One point per run of the series, oldest first, with the run's provenance."""
    prov = ", ".join(f"any_value({c}) AS {c}" for c in PROVENANCE)
    return reader.rows(
        f"SELECT cs.run_id, cs.dt, cs.pool, cs.median_ns, cs.median_ci_low_ns, cs.median_ci_high_ns, cs.p10_ns, "
        f"cs.p90_ns, cs.pct_of_peak, cs.energy_per_call_j, cs.stable, cs.n, cs.n_kept, cs.rel_noise, r.reason, "
        f"{', '.join('r.' + c for c in PROVENANCE)} "
        f"FROM perf.case_stats cs JOIN (SELECT run_id, min(started_at) AS started_at, any_value(reason) AS reason, "
        f"{prov} FROM perf.runs GROUP BY run_id) r USING (run_id) "
        f"WHERE cs.series_key = ? AND cs.status = 'ok' AND cs.median_ns IS NOT NULL "
        f"ORDER BY r.started_at, cs.run_id", [s["series_key"]])


def provenance_changes(points: list[dict]) -> list[dict]:
    """Where a run's software differs from the run before it: the run, its date and 'what: old -> new' lines."""
    out = []
    for before, after in zip(points, points[1:]):
        diff = [f"{c.removesuffix('_version')}: {before[c]} -> {after[c]}" for c in PROVENANCE
                if before[c] != after[c]]
        if diff:
            out.append({"run_id": after["run_id"], "dt": after["dt"], "diff": diff})
    return out


def changes(reader: Reader, key: str) -> list[dict]:
    if not reader.has("regressions"):
        return []
    return reader.rows("SELECT regression_id, metric, unit, change_run_id, change_dt, last_good_dt, before_value, "
                       "after_value, change_pct, direction, status, cause, owner, acknowledged_by, note, closed_by, "
                       "close_note FROM perf.regressions WHERE series_key = ? ORDER BY change_dt, metric", [key])


def night_samples(reader: Reader, s: dict, runs: list[str], dt: str, pool: str) -> list[dict]:
    if not reader.has("samples"):
        return []
    return reader.rows("SELECT run_id, iteration, latency_ns, throttled, coalesce(outlier, false) AS outlier "
                       "FROM perf.samples WHERE dt = ? AND pool = ? AND case_id = ? AND list_contains(?, run_id) "
                       "ORDER BY run_id, attempt DESC, iteration LIMIT ?", [dt, pool, s["case_id"], runs, MAX_SAMPLES])


@router.get("/series/{key}")
def series_page(request: Request, key: str, night: str | None = None):
    key = params.series_key(key)
    night = params.date(night, "night")
    reader: Reader = request.app.state.reader
    s = series_row(reader, key)
    if s is None:
        raise params.NotFound(f"no series {key} in perf.series; find one in the explorer")
    points = history(reader, s)
    nights = sorted({p["dt"] for p in points})
    if night is None and nights:
        night = nights[-1]
    if night is not None and night not in nights:
        raise params.NotFound(f"series {key} has no measurement on night {night}; its nights run from "
                              f"{nights[0] if nights else '-'} to {nights[-1] if nights else '-'}")
    on_night = [p for p in points if p["dt"] == night]
    samples = night_samples(reader, s, [p["run_id"] for p in on_night], night, on_night[0]["pool"]) if on_night else []
    steps = changes(reader, key)
    chart = {"points": [{k: p[k] for k in ("run_id", "dt", "median_ns", "median_ci_low_ns", "median_ci_high_ns",
                                            "p10_ns", "p90_ns", "pct_of_peak", "energy_per_call_j", "stable")}
                        for p in points],
             "changes": [{k: c[k] for k in ("regression_id", "metric", "change_dt", "change_pct", "status",
                                            "direction", "cause")} for c in steps],
             "provenance": provenance_changes(points),
             "samples": [[x["latency_ns"], bool(x["throttled"]), bool(x["outlier"])] for x in samples]}
    return page(request, "series.html", current="explorer", s=s, points=points, steps=steps, nights=nights,
                night=night, chart=chart, samples=samples, provenance=chart["provenance"])
