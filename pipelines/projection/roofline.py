"""Roofline projections: how fast each case would run on catalog hardware that has not
been measured yet (a new SKU described by its spec sheet), and how wrong that was once
it has been.

The model (MODEL), for a case with `flops` and `bytes` per call on hardware `hw`:

    time = launch_ns + bound_ns / efficiency
    bound_ns = max(flops / peak_tflops[dtype], bytes / bandwidth)     (the roofline)

`launch_ns` is the fixed cost of a call (launch, timer): the median of the empty `noop`
case measured on the calibration hardware or, without one, the smallest time the roofs
leave unexplained (an upper bound; each row's calibration_source says which). The
efficiency is the share of the binding roof that a kernel of that family and shape
reaches. It is calibrated on measured hardware and assumed to carry over to the target
(a fraction of the spec sheet, not an absolute speed): a case measured on the
calibration hardware keeps its own (level `case`); any other case, or one whose binding
roof differs on the target (memory-bound here, compute-bound there), reads it from the
efficiency-against-work curve of its family, backend and dtype, else its family and
dtype, else its family, else, for a family never measured, its regime's curve over every
family (Hockney's observation: efficiency grows with problem size towards a plateau).
The finest curve measured is used even beyond the sizes it covers (held flat there,
"extrapolated"): a coarser one pools implementations that differ more than sizes do.
A GPU measured on some families only takes the curves of the others from the
most-measured other GPU of its device kind (`calibrate`'s `fallback`, as `perflake
model` and `calibrate_source` do) before falling back on the regime's curve.

Pure functions over pandas frames, then `project_job` / `score_job`: read the published
tables, write `perf.projections` (replace by key), and say how far off they were.
"""
from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kernels_bench.hardware import Hardware, hardware, roofs_ns

MODEL = "roofline-efficiency-v1"
# The floor only keeps an efficiency positive (its log finite): a latency-bound call keeps
# its own, however far below the roofs (a gloo all-reduce of 16 KB measured on an H200
# reached 1.5e-5 of the HBM roof; a floor of 1e-4 projected it onto itself 82 % fast).
EFF_MIN, EFF_MAX = 1e-9, 1.0
NOOP_KERNEL = "noop"
# Calibration levels, most specific first (recorded per projection row).


def roofline_ns(flops, bytes_, peak_tflops, bandwidth_gbps) -> tuple[np.ndarray, np.ndarray]:
    """(compute-bound ns, memory-bound ns) of each call at the roofs: flops at peak
    TFLOP/s and bytes at peak GB/s (1 TFLOP/s = 1e3 flop/ns, 1 GB/s = 1 byte/ns)."""
    peak = np.asarray(peak_tflops, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        compute, memory = roofs_ns(np.asarray(flops, dtype=float), np.asarray(bytes_, dtype=float), peak,
                                   np.asarray(bandwidth_gbps, dtype=float))
    return np.where(peak > 0, compute, np.nan), memory


def regime(compute_ns, memory_ns) -> np.ndarray:
    """'compute' where the compute roof is the higher bound, else 'memory'."""
    return np.where(np.nan_to_num(np.asarray(compute_ns, dtype=float), nan=0.0) > np.asarray(memory_ns), "compute",
                    "memory")


def peaks(hw: Hardware, dtypes) -> np.ndarray:
    """Spec-sheet peak TFLOP/s per dtype (NaN where the hardware lists none)."""
    return np.array([hw.peak_tflops.get(d, np.nan) for d in dtypes], dtype=float)


def place(cases: pd.DataFrame, hw: Hardware) -> pd.DataFrame:
    """`cases` (flops_per_call, bytes_per_call, dtype) with the roofs of `hw` added:
    compute_ns, memory_ns, regime and `work` (flops if compute-bound, else bytes)."""
    out = cases.copy()
    compute, memory = roofline_ns(out["flops_per_call"].fillna(0), out["bytes_per_call"].fillna(0),
                                  peaks(hw, out["dtype"]), hw.memory_bandwidth_gbps)
    out["compute_ns"], out["memory_ns"] = compute, memory
    out["regime"] = regime(compute, memory)
    out["work"] = np.where(out["regime"] == "compute", out["flops_per_call"].fillna(0),
                           out["bytes_per_call"].fillna(0))
    return out


@dataclass(frozen=True)
class Curve:
    """Efficiency against work (flops or bytes) of one group of measured cases,
    interpolated in log-log space and held flat beyond the measured range: small
    kernels reach a small share of the roofs, large ones approach a plateau."""

    log_work: np.ndarray
    log_eff: np.ndarray

    @classmethod
    def fit(cls, work: pd.Series, eff: pd.Series) -> "Curve":
        g = pd.DataFrame({"w": np.log(work.to_numpy(float)), "e": np.log(eff.to_numpy(float))})
        g = g[np.isfinite(g["w"])].groupby("w", as_index=False)["e"].median().sort_values("w")
        return cls(g["w"].to_numpy(), g["e"].to_numpy())

    def covers(self, work: float, slack: float = 2.0) -> bool:
        """`work` lies within the measured range (give or take a factor `slack`)."""
        return bool(len(self.log_work)) and work > 0 and \
            self.log_work[0] - math.log(slack) <= math.log(work) <= self.log_work[-1] + math.log(slack)

    def __call__(self, work: float) -> float:
        if not len(self.log_work) or not work > 0:
            return math.nan
        return float(np.exp(np.interp(math.log(work), self.log_work, self.log_eff)))


@dataclass(frozen=True)
class Calibration:
    """Efficiencies and launch cost measured on one hardware, ready to project from."""

    source_sku: str
    device_kind: str
    launch_ns: float
    launch_from: str
    cases: pd.DataFrame                                       # case_id -> regime, efficiency
    curves: dict[str, dict[tuple, Curve]] = field(default_factory=dict)   # level -> group -> curve
    run_ids: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    borrowed: str = ""          # what came from another GPU's calibration (calibrate's `fallback`)

    @property
    def source(self) -> str:
        """One line naming where the figures come from, for every projection row."""
        kind = "simulated " if self.device_kind == "simulated" else ""
        dates = f"{self.dates[0]}..{self.dates[-1]}" if len(self.dates) > 1 else (self.dates[0] if self.dates else "?")
        runs = ",".join(self.run_ids[:4]) + ("..." if len(self.run_ids) > 4 else "")
        return (f"{kind}{self.source_sku}: {len(self.cases)} cases, dt {dates}, runs {runs}; "
                f"launch {self.launch_ns:.0f} ns ({self.launch_from})" + (f"; {self.borrowed}" if self.borrowed else ""))


_GROUPS = {"backend-dtype": ("family", "backend", "dtype", "regime"), "family-dtype": ("family", "dtype", "regime"),
           "family": ("family", "regime"), "regime": ("regime",)}


def calibrate(measured: pd.DataFrame, hw: Hardware, device_kind: str,
              fallback: tuple[pd.DataFrame, Hardware] | None = None,
              launch: tuple[float, str] | None = None) -> Calibration:
    """Efficiencies from measured medians on `hw`. `measured`: one row per case with
    case_id, family, kernel, dtype, flops_per_call, bytes_per_call, median_ns, run_id, dt.

    `fallback`, another GPU's measured cases (of the same device kind) and hardware, fills
    what `hw`'s own cases cannot say: the launch cost, where `hw` has no noop case but the
    fallback measured one, and the curves of each family and regime `hw` never measured,
    which would otherwise be priced from the regime's curve pooled over other families (a
    GPU measured on attention alone priced its GEMMs from attention's efficiency). This is
    the roofline's own assumption, that a family's efficiency carries over between GPUs,
    applied per family. The fallback is calibrated at `hw`'s launch cost, so that its
    efficiencies mean what they will be used for. `launch` (ns, where from) overrides the
    launch cost."""
    # One row per case (the last given wins): a case listed twice must not count twice.
    noop, work = _split(measured, hw, device_kind)
    fb_noop = noop.iloc[:0]
    if fallback is not None:
        try:
            fb_noop = _split(*fallback, device_kind)[0]
        except ValueError:  # the other GPU had measured nothing with work (by the night asked for)
            fallback = None
    if launch is not None:
        launch, launch_from = launch
    elif not noop.empty:
        launch, launch_from = float(noop["median_ns"].median()), f"median of {len(noop)} noop case(s)"
    elif not fb_noop.empty:
        launch, launch_from = (float(fb_noop["median_ns"].median()),
                               f"median of {len(fb_noop)} noop case(s) on {fallback[1].sku}")
    else:
        bound = np.fmax(work["compute_ns"].fillna(0), work["memory_ns"])
        launch = float(max(0.0, (work["median_ns"] - bound).min()))
        launch_from = "estimated, an upper bound: no noop case measured"
    bound = np.where(work["regime"] == "compute", work["compute_ns"], work["memory_ns"])
    median = work["median_ns"].to_numpy(float)
    busy = np.maximum(median - launch, 0.02 * median)  # never below 2 % of the call: noise on tiny cases
    work = work.assign(efficiency=np.clip(bound / busy, EFF_MIN, EFF_MAX))
    curves = {level: {key if isinstance(key, tuple) else (key,): Curve.fit(g["work"], g["efficiency"])
                      for key, g in work.groupby(list(cols))}
              for level, cols in _GROUPS.items()}
    borrowed = ""
    if fallback is not None:
        other = calibrate(*fallback, device_kind, launch=(launch, launch_from))
        # (family, regime) pairs only the fallback measured; their family-dtype curves come along.
        missing = set(other.curves["family"]) - set(curves["family"])
        for level in ("backend-dtype", "family-dtype", "family"):
            curves[level].update({key: curve for key, curve in other.curves[level].items()
                                  if (key[0], key[-1]) in missing})
        if missing:
            families = ", ".join(sorted({family for family, _ in missing}))
            borrowed = (f"efficiency of {families} from {other.source_sku} ({len(other.cases)} cases; "
                        f"not measured on {hw.sku} in that regime)")
    return Calibration(
        source_sku=hw.sku, device_kind=device_kind, launch_ns=launch, launch_from=launch_from,
        cases=work.set_index("case_id")[["regime", "efficiency"]], curves=curves,
        run_ids=tuple(sorted(measured["run_id"].dropna().unique())) if "run_id" in measured else (),
        dates=tuple(sorted(measured["dt"].dropna().unique())) if "dt" in measured else (),
        borrowed=borrowed)


def _split(measured: pd.DataFrame, hw: Hardware, device_kind: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`measured` placed on `hw`'s roofs, one row per case (the last given wins: a case
    listed twice must not count twice), split into empty calls (noop) and calls with work."""
    measured = measured.dropna(subset=["median_ns"]).drop_duplicates("case_id", keep="last")
    if measured.empty:
        raise ValueError(f"no measured cases on {hw.sku} ({device_kind}) to calibrate from")
    m = place(measured, hw)
    empty = (m["kernel"] == NOOP_KERNEL) | ((m["flops_per_call"].fillna(0) == 0) & (m["bytes_per_call"].fillna(0) == 0))
    noop, work = m[empty], m[~empty]
    if work.empty:
        raise ValueError(f"only empty (noop) cases measured on {hw.sku}; nothing to calibrate efficiencies from")
    return noop, work


def _efficiency(cal: Calibration, row) -> tuple[float, str]:
    """The efficiency to use for one placed case on the target, and its level."""
    own = cal.cases.loc[row.case_id] if row.case_id in cal.cases.index else None
    if own is not None and own["regime"] == row.regime:
        return float(own["efficiency"]), "case"
    # The finest group measured, its curve held flat beyond its sizes (the level saying
    # "extrapolated"), before a coarser one that covers the size: a coarser curve pools
    # other implementations, which differ by more than a size does (the regime's pools
    # other families: attention's efficiency priced GEMMs 53 % slow; a family's pools its
    # backends: the real H200's small sdpa-math calls, 1-2 % of the roof, priced a flash
    # decode call 15 times slow: NOTES-model).
    for level, cols in _GROUPS.items():
        curve = cal.curves[level].get(tuple(getattr(row, c) for c in cols))
        if curve is not None:
            return curve(row.work), f"{level} curve" + ("" if curve.covers(row.work) else ", extrapolated")
    if own is not None:  # the regime flipped and nothing of the other regime was measured
        return float(own["efficiency"]), "case (other regime)"
    return math.nan, "uncalibrated"


def project(cases: pd.DataFrame, cal: Calibration, target: Hardware) -> pd.DataFrame:
    """One projection row per case onto `target` (projections table columns, without
    the measured ones). Cases the target has no peak for, or no calibration covers,
    keep a null projection and say why in `note`."""
    placed = place(cases.drop_duplicates("case_id", keep="last"), target)
    source_median = (dict(zip(cases["case_id"], cases["source_median_ns"])) if "source_median_ns" in cases else {})
    rows = []
    for r in placed.itertuples(index=False):
        is_noop = r.kernel == NOOP_KERNEL or (not (r.flops_per_call or 0) and not (r.bytes_per_call or 0))
        note = None
        if is_noop:
            eff, level, busy = 1.0, "launch", 0.0
        elif (r.flops_per_call or 0) > 0 and math.isnan(r.compute_ns):
            eff, level, busy, note = math.nan, "uncalibrated", math.nan, f"{target.sku} lists no {r.dtype} peak"
        else:
            eff, level = _efficiency(cal, r)
            bound = r.compute_ns if r.regime == "compute" else r.memory_ns
            busy = bound / eff if eff == eff else math.nan
            if eff != eff:
                note = f"no calibration for family {r.family} ({r.regime}-bound) on {cal.source_sku}"
        t = cal.launch_ns + busy if busy == busy else math.nan
        rows.append({
            "case_id": r.case_id, "target_sku": target.sku, "source_sku": cal.source_sku,
            "device_kind": cal.device_kind, "family": r.family, "kernel": r.kernel, "backend": r.backend,
            "dtype": r.dtype, "shape": r.shape, "flops_per_call": r.flops_per_call,
            "bytes_per_call": r.bytes_per_call, "regime": "launch" if is_noop else r.regime,
            "bound_ns": float(np.fmax(np.nan_to_num(r.compute_ns), r.memory_ns)), "efficiency": eff,
            "launch_ns": cal.launch_ns, "projected_ns": t,
            "projected_tflops": (r.flops_per_call / t / 1e3) if t == t and t > 0 else math.nan,
            "projected_gbps": (r.bytes_per_call / t) if t == t and t > 0 else math.nan,
            "model": MODEL, "calibration_level": level, "calibration_source": cal.source,
            "source_median_ns": source_median.get(r.case_id, math.nan), "note": note})
    return pd.DataFrame(rows)


def attach_measured(projections: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Projections with the target's measured median (one row per case in `measured`:
    case_id, median_ns, run_id, dt) and the signed error in percent of the measured."""
    m = measured.rename(columns={"median_ns": "measured_ns", "run_id": "measured_run_id", "dt": "measured_dt"})
    keep = ["case_id", "measured_ns", "measured_run_id", "measured_dt"]
    out = projections.drop(columns=[c for c in keep[1:] + ["error_pct"] if c in projections]).merge(
        m[keep], on="case_id", how="left")
    out["error_pct"] = (out["projected_ns"] - out["measured_ns"]) / out["measured_ns"] * 100.0
    return out


def error_summary(projections: pd.DataFrame) -> pd.DataFrame:
    """Per family (and 'all'): cases projected, cases measured, median and 90th
    percentile of the absolute error in percent, and the median signed error (bias)."""
    scored = projections.dropna(subset=["error_pct"])

    def one(name, g, n_projected):
        a = g["error_pct"].abs()
        return {"family": name, "projected": int(n_projected), "measured": len(g),
                "median_abs_error_pct": float(a.median()) if len(g) else math.nan,
                "p90_abs_error_pct": float(a.quantile(0.9)) if len(g) else math.nan,
                "median_error_pct": float(g["error_pct"].median()) if len(g) else math.nan}

    rows = [one(f, scored[scored["family"] == f], (projections["family"] == f).sum())
            for f in sorted(projections["family"].dropna().unique())]
    rows.append(one("all", scored, len(projections)))
    return pd.DataFrame(rows)


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


# --- the job: published tables in, perf.projections out ----------------------------------

def measured_cases(frames, sku: str, *, device_kind: str | None = None, dates=None, pools=None) -> pd.DataFrame:
    """The newest successful median per case on `sku` (optionally of one device kind,
    within some dates or pools), with the case's shape: one row per case."""
    from pipelines.warehouse.frames import any_of, case_stats

    where, params = ["gpu_sku = ?", "status = 'ok'", "median_ns > 0"], [sku]
    if device_kind:
        where.append("device_kind = ?")
        params.append(device_kind)
    for column, values in (("dt", dates), ("pool", pools)):
        if values:
            cond, vals = any_of(column, values)
            where.append(cond)
            params += vals
    stats = case_stats(frames, " AND ".join(where), params)
    if stats.empty:
        return stats
    return stats.sort_values(["dt", "run_id"]).groupby("case_id", as_index=False).tail(1).reset_index(drop=True)


def unmeasured_skus(frames) -> list[str]:
    """Catalog GPUs with no successful measurement in perf.case_stats."""
    from kernels_bench.hardware import load_catalog

    seen = set(frames.table("case_stats", "status = 'ok'", "DISTINCT gpu_sku").get("gpu_sku", []))
    return sorted(sku for sku, hw in load_catalog().items() if hw.device_kind == "gpu" and sku not in seen)


def pick_source(frames, target: str, device_kind: str | None, exclude=()) -> tuple[str, str]:
    """The measured (sku, device kind) with the most cases, other than the target (and
    the GPUs in `exclude`); an error when that hardware was measured both for real and
    simulated (never mixed)."""
    from kernels_bench.hardware import load_catalog

    if not frames.has("case_stats"):
        raise ValueError("perf.case_stats does not exist yet: measure and mine a night first")
    where = "status = 'ok'" + (" AND device_kind = ?" if device_kind else "")
    counts = frames.sql(f"SELECT gpu_sku, device_kind, count(DISTINCT case_id) AS cases FROM perf.case_stats "
                        f"WHERE {where} GROUP BY gpu_sku, device_kind", [device_kind] if device_kind else [])
    counts = counts[counts["gpu_sku"].isin(load_catalog()) & ~counts["gpu_sku"].isin([target, *exclude])] \
        if not counts.empty else counts
    if counts.empty:
        raise ValueError(f"no measured catalog GPU to calibrate from (other than {target}); measure one first")
    best = counts.sort_values("cases", ascending=False).iloc[0]
    return str(best["gpu_sku"]), str(best["device_kind"])


def calibrate_source(frames, source: str, device_kind: str, *, target: str, dates=None,
                     pools=None) -> tuple[pd.DataFrame, Calibration]:
    """(`source`'s measured cases within `dates` and `pools`, its calibration). The families
    it never measured take the curves of the most-measured other GPU of its device kind,
    as `perflake model` calibrates a partly measured GPU (`calibrate`'s `fallback`), but
    never the target's: its measurements are what the projections are scored against."""
    src = measured_cases(frames, source, device_kind=device_kind, dates=dates, pools=pools)
    try:
        other, _ = pick_source(frames, target, device_kind, exclude=(source,))
        fallback = (measured_cases(frames, other, device_kind=device_kind), hardware(other))
    except ValueError:  # no third GPU of this kind measured
        fallback = None
    return src, calibrate(src, hardware(source), device_kind, fallback)


def project_job(lake, target: str, *, source: str | None = None, device_kind: str | None = None,
                source_dates=None, source_pools=None, measured_dates=None, measured_pools=None,
                cases: str = "all", recalibrate: bool = False, spark=None, engine: str = "duckdb",
                progress=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Project every case onto `target` (a case projected before keeps that projection
    unless `recalibrate`), attach the target's measurements where they exist, write
    perf.projections; returns (the projection rows, the error summary per family)."""
    from pipelines.warehouse.frames import Frames
    from pipelines.config.progress import Progress
    from pipelines.projection.lookup import choose_kind

    progress = progress or Progress(5, "project")
    target_hw = hardware(target)
    with Frames(lake, engine, spark) as frames:
        progress.step("choosing the calibration hardware")
        note = ""
        if source is None:
            source, device_kind = pick_source(frames, target, device_kind)
        elif device_kind is None:
            device_kind, note = choose_kind(frames, source)
            if device_kind is None:
                raise ValueError(f"{source} has no successful measurements in the lake to calibrate from")
        progress.step(f"reading {source} ({device_kind}) measurements and earlier projections"
                      + (f"; {note}" if note else ""))
        existing = frames.table("projections", "target_sku = ? AND source_sku = ? AND device_kind = ?",
                                params=[target, source, device_kind])
        src, cal = calibrate_source(frames, source, device_kind, target=target, dates=source_dates,
                                    pools=source_pools)
        todo = src.assign(source_median_ns=src["median_ns"]) if cases == "source" else _all_cases(frames, src)
        if not existing.empty and not recalibrate:  # projections stay as first made; new cases are added
            todo = todo[~todo["case_id"].isin(existing["case_id"])]
        progress.step(f"projecting {len(todo)} cases onto {target} ({cal.launch_from})"
                      + (f"; keeping {len(existing)} made before" if not existing.empty and not recalibrate else ""))
        proj = project(todo, cal, target_hw).assign(projected_at=now_utc()) if len(todo) else None
        if not existing.empty and not recalibrate:
            proj = existing if proj is None else pd.concat([existing, proj], ignore_index=True)
        elif proj is None:
            raise ValueError(f"no case to project onto {target}")
        progress.step(f"reading {target} measurements")
        measured = measured_cases(frames, target, device_kind=device_kind, dates=measured_dates, pools=measured_pools)
    scored = attach_measured(proj, measured[["case_id", "median_ns", "run_id", "dt"]] if not measured.empty else
                             pd.DataFrame(columns=["case_id", "median_ns", "run_id", "dt"]))
    scored["scored_at"] = now_utc() if not measured.empty else None
    progress.step(f"writing {len(scored)} rows to perf.projections")
    write_projections(lake, scored, spark)
    progress.finish(f"{len(scored)} projections onto {target}, {scored['measured_ns'].notna().sum()} measured")
    return scored, error_summary(scored)


def rescore_measured(lake, dt: str, pools=None, *, spark=None) -> list[dict]:
    """After a night is mined: every earlier projection onto hardware that this night
    measured is scored against the newest measurements (the projections themselves stay
    as they were made). One summary per (target, calibration hardware, device kind):
    cases projected and measured, median absolute error in percent."""
    from pipelines.config.progress import Progress
    from pipelines.warehouse.frames import Frames, any_of

    with Frames(lake) as frames:
        if not frames.has("projections") or not frames.has("case_stats"):
            return []
        in_pools, pool_names = any_of("pool", pools) if pools else ("true", [])
        where = f"dt = ? AND status = 'ok' AND {in_pools}"
        pairs = frames.sql(f"SELECT DISTINCT p.target_sku, p.source_sku, p.device_kind FROM perf.projections p "
                           f"JOIN (SELECT DISTINCT gpu_sku, device_kind FROM perf.case_stats WHERE {where}) m "
                           f"ON p.target_sku = m.gpu_sku AND p.device_kind = m.device_kind "
                           f"ORDER BY 1, 2, 3", [dt, *pool_names])
    out = []
    for target, source, kind in pairs.itertuples(index=False):
        _, summary = project_job(lake, target, source=source, device_kind=kind, spark=spark,
                                 progress=Progress(5, f"rescore {target}", quiet=True))
        every = summary[summary["family"] == "all"].iloc[0]
        out.append({"target_sku": target, "source_sku": source, "device_kind": kind,
                    "projected": int(every["projected"]), "measured": int(every["measured"]),
                    "median_abs_error_pct": None if math.isnan(every["median_abs_error_pct"])
                    else round(float(every["median_abs_error_pct"]), 2)})
    return out


def _all_cases(frames, src: pd.DataFrame) -> pd.DataFrame:
    """Every published case (with its shape), the source's medians attached."""
    from pipelines.warehouse.frames import shape_label

    allc = frames.table("cases", None, "case_id, family, kernel, backend, dtype, params, flops_per_call, "
                                       "bytes_per_call")
    allc["shape"] = allc["params"].map(shape_label)
    med = src[["case_id", "median_ns"]].rename(columns={"median_ns": "source_median_ns"})
    return allc.drop(columns="params").merge(med, on="case_id", how="left")


def write_projections(lake, rows: pd.DataFrame, spark=None) -> None:
    """Replace the rows of perf.projections with the same key (case, target, source, kind)."""
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import get_spark
    from schemas.spark import ordered_columns, spark_schema
    from schemas.tables import PROJECTIONS

    spark = spark or get_spark(lake)
    cols = ordered_columns(PROJECTIONS)
    frame = rows.reindex(columns=cols)
    records = [[_plain(v) for v in r] for r in frame.astype(object).where(frame.notna(), None).values.tolist()]
    df = spark.createDataFrame(records, spark_schema(PROJECTIONS))
    catalog.replace_by_key(spark, lake, df, PROJECTIONS)


def _plain(v):
    """A pandas/numpy value as the plain Python value Spark accepts (UTC datetimes)."""
    if isinstance(v, pd.Timestamp):
        v = v.tz_localize("UTC") if v.tzinfo is None else v
        return v.to_pydatetime()
    if isinstance(v, np.generic):
        return v.item()
    return v
