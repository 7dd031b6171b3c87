"""Inline SVG drawing primitives: scales, axes with ticks, shapes, escaping.

Charts are plain SVG text written in Python so that a report is one self-contained
file: nothing is fetched when it is opened. Every element a chart draws carries a class
(and the chart an id) so that tests and stylesheets can find it.
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

# Colour-blind-safe categorical palette (Okabe-Ito) and a sequential scale (viridis stops).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
VIRIDIS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def slug(*parts) -> str:
    """A stable id fragment from the parts: lower case letters, digits and '-'."""
    s = "-".join(str(p) for p in parts if p is not None and str(p) != "")
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "x"


def num(v: float, digits: int = 3) -> str:
    """A compact number for a label: 1.23k, 45.6M, 0.0123."""
    if v is None or v != v:
        return "–"
    a = abs(v)
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{v / scale:.{digits}g}{unit}"
    return f"{v:.{digits}g}"


def duration_ns(ns: float) -> str:
    if ns is None or ns != ns:
        return "–"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def sequential(t: float) -> str:
    """Colour of `t` in [0, 1] on the viridis stops (linear between them)."""
    t = min(1.0, max(0.0, t))
    pos = t * (len(VIRIDIS) - 1)
    i = min(int(pos), len(VIRIDIS) - 2)
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    f = pos - i
    rgb = [round(int(a[k:k + 2], 16) * (1 - f) + int(b[k:k + 2], 16) * f) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


@dataclass(frozen=True)
class Scale:
    """Maps data [lo, hi] to pixels [a, b], linearly or in log10."""

    lo: float
    hi: float
    a: float
    b: float
    log: bool = False

    @classmethod
    def fit(cls, values, a: float, b: float, log: bool = False, pad: float = 0.05) -> "Scale":
        vals = [v for v in values if v is not None and v == v and (not log or v > 0)]
        if not vals:
            return cls(1.0, 10.0, a, b, log)
        lo, hi = min(vals), max(vals)
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi - lo < 1e-12:
            lo, hi = lo - (0.5 if log else max(abs(lo) * 0.1, 1.0)), hi + (0.5 if log else max(abs(hi) * 0.1, 1.0))
        span = hi - lo
        lo, hi = lo - pad * span, hi + pad * span
        return cls(10 ** lo if log else lo, 10 ** hi if log else hi, a, b, log)

    def __call__(self, v: float) -> float:
        if self.log:
            v = math.log10(max(v, 1e-300))
            lo, hi = math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        return self.a + (v - lo) / (hi - lo) * (self.b - self.a)

    def ticks(self, n: int = 5) -> list[float]:
        if self.log:
            lo, hi = math.floor(math.log10(self.lo)), math.ceil(math.log10(self.hi))
            step = max(1, math.ceil((hi - lo) / 8))
            return [10.0 ** e for e in range(lo, hi + 1, step) if self.lo <= 10.0 ** e <= self.hi]
        raw = (self.hi - self.lo) / max(n, 1)
        mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
        step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
        first = math.ceil(self.lo / step) * step
        out, v = [], first
        while v <= self.hi + 1e-9 * step:
            out.append(round(v, 12))
            v += step
        return out


class Svg:
    """An SVG document built element by element."""

    def __init__(self, width: int, height: int, id_: str, cls: str, title: str = ""):
        self.width, self.height = width, height
        self.parts: list[str] = []
        self.head = (f'<svg xmlns="http://www.w3.org/2000/svg" id="{esc(id_)}" class="chart {esc(cls)}" '
                     f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
                     f'aria-label="{esc(title)}">')
        if title:
            self.parts.append(f"<title>{esc(title)}</title>")

    def add(self, element: str) -> None:
        self.parts.append(element)

    def render(self) -> str:
        return self.head + "".join(self.parts) + "</svg>"


def line(x1, y1, x2, y2, cls: str, stroke: str = "#888", width: float = 1.0, dash: str | None = None,
         extra: str = "") -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line class="{cls}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width}"{d}{extra}/>')


def text(x, y, s, cls: str = "label", anchor: str = "start", size: int = 11, fill: str = "#333",
         rotate: float | None = None) -> str:
    rot = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ""
    return (f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'fill="{fill}"{rot}>{esc(s)}</text>')


def circle(x, y, r, fill: str, cls: str, tip: str = "", attrs: dict | None = None) -> str:
    a = "".join(f' data-{k}="{esc(v)}"' for k, v in (attrs or {}).items())
    t = f"<title>{esc(tip)}</title>" if tip else ""
    return (f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{fill}" fill-opacity="0.85" '
            f'stroke="#fff" stroke-width="0.6"{a}>{t}</circle>')


def axes(svg: Svg, xs: Scale, ys: Scale, xlabel: str, ylabel: str, fmt_x=num, fmt_y=num) -> None:
    """Frame, grid lines, ticks and axis titles of a plot area given by the scales."""
    x0, x1, y0, y1 = xs.a, xs.b, ys.a, ys.b  # y0 is the bottom (larger pixel value)
    svg.add(f'<rect class="plot-area" x="{x0:.1f}" y="{y1:.1f}" width="{x1 - x0:.1f}" height="{y0 - y1:.1f}" '
            f'fill="#fcfcfc" stroke="#bbb"/>')
    for v in xs.ticks():
        x = xs(v)
        svg.add(line(x, y0, x, y1, "grid", "#eee"))
        svg.add(text(x, y0 + 14, fmt_x(v), "tick", "middle", 10))
    for v in ys.ticks():
        y = ys(v)
        svg.add(line(x0, y, x1, y, "grid", "#eee"))
        svg.add(text(x0 - 5, y + 3, fmt_y(v), "tick", "end", 10))
    svg.add(text((x0 + x1) / 2, y0 + 32, xlabel, "axis-title", "middle", 12))
    svg.add(text(14, (y0 + y1) / 2, ylabel, "axis-title", "middle", 12, rotate=-90))
