"""The report's charts as inline SVG: roofline, efficiency heat map, history with a
change point, speedup with uncertainty, projected against measured.

Each function takes plain values (already selected and labelled by its section) and
returns one `<svg>` string with a stable id; its marks carry classes a test can count
(`case-point`, `roof-compute`, `heat-cell`, `history-point`, `speedup-point`, ...).
"""
from __future__ import annotations

from pipelines.report.svg import Scale, Svg, axes, circle, color, duration_ns, esc, line, sequential, text


def _legend(svg: Svg, x: float, y: float, entries: list[tuple[str, str]]) -> None:
    for i, (label, fill) in enumerate(entries):
        yy = y + i * 16
        svg.add(f'<rect class="legend-swatch" x="{x:.1f}" y="{yy - 9:.1f}" width="10" height="10" fill="{fill}"/>')
        svg.add(text(x + 14, yy, label, "legend-label", size=11))


def roofline(chart_id: str, title: str, points: list[dict], peaks: dict[str, float] | None,
             bandwidth_gbps: float | None, families: list[str]) -> str:
    """Cases by arithmetic intensity (flop/byte) and achieved TFLOP/s, under the
    hardware's compute roofs (one per distinct dtype peak) and its bandwidth roof.
    points: {x, y, family, tip, case_id, dtype}. No roofs when the peaks are unknown."""
    w, h = 760, 430
    svg = Svg(w, h, chart_id, "roofline", title)
    peaks = {d: p for d, p in (peaks or {}).items() if p and p > 0}
    ridge = {d: p * 1e3 / bandwidth_gbps for d, p in peaks.items()} if bandwidth_gbps else {}
    xs = Scale.fit([p["x"] for p in points] + list(ridge.values()), 70, 560, log=True)
    ys = Scale.fit([p["y"] for p in points] + list(peaks.values()), 390, 30, log=True)
    axes(svg, xs, ys, "arithmetic intensity (flop/byte)", "achieved TFLOP/s")
    if bandwidth_gbps and peaks:
        top = max(peaks.values())
        x_start = max(xs.lo, ys.lo * 1e3 / bandwidth_gbps)
        x_end = min(xs.hi, top * 1e3 / bandwidth_gbps)
        if x_end > x_start:
            svg.add(line(xs(x_start), ys(x_start * bandwidth_gbps / 1e3), xs(x_end), ys(x_end * bandwidth_gbps / 1e3),
                         "roof roof-memory", "#444", 2, extra=f' data-bandwidth-gbps="{bandwidth_gbps:g}"'))
            x_label = x_start * (x_end / x_start) ** 0.35
            svg.add(text(xs(x_label) - 6, ys(x_label * bandwidth_gbps / 1e3) - 6, f"{bandwidth_gbps:g} GB/s",
                         "roof-label", "end", 10, "#444"))
        by_peak: dict[float, list[str]] = {}
        for d, p in peaks.items():
            by_peak.setdefault(p, []).append(d)
        for p, dts in sorted(by_peak.items()):
            x0 = max(xs.lo, p * 1e3 / bandwidth_gbps)
            if x0 < xs.hi:
                svg.add(line(xs(x0), ys(p), xs.b, ys(p), "roof roof-compute", "#444", 1.5, dash="5 3",
                             extra=f' data-dtype="{esc("/".join(sorted(dts)))}" data-peak-tflops="{p:g}"'))
                svg.add(text(xs.b - 4, ys(p) - 4, f"{'/'.join(sorted(dts))} {p:g} TFLOP/s", "roof-label", "end", 10,
                             "#444"))
    fam_color = {f: color(i) for i, f in enumerate(families)}
    for p in points:
        svg.add(circle(xs(p["x"]), ys(p["y"]), 4, fam_color.get(p["family"], "#999"), "case-point", p["tip"],
                       {"case-id": p["case_id"], "family": p["family"], "dtype": p["dtype"]}))
    _legend(svg, 580, 44, [(f, fam_color[f]) for f in families])
    return svg.render()


def heatmap(chart_id: str, title: str, rows: list[str], cols: list[str], cells: dict[tuple[str, str], tuple],
            vmax: float = 100.0, unit: str = "%") -> str:
    """A grid: one row per label in `rows`, one column per label in `cols`; cells maps
    (row, col) to (value, tooltip). Missing cells are grey; colour runs 0..vmax."""
    cw = max(26, min(64, 640 // max(1, len(cols))))
    ch = 20
    col_chars = min(40, max((len(c) for c in cols), default=1))
    row_chars = min(52, max((len(r) for r in rows), default=1))
    left, top = 16 + int(row_chars * 6.3), 30 + int(col_chars * 6 * 0.65)
    w = left + cw * len(cols) + 90
    h = top + max(ch * len(rows), 5 * 16) + 20
    svg = Svg(w, h, chart_id, "heatmap", title)
    for j, c in enumerate(cols):
        x = left + j * cw + cw / 2
        svg.add(text(x, top - 6, c if len(c) <= 40 else c[:39] + "…", "col-label", "start", 10, rotate=-40))
    for i, r in enumerate(rows):
        y = top + i * ch
        svg.add(text(left - 6, y + 14, r if len(r) <= 52 else r[:51] + "…", "row-label", "end", 11))
        for j, c in enumerate(cols):
            x = left + j * cw
            v = cells.get((r, c))
            if v is None or v[0] is None or v[0] != v[0]:
                tip = v[1] if v else f"{r} @ {c}: not measured"
                svg.add(f'<rect class="heat-cell heat-missing" x="{x}" y="{y}" width="{cw - 1}" height="{ch - 1}" '
                        f'fill="#eeeeee"><title>{esc(tip)}</title></rect>')
                continue
            value, tip = v
            fill = sequential(value / vmax)
            svg.add(f'<rect class="heat-cell" x="{x}" y="{y}" width="{cw - 1}" height="{ch - 1}" fill="{fill}" '
                    f'data-value="{value:.4g}"><title>{esc(tip)}</title></rect>')
            if cw >= 30:
                svg.add(text(x + cw / 2, y + 14, f"{value:.0f}", "cell-label", "middle", 10,
                             "#fff" if value / vmax < 0.6 else "#000"))
    lx = left + cw * len(cols) + 12
    for k in range(5):
        t = 1 - k / 4
        svg.add(f'<rect class="scale-swatch" x="{lx}" y="{top + k * 16}" width="14" height="16" '
                f'fill="{sequential(t)}"/>')
        svg.add(text(lx + 18, top + k * 16 + 12, f"{t * vmax:.0f}{unit}", "legend-label", size=10))
    return svg.render()


def history(chart_id: str, title: str, points: list[dict], change_at: int | None,
            before_ns: float | None, after_ns: float | None) -> str:
    """A series over runs: median per run (points), the 95 % CI of each median (a band),
    the change point (a vertical line before run index `change_at`) and the levels
    before and after it. points: {label, median_ns, lo_ns, hi_ns, tip} in run order."""
    w, h = 640, 260
    svg = Svg(w, h, chart_id, "history-chart", title)
    vals = [p["median_ns"] for p in points] + [p.get("lo_ns") for p in points] + [p.get("hi_ns") for p in points]
    vals += [v for v in (before_ns, after_ns) if v]
    xs = Scale(-0.5, max(len(points) - 0.5, 0.5), 70, 620)
    ys = Scale.fit(vals, 220, 20)
    axes(svg, xs, ys, "run (oldest to newest)", "median latency", fmt_x=lambda v: "", fmt_y=duration_ns)
    step = max(1, len(points) // 8)
    for i, p in enumerate(points):
        if i % step == 0 or i == len(points) - 1:
            svg.add(text(xs(i), 236, p["label"], "tick", "middle", 9))
    band = [(i, p) for i, p in enumerate(points) if p.get("lo_ns") is not None and p.get("hi_ns") is not None]
    if band:
        upper = " ".join(f"{xs(i):.1f},{ys(p['hi_ns']):.1f}" for i, p in band)
        lower = " ".join(f"{xs(i):.1f},{ys(p['lo_ns']):.1f}" for i, p in reversed(band))
        svg.add(f'<polygon class="ci-band" points="{upper} {lower}" fill="#0072B2" fill-opacity="0.15" '
                f'stroke="none"/>')
    cx = xs(change_at - 0.5) if change_at is not None else None
    if cx is not None:
        svg.add(line(cx, ys.a, cx, ys.b, "change-point", "#D55E00", 2, dash="4 3"))
    if before_ns:
        svg.add(line(xs.a, ys(before_ns), cx if cx is not None else xs.b, ys(before_ns), "level-before", "#009E73", 2,
                     extra=f' data-level-ns="{before_ns:.6g}"'))
    if after_ns and cx is not None:
        svg.add(line(cx, ys(after_ns), xs.b, ys(after_ns), "level-after", "#D55E00", 2,
                     extra=f' data-level-ns="{after_ns:.6g}"'))
    for i, p in enumerate(points):
        late = change_at is not None and i >= change_at
        svg.add(circle(xs(i), ys(p["median_ns"]), 3.5, "#D55E00" if late else "#0072B2", "history-point", p["tip"]))
    return svg.render()


VERDICT_COLORS = {"faster": "#009E73", "slower": "#D55E00", "same": "#777777"}


def speedup(chart_id: str, title: str, rows: list[dict], a_name: str, b_name: str) -> str:
    """One row per case: the speedup of B over A (A time / B time, log scale) as a dot,
    its uncertainty from the medians' CIs as a whisker, parity at 1.
    rows: {label, speedup, lo, hi, verdict, tip}."""
    w, row_h, top = 760, 18, 30
    h = top + row_h * len(rows) + 50
    svg = Svg(w, h, chart_id, "speedup-chart", title)
    vals = [r["lo"] for r in rows] + [r["hi"] for r in rows] + [1.0]
    xs = Scale.fit(vals, 300, 740, log=True)
    ys = Scale(-0.5, len(rows) - 0.5, top, top + row_h * len(rows))
    svg.add(f'<rect class="plot-area" x="{xs.a}" y="{top}" width="{xs.b - xs.a}" height="{row_h * len(rows)}" '
            f'fill="#fcfcfc" stroke="#bbb"/>')
    for v in _speedup_ticks(xs):
        svg.add(line(xs(v), ys.a, xs(v), ys.b, "grid", "#eee"))
        svg.add(text(xs(v), ys.b + 14, f"{v:g}x", "tick", "middle", 10))
    svg.add(line(xs(1.0), ys.a, xs(1.0), ys.b, "parity", "#333", 1.2))
    svg.add(text((xs.a + xs.b) / 2, ys.b + 32, f"speedup of {b_name} over {a_name} (>1: B faster)", "axis-title",
                 "middle", 12))
    for i, r in enumerate(rows):
        y = ys(i)
        fill = VERDICT_COLORS.get(r["verdict"], "#777")
        svg.add(text(xs.a - 6, y + 4, r["label"] if len(r["label"]) <= 46 else r["label"][:45] + "…",
                     "row-label", "end", 10))
        if r["lo"] == r["lo"] and r["hi"] == r["hi"]:
            svg.add(line(xs(r["lo"]), y, xs(r["hi"]), y, "speedup-ci", fill, 2))
        svg.add(circle(xs(r["speedup"]), y, 4, fill, f"speedup-point verdict-{r['verdict']}", r["tip"]))
    return svg.render()


def _speedup_ticks(xs: Scale) -> list[float]:
    cands = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4, 5, 10, 20, 50, 100]
    inside = [c for c in cands if xs.lo <= c <= xs.hi]
    while len(inside) > 9:
        inside = inside[::2] if 1 in inside[::2] else inside[1::2]
    return inside


def projection(chart_id: str, title: str, points: list[dict], families: list[str], band_pct: float = 15.0) -> str:
    """Projected against measured time per case (log-log) with the parity line and a
    +-band_pct band. points: {measured_ns, projected_ns, family, tip, case_id}."""
    w, h = 640, 420
    svg = Svg(w, h, chart_id, "projection-chart", title)
    vals = [p["measured_ns"] for p in points] + [p["projected_ns"] for p in points]
    s = Scale.fit(vals, 70, 470, log=True)
    xs, ys = s, Scale(s.lo, s.hi, 380, 30, log=True)  # same range on both axes: parity is the diagonal
    axes(svg, xs, ys, "measured median", "projected", fmt_x=duration_ns, fmt_y=duration_ns)
    lo, hi = s.lo, s.hi
    svg.add(line(xs(lo), ys(lo), xs(hi), ys(hi), "parity", "#333", 1.2))
    for f, cls in ((1 + band_pct / 100, "band-high"), (1 - band_pct / 100, "band-low")):
        a, b = (lo, min(hi, hi / f)) if f > 1 else (max(lo, lo / f), hi)
        svg.add(line(xs(a), ys(a * f), xs(b), ys(b * f), f"error-band {cls}", "#999", 1, dash="3 3"))
    fam_color = {f: color(i) for i, f in enumerate(families)}
    for p in points:
        svg.add(circle(xs(p["measured_ns"]), ys(p["projected_ns"]), 4, fam_color.get(p["family"], "#999"),
                       "projection-point", p["tip"], {"case-id": p["case_id"], "family": p["family"]}))
    _legend(svg, 490, 44, [(f, fam_color[f]) for f in families] + [(f"±{band_pct:g} % band", "#999")])
    return svg.render()


def step_history(chart_id: str, title: str, lines: dict[str, list[dict]]) -> str:
    """A workload's projected step time per night, one line per GPU (the label). lines:
    label -> [{dt, step_ns, tip}] (any order); the nights are the union of their dates."""
    w, h = 660, 250
    svg = Svg(w, h, chart_id, "step-history", title)
    dates = sorted({p["dt"] for pts in lines.values() for p in pts})
    xs = Scale(-0.5, max(len(dates) - 0.5, 0.5), 70, 460)
    ys = Scale.fit([p["step_ns"] for pts in lines.values() for p in pts] + [0.0], 210, 20)
    axes(svg, xs, ys, "night (as-of date of the measurements)", "projected step", fmt_x=lambda v: "",
         fmt_y=duration_ns)
    at = {dt: i for i, dt in enumerate(dates)}
    step = max(1, len(dates) // 6)
    for i, dt in enumerate(dates):
        if i % step == 0 or i == len(dates) - 1:
            svg.add(text(xs(i), 226, dt[5:], "tick", "middle", 9))
    for n, (label, pts) in enumerate(sorted(lines.items())):
        pts = sorted(pts, key=lambda p: p["dt"])
        xy = " ".join(f"{xs(at[p['dt']]):.1f},{ys(p['step_ns']):.1f}" for p in pts)
        svg.add(f'<polyline class="step-line" points="{xy}" fill="none" stroke="{color(n)}" stroke-width="1.6" '
                f'data-gpu="{esc(label)}"/>')
        for p in pts:
            svg.add(circle(xs(at[p["dt"]]), ys(p["step_ns"]), 3, color(n), "step-point", p["tip"],
                           {"gpu": label, "dt": p["dt"], "step-ns": f"{p['step_ns']:.6g}"}))
    _legend(svg, 474, 34, [(label, color(n)) for n, label in enumerate(sorted(lines))])
    return svg.render()
