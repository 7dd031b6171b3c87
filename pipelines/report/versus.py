"""Comparison reports: GPU A against GPU B, or software version A against B, as
speedup tables and charts per kernel family with the uncertainty shown.

A side is the runs whose `field` (a perf.runs column: gpu_sku, pool, torch_version,
...) equals a value, on one night (given, or the newest night that side has). Each
case's newest successful median on each side is compared: speedup = A time / B time
(> 1: B is faster), its interval the ratio of the two medians' 95 % CIs taken at the
far ends (conservative), and the verdict faster or slower only when that whole
interval lies on one side of 1 and the speedup is at least MIN_EFFECT away from 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.warehouse.frames import Frames, any_of, case_stats
from pipelines.config.lake import Lake, safe_date
from pipelines.config.progress import Progress
from pipelines.report import charts
from pipelines.report.html import Page, Section, banner, empty, table, tag, utc_now, write
from pipelines.report.sections import gpu_label
from pipelines.report.svg import duration_ns, esc, slug
from schemas.tables import RUNS

FIELDS = tuple(c.name for c in RUNS.columns if c.type == "string" and c.name not in ("dt", "dag_run_id", "status"))
# Comparing on one of these compares hardware: a case is matched across the sides by its
# id alone. Comparing on anything else (software, harness, reason) holds the hardware
# fixed: a case is matched only with itself on the same GPU and device kind.
# A single run's CI holds no run-to-run drift: smaller differences read as the same.
MIN_EFFECT = 0.02
HARDWARE_FIELDS = frozenset({"gpu_sku", "gpu_name", "gpu_uuid", "pci_bus_id", "pool", "device", "device_kind", "host",
                             "hardware_fingerprint"})


def match_keys(field: str) -> list[str]:
    return ["case_id"] if field in HARDWARE_FIELDS else ["case_id", "gpu_sku", "device_kind"]


@dataclass(frozen=True)
class Side:
    field: str
    value: str
    dt: str
    run_ids: tuple[str, ...]
    stats: pd.DataFrame          # newest ok median per case

    @property
    def name(self) -> str:
        return f"{self.field}={self.value}"

    @property
    def device_kinds(self) -> list[str]:
        return sorted(self.stats["device_kind"].dropna().unique()) if not self.stats.empty else []


def select(frames: Frames, field: str, value: str, dt: str | None = None) -> Side:
    """The runs of one side (on `dt`, else on the newest night where `field` = `value`)."""
    if field not in FIELDS:
        raise ValueError(f"cannot compare on {field!r}; use a perf.runs column: {', '.join(FIELDS)}")
    # `field` is one of FIELDS (checked above); the values are bound parameters.
    where = f"CAST({field} AS STRING) = ?" + (" AND dt = ?" if dt else "")
    runs = frames.table("runs", where, "run_id, dt, pool, device_kind",
                        params=[str(value)] + ([safe_date(dt)] if dt else []))
    if runs.empty:
        raise ValueError(f"no runs with {field} = {value!r}" + (f" on {dt}" if dt else "") +
                         "; list the values with `perflake sql \"SELECT DISTINCT dt, " + field + " FROM perf.runs\"`")
    dt = dt or str(runs["dt"].max())
    night = runs.loc[runs["dt"] == dt]
    kinds = sorted(night["device_kind"].unique())
    if field in HARDWARE_FIELDS and len(kinds) > 1:  # a case would be matched by id alone: one median of either kind
        pools = "; ".join(f"{k}: pools {sorted(night.loc[night['device_kind'] == k, 'pool'].unique())}" for k in kinds)
        raise ValueError(f"the runs with {field} = {value!r} on {dt} are of more than one device kind ({pools}); "
                         "compare pools instead (--pool-a, --pool-b), whose runs are of one kind")
    run_ids = tuple(sorted(night["run_id"].unique()))
    in_runs, ids = any_of("run_id", run_ids)
    stats = case_stats(frames, f"dt = ? AND {in_runs} AND status = 'ok' AND median_ns > 0", [dt, *ids])
    if not stats.empty:  # the newest run's median where several runs measured a case
        stats = stats.sort_values("run_id").groupby(match_keys(field), as_index=False, dropna=False).tail(1)
    return Side(field, str(value), dt, run_ids, stats.reset_index(drop=True))


def speedups(a: pd.DataFrame, b: pd.DataFrame, keys: list[str] = ("case_id",)) -> pd.DataFrame:
    """Per case measured on both sides (matched on `keys`): medians, speedup of B over
    A, its interval and verdict; `gpu` names the GPU when the hardware is held fixed."""
    keys = list(keys)
    cols = keys + ["median_ns", "median_ci_low_ns", "median_ci_high_ns"]
    info = [c for c in ("family", "kernel", "backend", "dtype", "shape", "gpu_sku", "device_kind") if c not in keys]
    m = a[cols + info].merge(b[cols], on=keys, suffixes=("_a", "_b"))
    m["gpu"] = [gpu_label(s, k) for s, k in zip(m["gpu_sku"], m["device_kind"])] if "gpu_sku" in keys else ""
    m["speedup"] = m["median_ns_a"] / m["median_ns_b"]
    m["lo"] = m["median_ci_low_ns_a"] / m["median_ci_high_ns_b"]
    m["hi"] = m["median_ci_high_ns_a"] / m["median_ci_low_ns_b"]
    big = np.abs(np.log(m["speedup"])) >= math.log1p(MIN_EFFECT)
    m["verdict"] = np.where((m["lo"] > 1) & big, "faster", np.where((m["hi"] < 1) & big, "slower", "same"))
    return m.sort_values(["family", "kernel", "dtype", "median_ns_a"]).reset_index(drop=True)


def family_summary(sp: pd.DataFrame) -> pd.DataFrame:
    """Per family: cases, geometric mean speedup and the geometric means of the interval
    ends, and how many cases were faster, slower or the same within their CI."""
    def gmean(s):
        s = s[(s > 0) & np.isfinite(s)]
        return float(np.exp(np.log(s).mean())) if len(s) else math.nan

    rows = []
    for fam, g in sp.groupby("family"):
        v = g["verdict"].value_counts()
        rows.append({"family": fam, "cases": len(g), "speedup": gmean(g["speedup"]), "lo": gmean(g["lo"]),
                     "hi": gmean(g["hi"]), "faster": int(v.get("faster", 0)), "slower": int(v.get("slower", 0)),
                     "same": int(v.get("same", 0))})
    return pd.DataFrame(rows)


def compare_path(lake: Lake, a: Side, b: Side) -> Path:
    dates = a.dt if a.dt == b.dt else f"{a.dt}-vs-{b.dt}"
    return lake.reports / f"compare-{slug(a.field, a.value)}-vs-{slug(b.field, b.value)}-{dates}.html"


def build_compare(lake: Lake, field_a: str, value_a: str, field_b: str, value_b: str, *, dt_a: str | None = None,
                  dt_b: str | None = None, engine: str = "duckdb", spark=None, out: Path | None = None,
                  quiet: bool = False) -> Path:
    """Write the comparison report of side A against side B; returns its path."""
    if field_a != field_b:
        raise ValueError(f"compare two values of one field, not {field_a} against {field_b}")
    for f in (field_a, field_b):
        if f not in FIELDS:
            raise ValueError(f"cannot compare on {f!r}; use a perf.runs column: {', '.join(FIELDS)}")
    progress = Progress(4, "compare", quiet=quiet)
    with Frames(lake, engine, spark) as frames:
        progress.step(f"reading side A: {field_a}={value_a}")
        a = select(frames, field_a, value_a, dt_a)
        progress.step(f"reading side B: {field_b}={value_b}")
        b = select(frames, field_b, value_b, dt_b)
    progress.step("speedups per case and family")
    keys = match_keys(field_a)
    sp = speedups(a.stats, b.stats, keys) if not a.stats.empty and not b.stats.empty else pd.DataFrame()
    page = Page(title=f"perflake comparison: {b.name} against {a.name}",
                subtitle=f"speedup of B ({b.name}, {b.dt}) over A ({a.name}, {a.dt}); lake {lake.root}",
                provenance=_provenance(lake, a, b, engine, len(sp)), banners=_banners(a, b), sections=[])
    if sp.empty:
        page.sections.append(Section("summary", "Summary", empty(
            f"no case was measured successfully on both sides (A: {len(a.stats)} cases, B: {len(b.stats)})",
            "no-common-cases")))
    else:
        page.sections.append(Section("summary", "Summary per kernel family", _summary(sp)))
        for fam, g in sp.groupby("family"):
            page.sections.append(Section(f"family-{slug(fam)}", f"{fam}", _family(fam, g, a, b)))
    progress.step("writing the page")
    path = write(page.render(), out or compare_path(lake, a, b))
    progress.finish(f"wrote {path}")
    return path


def _summary(sp: pd.DataFrame) -> str:
    s = family_summary(sp)
    rows = [[r.family, r.cases, f"{r.speedup:.3f}x", f"{r.lo:.3f}x .. {r.hi:.3f}x", r.faster, r.slower, r.same]
            for r in s.itertuples(index=False)]
    return ("<p>Speedup of B over A (A time / B time; above 1: B faster). The family figures are geometric means; "
            "the interval is the geometric mean of the per-case interval ends (from the 95 % CIs of the medians). "
            f"A case counts as faster or slower when its whole interval lies on one side of 1 and it differs by at "
            f"least {MIN_EFFECT:.0%} (a single run's CI does not hold run-to-run drift).</p>"
            + table(["family", "cases", "speedup (geomean)", "interval", "B faster", "B slower", "same within CI"],
                    rows, cls="compare-summary", id_="compare-summary",
                    numeric={"cases", "speedup (geomean)", "B faster", "B slower", "same within CI"}))


def _family(fam: str, g: pd.DataFrame, a: Side, b: Side) -> str:
    g = g.assign(label=[" ".join(x for x in (gpu, k, d, s) if x) for gpu, k, d, s in
                        zip(g["gpu"], g["kernel"], g["dtype"], g["shape"])])
    rows = [{"label": r.label, "speedup": r.speedup, "lo": r.lo, "hi": r.hi, "verdict": r.verdict,
             "tip": f"{r.label}: A {duration_ns(r.median_ns_a)}, B {duration_ns(r.median_ns_b)}, speedup "
                    f"{r.speedup:.3f}x ({r.lo:.3f}..{r.hi:.3f}), {r.verdict}"} for r in g.itertuples(index=False)]
    chart = charts.speedup(f"speedup-{slug(fam)}", f"{fam}: speedup of {b.name} over {a.name}", rows, "A", "B")
    cols = ["GPU", "kernel", "backend", "dtype", "shape", "A median", "B median", "speedup", "interval", "verdict"]
    body = [[esc(r.gpu or "see sides"), esc(r.kernel), esc(r.backend), esc(r.dtype), esc(r.shape),
             duration_ns(r.median_ns_a),
             duration_ns(r.median_ns_b), f"{r.speedup:.3f}x", f"{r.lo:.3f}x .. {r.hi:.3f}x",
             tag("B " + r.verdict if r.verdict != "same" else "same within CI", r.verdict)]
            for r in g.itertuples(index=False)]
    return chart + table(cols, body, cls="speedups", id_=f"speedups-{slug(fam)}", raw=set(cols),
                         numeric={"A median", "B median", "speedup"})


def _banners(a: Side, b: Side) -> list[str]:
    out = []
    kinds = {s.name: s.device_kinds for s in (a, b)}
    if any("simulated" in k for k in kinds.values()):
        out.append(banner("simulated", "<strong>Simulated data.</strong> " + esc(
            "; ".join(f"{n}: {', '.join(k) or 'no data'}" for n, k in kinds.items()))
            + " (device kinds). Simulated figures come from <code>kernels_bench/sim.py</code>, a model, not a "
              "measurement.", "simulated-banner"))
    if a.device_kinds != b.device_kinds:
        out.append(banner("warning", esc(f"The sides differ in device kind (A: {a.device_kinds}, B: "
                                         f"{b.device_kinds}): this compares unlike data."), "mixed-kinds-banner"))
    return out


def _provenance(lake: Lake, a: Side, b: Side, engine: str, n: int) -> list[tuple[str, str]]:
    def side(s: Side) -> str:
        gpus = ", ".join(sorted({gpu_label(x, k) for x, k in zip(s.stats.get("gpu_sku", []),
                                                                  s.stats.get("device_kind", []))}))
        return esc(f"{s.name} on {s.dt}: runs {', '.join(s.run_ids)}; {len(s.stats)} cases measured ok; GPUs {gpus}")

    return [("lake", esc(str(lake.root))), ("side A", side(a)), ("side B", side(b)),
            ("cases compared", esc(f"{n} (measured ok on both sides)")),
            ("generated", esc(utc_now()) + f" by <code>perflake report compare</code>, read with {esc(engine)}")]
