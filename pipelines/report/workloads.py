"""The nightly report's models section: each nightly workload's projected step time and
tokens/s on every GPU measured that night (perf.workload_projections, written by the
mine), against the same projection as of the night before, with the software of both
nights and what the figures rest on, and the step time over the nights."""
from __future__ import annotations

import math

import pandas as pd

from pipelines.projection.workload_table import night_changes
from pipelines.report import charts
from pipelines.report.html import empty, table, tag
from pipelines.report.sections import gpu_label
from pipelines.report.svg import duration_ns, esc, slug

CHANGE_PCT = 2.0       # a projected step time that moved this much since the night before is headlined
HISTORY_NIGHTS = 30    # nights drawn per workload and scenario


def section(rows: pd.DataFrame | None, dt: str, torch: pd.DataFrame | None = None) -> str:
    """The section's HTML from perf.workload_projections `rows` (as-of nights up to `dt`;
    None: the table does not exist) and the torch versions of the nights' runs."""
    if rows is None or rows.empty:
        return empty("No workload projections in this lake yet: the nightly mine writes perf.workload_projections "
                     "for every catalog GPU a night measured (the presets and scenarios of "
                     "pipelines/projection/nightly_workloads.yaml; a SKU outside kernels_bench/hardware.yaml, such "
                     "as the demo's cpu, has no roofs and is not projected); `perflake model PRESET --gpu all "
                     "--save` writes them by hand.", "no-workloads")
    night = night_changes(rows, dt, torch)
    if night.empty:
        return empty(f"No workload projected as of {dt}: no catalog GPU was measured on this night.", "no-workloads")
    parts = [f"<p>Each preset's step, projected from the kernels measured on each GPU up to this night "
             f"(model {esc(night['model'].iloc[0])}: the sum of its kernel calls, each priced from its measured "
             f"median, else interpolated between measured shapes, else the roofline), against the same projection "
             f"as of the GPU's previous measured night. Tokens/s is of the tp GPUs together; per GPU divides it by "
             f"tp. <code>perflake model PRESET --gpu SKU --history --calls</code> shows the calls behind a "
             f"change.</p>", _headlines(night)]
    cols = ["workload", "scenario", "GPU", "step", "tokens/s", "tokens/s per GPU", "change", "vs night", "torch",
            "measured / interp. / roofline", "MFU", "energy/token", "memory/GPU"]
    body = [[r.workload, r.scenario, _gpu(r.target_sku, r.device_kind), duration_ns(r.step_ns),
             _count(r.tokens_per_s), _count(r.tokens_per_s_per_gpu), _change(r.change_pct), _text(r.prev_dt),
             _software(r), f"{r.measured_pct:.0f} / {r.interpolated_pct:.0f} / {r.roofline_pct:.0f} %",
             _pct(r.mfu_pct), _joules(r.energy_per_token_j),
             f"{r.memory_per_gpu_gb:.1f} GB" + ("" if r.fits else " (does not fit)")]
            for r in night.itertuples(index=False)]
    parts.append(table(cols, body, cls="workloads", id_="workload-projections", raw={"GPU", "change"},
                       numeric={"step", "tokens/s", "tokens/s per GPU", "change", "MFU", "energy/token"}))
    sources = night.drop_duplicates(["target_sku", "device_kind"])
    parts.append("<p>What the figures rest on (per GPU):</p><ul class=\"workload-sources\">" + "".join(
        f"<li>{_gpu(r.target_sku, r.device_kind)}: {esc(r.context)}</li>" for r in sources.itertuples(index=False))
        + "</ul>")
    parts.append("<div class=\"charts\">" + "".join(history_charts(rows, night)) + "</div>")
    return "".join(parts)


def _headlines(night: pd.DataFrame) -> str:
    moved = night[night["change_pct"].abs() >= CHANGE_PCT].sort_values("change_pct", ascending=False)
    if moved.empty:
        compared = night["change_pct"].notna().sum()
        return (f"<p id=\"workload-changes\">No projected step time moved by {CHANGE_PCT:g} % or more against the "
                f"night before ({compared} of {len(night)} projections had an earlier night).</p>")
    items = []
    for r in moved.itertuples(index=False):
        word = "slower" if r.change_pct > 0 else "faster"
        sim = " [SIMULATED data]" if r.simulated else ""
        items.append(f"<li>{esc(r.workload)} {esc(r.scenario)} on {esc(gpu_label(r.target_sku, r.device_kind))} got "
                     f"{tag(f'{abs(r.change_pct):.1f} % {word}', word)} (step {esc(duration_ns(r.prev_step_ns))} "
                     f"&rarr; {esc(duration_ns(r.step_ns))}, as of {esc(r.prev_dt)} &rarr; {esc(r.as_of_dt)})"
                     f"{esc(_software_change(r))}{esc(sim)}</li>")
    return f"<ul id=\"workload-changes\">{''.join(items)}</ul>"


def history_charts(rows: pd.DataFrame, night: pd.DataFrame) -> list[str]:
    """One inline SVG chart per workload and scenario of `night` (night_changes rows):
    the step time per as-of night in `rows`, one line per GPU of `night`."""
    parts = []
    for (workload, scenario), g in night.groupby(["workload", "scenario"], sort=True):
        keys = set(zip(g["target_sku"], g["device_kind"], g["software"]))
        past = rows[(rows["workload"] == workload) & (rows["scenario"] == scenario) & (rows["as_of_dt"] != "")]
        past = past[[k in keys for k in zip(past["target_sku"], past["device_kind"], past["software"])]]
        nights = sorted(past["as_of_dt"].unique())[-HISTORY_NIGHTS:]
        lines: dict[str, list[dict]] = {}
        for r in past[past["as_of_dt"].isin(nights)].itertuples(index=False):
            label = gpu_label(r.target_sku, r.device_kind) + (f" torch {r.software}" if r.software else "")
            lines.setdefault(label, []).append({
                "dt": r.as_of_dt, "step_ns": r.step_ns,
                "tip": f"{workload} {scenario} on {label}, as of {r.as_of_dt}: step {duration_ns(r.step_ns)}, "
                       f"{_count(r.tokens_per_s)} tokens/s, measured {r.measured_pct:.0f} % of the time"})
        title = f"{workload} {scenario}: projected step per night"
        parts.append(f"<div><h3>{esc(workload)} {esc(scenario)}</h3>"
                     + charts.step_history(f"workload-history-{slug(workload, scenario)}", title, lines) + "</div>")
    return parts


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _gpu(sku, kind) -> str:
    return esc(sku) + (" " + tag("simulated", "simulated") if kind == "simulated" else "")


def _software(r) -> str:
    now, before = _text(getattr(r, "torch", None)), _text(getattr(r, "prev_torch", None))
    return f"{before} → {now}" if now and before and now != before else now


def _software_change(r) -> str:
    now, before = getattr(r, "torch", None), getattr(r, "prev_torch", None)
    if isinstance(now, str) and isinstance(before, str) and now != before:
        return f"; torch {before} → {now}"
    return ""


def _change(v) -> str:
    if v is None or v != v:
        return "first night"
    if abs(v) < CHANGE_PCT:
        return esc(f"{v:+.1f} %")
    return tag(f"{v:+.1f} %", "slower" if v > 0 else "faster")


def _count(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.0f}"


def _pct(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f} %"


def _joules(v) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g} J"
