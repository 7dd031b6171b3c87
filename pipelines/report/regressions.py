"""The night's regressions and improvements, each with its history chart.

Reads perf.regressions when that table exists (regression detection writes it); the
report never detects anything itself. Column names are read through ALIASES so that the
section follows the table contract (series_key, change and last good run, before/after
levels, change percent, significance, direction, status, attribution) without pinning
one spelling; a column the table lacks is shown as missing, never invented.
"""
from __future__ import annotations

import pandas as pd

from pipelines.report import charts
from pipelines.report.html import empty, table, tag
from pipelines.report.svg import duration_ns, esc, slug

ALIASES = {
    "dt": ("dt", "detected_dt", "change_dt"),
    "change_run_id": ("change_run_id", "first_bad_run_id", "change_run"),
    "last_good_run_id": ("last_good_run_id", "good_run_id", "last_good_run"),
    "before_ns": ("before_ns", "before_median_ns", "level_before_ns", "before_level_ns"),
    "after_ns": ("after_ns", "after_median_ns", "level_after_ns", "after_level_ns"),
    "change_pct": ("change_pct", "change_percent", "pct_change", "delta_pct"),
    "significance": ("q_value", "p_value", "significance", "pvalue"),
    "direction": ("direction",),
    "status": ("status",),
    "attribution": ("cause", "attribution", "what_changed"),
}
MAX_CHARTS = 30


def resolve(regressions: pd.DataFrame) -> pd.DataFrame:
    """The table with its columns renamed to the logical names above (the first alias
    present wins); logical columns the table lacks are added as missing (None)."""
    out = regressions.copy()
    for name, aliases in ALIASES.items():
        found = next((a for a in aliases if a in regressions.columns), None)
        out[name] = regressions[found] if found is not None else None
    if out["direction"].isna().all() and out["change_pct"].notna().any():
        # Latency: a higher level after the change is slower.
        out["direction"] = out["change_pct"].map(lambda p: None if p != p else ("regression" if p > 0 else
                                                                                 "improvement"))
    return out


def of_night(regressions: pd.DataFrame, dt: str, run_ids) -> pd.DataFrame:
    """Rows detected on the night `dt` or whose change run ran that night."""
    r = resolve(regressions)
    on_night = r["dt"].astype("string").eq(dt).fillna(False) | r["change_run_id"].isin(list(run_ids)).fillna(False)
    return r[on_night].reset_index(drop=True)


def section(regressions: pd.DataFrame | None, dt: str, run_ids, series: pd.DataFrame,
            history: pd.DataFrame) -> str:
    """HTML body of the section: an honest line when the table does not exist or holds
    nothing for the night; otherwise one table and one history chart per change."""
    if regressions is None:
        return empty("No regression table yet: perf.regressions does not exist in this lake, so this report "
                     "shows no regressions or improvements (it does not detect changes itself).",
                     "no-regression-table")
    night = of_night(regressions, dt, run_ids)
    if night.empty:
        return empty(f"perf.regressions holds no change detected on {dt} ({len(regressions)} rows on other "
                     f"nights).", "no-regressions")
    info = series.set_index("series_key") if not series.empty and "series_key" in night else pd.DataFrame()
    # Energy-per-call changes get a table of their own (their charts would be latency).
    is_energy = night["metric"].eq("energy").fillna(False) if "metric" in night else pd.Series(False, night.index)
    energy, night = night[is_energy], night[~is_energy]
    parts = []
    for direction, title in (("regression", "Regressions (slower)"), ("improvement", "Improvements (faster)")):
        rows = night[night["direction"] == direction]
        parts.append(f"<h3>{esc(title)}: {len(rows)}</h3>")
        if rows.empty:
            parts.append(empty(f"no {direction}s on {dt}"))
            continue
        parts.append(_table(rows, info, direction))
        for i, r in enumerate(rows.head(MAX_CHARTS).itertuples(index=False)):
            parts.append(_chart(r, info, history, direction))
        if len(rows) > MAX_CHARTS:
            parts.append(empty(f"{len(rows) - MAX_CHARTS} more {direction}s not drawn; query perf.regressions."))
    other = night[~night["direction"].isin(["regression", "improvement"])]
    if not other.empty:
        parts.append(f"<h3>Other changes: {len(other)}</h3>" + _table(other, info, "other"))
    if not energy.empty:
        parts.append(f"<h3>Energy per call: {len(energy)} change(s)</h3>" + _energy_table(energy, info))
    return "".join(parts)


def _energy_table(rows: pd.DataFrame, info: pd.DataFrame) -> str:
    """Energy-per-call changes, with the latency on the same runs (did the speed hold?)."""
    cols = ["series", "direction", "status", "energy change %", "before", "after", "latency change %", "change run",
            "attribution"]
    body = []
    for r in rows.itertuples(index=False):
        before, after = getattr(r, "before_value", None), getattr(r, "after_value", None)
        lat = (r.after_ns / r.before_ns - 1) * 100 if r.before_ns and r.after_ns else None
        body.append([esc(_describe(r, info)), esc(r.direction or "–"), tag(str(r.status or "–"), r.direction or ""),
                     _pct(r.change_pct), _joules(before), _joules(after), _pct(lat), esc(r.change_run_id or "–"),
                     esc(_attribution(r.attribution))])
    return table(cols, body, cls="regressions energy", raw=set(cols),
                 numeric={"energy change %", "before", "after", "latency change %"})


def _pct(v) -> str:
    return "–" if v is None or v != v else f"{v:+.1f} %"


def _joules(v) -> str:
    return "–" if v is None or v != v else f"{v * 1e3:.4g} mJ"


def _describe(r, info: pd.DataFrame) -> str:
    """kernel, dtype, GPU and case of a change: from its own row, else from perf.series."""
    key = getattr(r, "series_key", None)
    s = info.loc[key] if key is not None and key in info.index else None

    def get(name):
        v = getattr(r, name, None)
        if (v is None or v != v) and s is not None:
            v = s.get(name)
        return v

    if get("kernel") is None and get("case_id") is None:
        return f"series {key}"
    kind = " (simulated)" if get("device_kind") == "simulated" else ""
    return f"{get('kernel')} {get('dtype')} on {get('gpu_sku')}{kind}, case {get('case_id')}"


def _table(rows: pd.DataFrame, info: pd.DataFrame, direction: str) -> str:
    cols = ["series", "status", "change %", "before", "after", "significance", "last good run", "change run",
            "attribution"]
    body = []
    for r in rows.itertuples(index=False):
        pct = r.change_pct
        body.append([esc(_describe(r, info)), tag(str(r.status or "–"), direction),
                     "–" if pct is None or pct != pct else f"{pct:+.1f} %", duration_ns(r.before_ns),
                     duration_ns(r.after_ns), "–" if r.significance is None else f"{r.significance:.3g}",
                     esc(r.last_good_run_id or "–"), esc(r.change_run_id or "–"), esc(_attribution(r.attribution))])
    return table(cols, body, cls=f"regressions {direction}s", raw=set(cols), numeric={"change %", "before", "after"})


def _attribution(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {x}" for k, x in v.items())
    return str(v)


def _chart(r, info: pd.DataFrame, history: pd.DataFrame, direction: str) -> str:
    key = getattr(r, "series_key", None)
    pts = history[history["series_key"] == key] if not history.empty and key is not None else history
    title = f"{_describe(r, info)}: {direction}"
    if pts is None or pts.empty:
        return empty(f"{title}: no history points found in perf.case_stats for series {key}")
    points = [{"label": str(p.dt), "median_ns": float(p.median_ns),
               "lo_ns": _f(p.median_ci_low_ns), "hi_ns": _f(p.median_ci_high_ns),
               "tip": f"{p.run_id} ({p.dt}): median {duration_ns(p.median_ns)}, 95 % CI "
                      f"{duration_ns(p.median_ci_low_ns)}..{duration_ns(p.median_ci_high_ns)}"}
              for p in pts.itertuples(index=False)]
    run_ids = list(pts["run_id"])
    change_at = run_ids.index(r.change_run_id) if r.change_run_id in run_ids else None
    return "<h3>" + esc(title) + "</h3>" + charts.history(
        f"history-{slug(key)}", title, points, change_at, _f(r.before_ns), _f(r.after_ns))


def _f(v):
    return None if v is None or v != v else float(v)
