"""What the lake knows about one GPU, ready to price a workload's kernel calls: the
newest measured median of each case on that GPU (one device kind, optionally one
software version and an as-of date), the interpolation between measured neighbouring
shapes of the same kernel, and the roofline calibration (pipelines/projection/roofline.py)
for what neither covers.

Simulated and measured data are never mixed: a GPU measured both ways is read from its
real measurements unless the caller asks for the simulated ones (`device_kind`), and the
lookup's context line says that the other kind is there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kernels_bench.case import Case

_COLUMNS = ["case_id", "family", "kernel", "backend", "dtype", "params", "flops_per_call", "bytes_per_call",
            "median_ns", "energy_per_call_j", "run_id", "dt", "device_kind"]


@dataclass(frozen=True)
class Lookup:
    """One GPU's measurements (`history`: every successful median of every night that
    matched; `measured`: the newest per case) and the calibration of the roofline for
    cases never measured on it."""

    sku: str
    device_kind: str | None
    history: pd.DataFrame
    calibration: object | None          # roofline.Calibration, or None: spec-sheet roofs only
    software: str | None = None          # the torch version the measurements were limited to
    note: str = ""                       # e.g. that the lake also holds the other device kind
    fallback: "Fallback | None" = None   # another GPU's measurements, for what this one never measured

    @property
    def simulated(self) -> bool:
        return self.device_kind == "simulated"

    @property
    def measured(self) -> pd.DataFrame:
        return newest(self.history)

    @property
    def dates(self) -> list[str]:
        return sorted(self.history["dt"].dropna().unique()) if not self.history.empty else []

    def as_of(self, dt: str) -> "Lookup":
        """The same GPU as the lake knew it on night `dt` (measurements up to then)."""
        from pipelines.projection.roofline import calibrate
        from kernels_bench.hardware import hardware

        hist = self.history[self.history["dt"] <= dt]
        cal = self.calibration
        if not hist.empty and cal is not None and cal.source_sku == self.sku:
            fallback = self.fallback.as_of(dt) if self.fallback else None
            cal = calibrate(newest(hist), hardware(self.sku), self.device_kind, fallback)
        return Lookup(self.sku, self.device_kind, hist, cal, self.software, self.note, self.fallback)

    @property
    def context(self) -> str:
        """One line naming what the figures rest on."""
        kind = {"simulated": "SIMULATED ", None: ""}.get(self.device_kind, f"{self.device_kind} ")
        if self.history.empty:
            # (a note here says the lake holds the other device kind of it)
            what = f"no measurements of {self.sku}" + (f" as {self.device_kind}" if self.note else " in the lake")
        else:
            d = self.dates
            what = (f"{kind}measurements of {self.sku}: {self.measured['case_id'].nunique()} cases, "
                    f"dt {d[0]}..{d[-1]}" if len(d) > 1 else f"{kind}measurements of {self.sku}: "
                    f"{self.measured['case_id'].nunique()} cases, dt {d[0]}")
        if self.software:
            what += f", torch {self.software}"
        cal = self.calibration
        roof = (f"roofline calibrated on {cal.source}" if cal is not None
                else "roofline from the spec sheet alone (uncalibrated: a lower bound)")
        return f"{what}; {roof}" + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class Fallback:
    """The most-measured other GPU of the same device kind: its cases fill the families
    (and the launch cost) that a partly measured GPU never measured (roofline.calibrate's
    `fallback`)."""

    sku: str
    device_kind: str
    cases: pd.DataFrame                  # roofline.measured_cases of `sku`

    def as_of(self, dt: str | None = None):
        """(its cases measured up to `dt`, its hardware): roofline.calibrate's `fallback`
        (which ignores one with nothing to calibrate from)."""
        from kernels_bench.hardware import hardware

        cases = self.cases if dt is None or "dt" not in self.cases else self.cases[self.cases["dt"] <= dt]
        return cases, hardware(self.sku)


def newest(history: pd.DataFrame) -> pd.DataFrame:
    """One row per case: its newest median (by night, then run)."""
    if history.empty:
        return history
    return history.sort_values(["dt", "run_id"]).groupby("case_id", as_index=False).tail(1).reset_index(drop=True)


def measured_kinds(frames, sku: str) -> list[str]:
    """The device kinds `sku` was measured as (successful cases), sorted."""
    kinds = frames.table("case_stats", "gpu_sku = ? AND status = 'ok'", "DISTINCT device_kind", params=[sku])
    return sorted(kinds["device_kind"].dropna()) if not kinds.empty else []


def choose_kind(frames, sku: str) -> tuple[str | None, str]:
    """Which of `sku`'s measurements to read when the caller named no device kind: the
    only kind the lake holds, or the real ones ('gpu') where it holds both (simulated
    nights are for demos and tests), with a note saying how to read the other instead.
    (None, "") when `sku` was never measured."""
    kinds = measured_kinds(frames, sku)
    if len(kinds) <= 1:
        return (kinds[0] if kinds else None), ""
    kind = "gpu" if "gpu" in kinds else kinds[0]
    others = [k for k in kinds if k != kind]
    return kind, (f"the lake also holds {' and '.join(others)} measurements of {sku}, never mixed with these: "
                  f"--device-kind {others[0]} reads them")


def load_lookup(frames, sku: str, *, device_kind: str | None = None, torch_version: str | None = None,
                dates=None, pools=None) -> Lookup:
    """What `frames`' lake measured on `sku` (successful medians only), and the roofline
    calibration: on `sku` itself when it was measured, else on the most-measured other
    catalog GPU of the same device kind, else none."""
    from kernels_bench.hardware import hardware
    from pipelines.projection.roofline import calibrate, calibrate_source, measured_cases, pick_source
    from pipelines.warehouse.frames import any_of, case_stats

    hardware(sku)  # an unknown SKU is an error naming the catalog
    if not frames.has("case_stats"):
        return Lookup(sku, device_kind, pd.DataFrame(columns=_COLUMNS), None, torch_version)
    note = ""
    if device_kind is None:
        device_kind, note = choose_kind(frames, sku)
    else:
        held = measured_kinds(frames, sku)
        if held and device_kind not in held:
            note = (f"the lake holds {' and '.join(held)} measurements of {sku}, never mixed with these: "
                    f"--device-kind {held[0]} reads them")
    where, params = ["gpu_sku = ?", "status = 'ok'", "median_ns > 0"], [sku]
    if device_kind:
        where.append("device_kind = ?")
        params.append(device_kind)
    if torch_version:
        runs = frames.table("runs", "gpu_sku = ? AND torch_version = ?", "DISTINCT run_id", params=[sku, torch_version])
        cond, vals = any_of("run_id", runs["run_id"] if not runs.empty else [])
        where.append(cond)
        params += vals
    for column, values in (("dt", dates), ("pool", pools)):
        if values:
            cond, vals = any_of(column, values)
            where.append(cond)
            params += vals
    history = case_stats(frames, " AND ".join(where), params) if device_kind else pd.DataFrame()
    history = history.reindex(columns=_COLUMNS) if not history.empty else pd.DataFrame(columns=_COLUMNS)
    if history.empty and (torch_version or dates or pools):
        _check_filters(frames, sku, device_kind, torch_version, dates, pools)
    cal, fallback = None, None
    try:  # a calibration needs cases with work measured (not only empty calls)
        if not history.empty:
            try:
                other, kind = pick_source(frames, sku, device_kind)
                fallback = Fallback(other, kind, measured_cases(frames, other, device_kind=kind))
            except ValueError:  # no other GPU of this kind measured
                fallback = None
            cal = calibrate(newest(history), hardware(sku), device_kind, fallback.as_of() if fallback else None)
        else:
            source, kind = pick_source(frames, sku, device_kind)
            _, cal = calibrate_source(frames, source, kind, target=sku)
            device_kind = device_kind or kind
    except ValueError:
        cal = None
    return Lookup(sku, device_kind, history, cal, torch_version, note, fallback)


def _check_filters(frames, sku: str, device_kind: str | None, torch_version, dates, pools) -> None:
    """ValueError when `sku` was measured but not as the filters ask (a mistyped version,
    a night it missed), naming what it has: projecting from another GPU instead would
    answer a question nobody asked. A GPU never measured (of that kind) projects from
    another, as for hardware not yet in the lake."""
    where, params = "gpu_sku = ?", [sku]
    if device_kind:
        where, params = where + " AND device_kind = ?", params + [device_kind]
    runs = frames.table("runs", where, "DISTINCT torch_version, dt, pool", params=params)
    if runs.empty:
        return
    asked = ", ".join(f"{name} {value}" for name, value in (("torch", torch_version), ("nights", dates),
                                                             ("pools", pools)) if value)
    nights = sorted(runs["dt"].unique())
    raise ValueError(f"no measurement of {sku}{f' ({device_kind})' if device_kind else ''} matches {asked}; it was "
                     f"measured with torch {sorted(runs['torch_version'].dropna().unique())} on "
                     f"{len(nights)} night(s) from {nights[0]} to {nights[-1]}, in pools {sorted(runs['pool'].unique())}")


def _plain(v) -> str:
    s = str(v)
    return s.lower() if s.lower() in ("true", "false") else s


def params_of(p) -> dict[str, str]:
    """A case's parameters (a dict, a list of pairs or a map read back) as strings."""
    if p is None or (isinstance(p, float) and p != p):
        return {}
    items = p.items() if isinstance(p, dict) else p
    return {str(k): _plain(v) for k, v in items}


def interpolate(case: Case, measured: pd.DataFrame) -> tuple[float, float, str] | None:
    """(ns, joules per call or NaN, how) of `case` from the measured cases of the same
    kernel, backend and dtype that differ from it in one numeric parameter only, one
    below and one above it: linear in log(time) against log(parameter), through the
    tightest such pair. None when no pair brackets the case (no extrapolation)."""
    same = measured[(measured["kernel"] == case.kernel) & (measured["backend"] == case.backend)
                    & (measured["dtype"] == case.dtype)]
    if same.empty:
        return None
    target = {k: _plain(v) for k, v in case.p.items()}
    points: dict[str, list[tuple[float, float, float]]] = {}
    for row in same.itertuples(index=False):
        p = params_of(row.params)
        if set(p) != set(target):
            continue
        diff = [k for k in target if p[k] != target[k]]
        if len(diff) != 1:
            continue
        try:
            x = float(p[diff[0]])
        except ValueError:
            continue
        energy = row.energy_per_call_j if row.energy_per_call_j is not None else math.nan
        points.setdefault(diff[0], []).append((x, float(row.median_ns), float(energy)))
    best = None
    for key, pts in points.items():
        x = float(target[key])
        below = [p for p in pts if p[0] < x]
        above = [p for p in pts if p[0] > x]
        if not below or not above or x <= 0:
            continue
        lo, hi = max(below), min(above)
        span = math.log(hi[0] / lo[0])
        if best is None or span < best[0]:
            best = (span, key, x, lo, hi)
    if best is None:
        return None
    _, key, x, lo, hi = best
    f = math.log(x / lo[0]) / math.log(hi[0] / lo[0])
    ns = math.exp(np.interp(f, [0, 1], [math.log(lo[1]), math.log(hi[1])]))
    joules = (math.exp(np.interp(f, [0, 1], [math.log(lo[2]), math.log(hi[2])]))
              if lo[2] > 0 and hi[2] > 0 else math.nan)
    return ns, joules, f"between measured {key}={lo[0]:g} and {key}={hi[0]:g}"
