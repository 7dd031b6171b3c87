"""The nightly report's sections other than regressions: roofline per GPU, efficiency
heat map per kernel family, unstable cases, coverage and projections. Each function
takes frames already read and returns the section's HTML body."""
from __future__ import annotations

import math

import pandas as pd

from kernels_bench.hardware import Hardware
from pipelines.report import charts
from pipelines.report.html import empty, table, tag
from pipelines.report.svg import duration_ns, esc, slug

MAX_ROWS = 300


def gpu_label(sku, device_kind) -> str:
    return f"{sku} (simulated)" if device_kind == "simulated" else str(sku)


def _ok(stats: pd.DataFrame) -> pd.DataFrame:
    if stats.empty:
        return stats
    return stats[(stats["status"] == "ok") & (stats["median_ns"] > 0)]


def newest_per_case(stats: pd.DataFrame) -> pd.DataFrame:
    """One row per (GPU, device kind, case): the night's last run of it (by run id), so a
    case measured by several runs of a pool is drawn once."""
    return stats.sort_values("run_id").groupby(["gpu_sku", "device_kind", "case_id"], dropna=False).tail(1)


def roofline(stats: pd.DataFrame, hardware: dict[str, Hardware]) -> str:
    ok = _ok(stats)
    ok = newest_per_case(ok) if not ok.empty else ok
    if ok.empty:
        return empty("no successful measurements on this night")
    parts = []
    for (sku, kind), g in ok.groupby(["gpu_sku", "device_kind"], dropna=False):
        hw = hardware.get(sku)
        placed = g[(g["flops_per_call"] > 0) & (g["bytes_per_call"] > 0)]
        families = sorted(placed["family"].dropna().unique())
        points = [{"x": r.flops_per_call / r.bytes_per_call, "y": r.tflops, "family": r.family, "dtype": r.dtype,
                   "case_id": r.case_id,
                   "tip": f"{r.kernel} {r.backend} {r.dtype} [{r.shape}] on {r.pool}: {r.tflops:.4g} TFLOP/s, "
                          f"{r.gbps:.4g} GB/s, median {duration_ns(r.median_ns)}, "
                          f"{_pct(r.pct_of_peak)} of the roofline bound"}
                  for r in placed.itertuples(index=False)]
        label = gpu_label(sku, kind)
        pools = ", ".join(sorted(g["pool"].unique()))
        title = f"Roofline: {label}, pools {pools}"
        peaks = {d: hw.peak_tflops.get(d) for d in placed["dtype"].unique()} if hw else None
        parts.append(f"<h3>{esc(label)}</h3>")
        if hw is None:
            parts.append(empty(f"{sku} is not in the hardware catalog: no roofs drawn, points only."))
        parts.append(charts.roofline(f"roofline-{slug(sku, kind)}", title, points, peaks,
                                     hw.memory_bandwidth_gbps if hw else None, families))
        unplaced = len(g) - len(placed)
        runs = g["run_id"].nunique()
        note = f"{len(placed)} cases placed (the newest of {runs} runs where several measured a case)" \
            if runs > 1 else f"{len(placed)} cases placed"
        if unplaced:
            note += (f"; {unplaced} not placed (no flops or no bytes per call, e.g. copies and empty calls: "
                     f"their GB/s is in the heat map and perf.case_stats)")
        if hw is not None:
            note += f"; roofs from {hw.source}"
        parts.append(f"<p class=\"note\">{esc(note)}.</p>")
    return "".join(parts)


def efficiency(stats: pd.DataFrame) -> str:
    ok = _ok(stats)
    if ok.empty:
        return empty("no successful measurements on this night")
    parts = ["<p>Percent of the roofline bound (the slower of peak compute and peak bandwidth) reached at the "
             "median, per case: rows are GPU ('sim': simulated), kernel, backend and dtype; columns are shapes, "
             "smallest work first.</p>"]
    for family, g in ok.groupby("family"):
        if g["pct_of_peak"].isna().all():
            parts.append(f"<h3>{esc(family)}</h3>" + empty(f"no percent of peak for {family}: " + _no_peak_reason(g)))
            continue
        g = g.assign(row=[f"{s}{' sim' if k == 'simulated' else ''} · {kn} {b} {d}" for s, k, kn, b, d in
                          zip(g["gpu_sku"], g["device_kind"], g["kernel"], g["backend"], g["dtype"])])
        order = (g.groupby("shape")[["flops_per_call", "bytes_per_call"]].max()
                 .sort_values(["flops_per_call", "bytes_per_call"]).index.tolist())
        rows = sorted(g["row"].unique())
        # One cell per (row, shape): several runs of a pool on one night keep the newest.
        cells = {}
        for r in g.sort_values("run_id").itertuples(index=False):
            cells[(r.row, r.shape)] = (None if r.pct_of_peak != r.pct_of_peak else float(r.pct_of_peak),
                                       f"{r.row} [{r.shape}]: {_pct(r.pct_of_peak)} of peak, "
                                       f"{r.tflops:.4g} TFLOP/s, {r.gbps:.4g} GB/s ({r.pool}, {r.run_id})")
        parts.append(f"<h3>{esc(family)}</h3>")
        parts.append(charts.heatmap(f"heatmap-{slug(family)}", f"Efficiency of {family} across shapes", rows, order,
                                    cells))
    return "".join(parts)


def _no_peak_reason(g: pd.DataFrame) -> str:
    if ((g["flops_per_call"].fillna(0) == 0) & (g["bytes_per_call"].fillna(0) == 0)).all():
        return "its cases do no work (no flops, no bytes per call), so they have no roofline bound"
    return f"its hardware ({', '.join(map(str, g['gpu_sku'].unique()))}) has no catalog peaks for these dtypes"


def unstable(stats: pd.DataFrame, threshold_note: str) -> str:
    ok = _ok(stats)
    bad = ok[ok["stable"] == False] if not ok.empty else ok  # noqa: E712 (a nullable column)
    if bad.empty:
        return empty(f"every successful case was stable ({threshold_note})", "no-unstable")
    bad = bad.sort_values("rel_noise", ascending=False)
    cols = ["pool", "GPU", "kernel", "backend", "dtype", "shape", "IQR / median", "kept / n", "median",
            "95 % CI of the median", "run"]
    rows = [[r.pool, gpu_label(r.gpu_sku, r.device_kind), r.kernel, r.backend, r.dtype, r.shape,
             f"{r.rel_noise * 100:.1f} %", f"{r.n_kept} / {r.n}", duration_ns(r.median_ns),
             f"{duration_ns(r.median_ci_low_ns)} .. {duration_ns(r.median_ci_high_ns)}", r.run_id]
            for r in bad.head(MAX_ROWS).itertuples(index=False)]
    more = f"<p>{len(bad) - MAX_ROWS} more not shown.</p>" if len(bad) > MAX_ROWS else ""
    return (f"<p>{len(bad)} case(s) whose IQR / median exceeds the stability threshold ({esc(threshold_note)}); "
            f"the rerun rules send these back to their pool.</p>"
            + table(cols, rows, cls="unstable", id_="unstable-cases", numeric={"IQR / median", "median"}) + more)


def coverage(runs: pd.DataFrame, stats: pd.DataFrame, registry: list[str]) -> str:
    per_pool = []
    for pool, g in runs.groupby("pool"):
        s = stats[stats["pool"] == pool] if not stats.empty else stats
        counts = s["status"].value_counts().to_dict() if not s.empty else {}
        # stopped: a case the harness never reached before its shard was stopped (a budget
        # or a signal): not measured, and no fault of the case
        other = sum(v for k, v in counts.items() if k not in ("ok", "failed", "timeout", "stopped", "skipped"))
        per_pool.append([pool, g["device_kind"].iloc[0], g["gpu_sku"].iloc[0], ", ".join(sorted(g["run_id"].unique())),
                         g[["run_id", "shard"]].drop_duplicates().shape[0], len(s), counts.get("ok", 0),
                         counts.get("failed", 0), counts.get("timeout", 0), counts.get("stopped", 0),
                         counts.get("skipped", 0), other,
                         ", ".join(f"{k}: {v}" for k, v in sorted(g["status"].value_counts().to_dict().items()))])
    cols = ["pool", "device kind", "GPU", "run ids", "shards", "cases", "ok", "failed", "timeout", "stopped",
            "skipped", "other", "shard status"]
    parts = [table(cols, per_pool, cls="coverage", id_="coverage-pools",
                   numeric={"shards", "cases", "ok", "failed", "timeout", "stopped", "skipped", "other"})]
    missing = sorted(set(registry) - set(runs["pool"].unique()))
    parts.append(f"<p id=\"pools-not-run\">Pools in the registry that did not run: "
                 f"{esc(', '.join(missing)) if missing else 'none'}.</p>")
    bad = stats[stats["status"] != "ok"] if not stats.empty else stats
    if bad.empty:
        parts.append(empty("every attempted case ended ok", "no-failures"))
        return "".join(parts)
    groups = (bad.assign(first=bad["error"].fillna("(no error text)").map(lambda e: e.splitlines()[0][:200]))
              .groupby(["status", "first"]).size().reset_index(name="cases").sort_values("cases", ascending=False))
    parts.append("<h3>Why cases did not run or did not finish</h3>")
    parts.append(table(["status", "error", "cases"], groups.values.tolist(), cls="error-groups", numeric={"cases"}))
    cols = ["pool", "kernel", "backend", "dtype", "shape", "status", "error", "run"]
    rows = [[r.pool, r.kernel, r.backend, r.dtype, r.shape, tag(r.status, r.status), esc(_clip(r.error)), r.run_id]
            for r in bad.sort_values(["status", "pool", "kernel"]).head(MAX_ROWS).itertuples(index=False)]
    parts.append(table(cols, rows, cls="not-ok", id_="not-ok-cases", raw={"status", "error"}))
    return "".join(parts)


def projections(proj: pd.DataFrame | None) -> str:
    from pipelines.projection.roofline import error_summary

    if proj is None or proj.empty:
        return empty("No projections yet: `perflake project --target SKU` projects every case onto a catalog GPU "
                     "that has not been measured.", "no-projections")
    parts = ["<p>Every projection in perf.projections (not only this night's), as first made; the error is "
             "(projected - measured) / measured, filled in once the target has been measured.</p>"]
    for (target, source, kind), g in proj.groupby(["target_sku", "source_sku", "device_kind"]):
        label = f"{target} projected from {gpu_label(source, kind)}"
        measured = g.dropna(subset=["error_pct"])
        parts.append(f"<h3>{esc(label)}</h3><p>Model {esc(g['model'].iloc[0])}; calibration: "
                     f"{esc(g['calibration_source'].iloc[0])}. {len(g)} cases projected, {len(measured)} measured "
                     f"on {esc(target)} since.</p>")
        summary = error_summary(g)
        rows = [[r.family, r.projected, r.measured, _pct(r.median_abs_error_pct), _pct(r.p90_abs_error_pct),
                 _pct(r.median_error_pct, signed=True)] for r in summary.itertuples(index=False)]
        parts.append(table(["family", "projected", "measured", "median |error|", "p90 |error|", "median error (bias)"],
                           rows, cls="projection-errors", id_=f"projection-errors-{slug(target, source, kind)}",
                           numeric={"projected", "measured", "median |error|", "p90 |error|", "median error (bias)"}))
        if measured.empty:
            top = g.sort_values("projected_ns", ascending=False).head(20)
            parts.append(table(["kernel", "dtype", "shape", "regime", "projected", "calibration"],
                               [[r.kernel, r.dtype, r.shape, r.regime, duration_ns(r.projected_ns), r.calibration_level]
                                for r in top.itertuples(index=False)], cls="projected-cases"))
            continue
        families = sorted(measured["family"].unique())
        points = [{"measured_ns": r.measured_ns, "projected_ns": r.projected_ns, "family": r.family,
                   "case_id": r.case_id,
                   "tip": f"{r.kernel} {r.dtype} [{r.shape}]: projected {duration_ns(r.projected_ns)}, measured "
                          f"{duration_ns(r.measured_ns)} ({r.error_pct:+.1f} %), calibration {r.calibration_level}"}
                  for r in measured.itertuples(index=False) if r.projected_ns > 0 and r.measured_ns > 0]
        parts.append(charts.projection(f"projection-{slug(target, source, kind)}", f"{label}: projected vs measured",
                                       points, families))
    return "".join(parts)


def _pct(v, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:+.1f} %" if signed else f"{v:.1f} %"


def _clip(s, n: int = 300) -> str:
    if s is None or (isinstance(s, float) and s != s):
        return ""
    return s if len(s) <= n else s[:n - 1] + "…"
