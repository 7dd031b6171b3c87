"""What a nightly report reads: one night's runs and case statistics, the hardware
peaks, and (where those tables exist) the regressions, their series' histories and the
projections. Plain pandas frames, read through pipelines.warehouse.frames."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from kernels_bench.hardware import Hardware, load_catalog
from pipelines.warehouse.frames import Frames, any_of, case_stats, latest_attempt
from pipelines.config.lake import safe_date

HISTORY_POINTS = 60  # newest runs drawn per regression history


@dataclass
class Night:
    dt: str
    runs: pd.DataFrame                     # perf.runs rows of the night (one per shard attempt)
    stats: pd.DataFrame                    # perf.case_stats, latest attempt, with `shape` and `params`
    hardware: dict[str, Hardware]
    hardware_from: str                     # "perf.hardware" or the catalog file
    regressions: pd.DataFrame | None       # None: the table does not exist
    projections: pd.DataFrame | None
    history: pd.DataFrame = field(default_factory=pd.DataFrame)  # points of the regressed series
    series: pd.DataFrame = field(default_factory=pd.DataFrame)
    workloads: pd.DataFrame | None = None  # perf.workload_projections as of this night and before (None: absent)
    workload_torch: pd.DataFrame = field(default_factory=pd.DataFrame)  # torch versions of those nights' runs

    @property
    def simulated_pools(self) -> list[str]:
        if self.runs.empty:
            return []
        return sorted(self.runs.loc[self.runs["device_kind"] == "simulated", "pool"].unique())


def latest_dt(frames: Frames) -> str:
    """The newest date with published runs."""
    if not frames.has("runs"):
        raise FileNotFoundError(f"no published runs under {frames.lake.warehouse}; run a sweep and "
                                f"`perflake mine --date YYYY-MM-DD` first")
    dt = frames.sql("SELECT max(dt) AS dt FROM perf.runs")["dt"].iloc[0]
    if dt is None or dt != dt:
        raise FileNotFoundError(f"perf.runs under {frames.lake.warehouse} is empty")
    return str(dt)


def hardware_peaks(frames: Frames) -> tuple[dict[str, Hardware], str]:
    """Peak figures per SKU from perf.hardware, or the catalog file when it is absent."""
    hw = frames.table("hardware")
    if hw.empty:
        from kernels_bench.hardware import CATALOG_PATH

        return dict(load_catalog()), str(CATALOG_PATH)
    out = {}
    for r in hw.itertuples(index=False):
        out[r.sku] = Hardware(
            sku=r.sku, name=r.name, device_kind=r.device_kind,
            peak_tflops={k: float(v) for k, v in (r.peak_tflops or {}).items()},
            memory_bandwidth_gbps=float(r.memory_bandwidth_gbps or 0), l2_bytes=_int(r.l2_bytes),
            sm_count=_int(r.sm_count), memory_bytes=_int(r.memory_bytes), board_power_w=r.board_power_w,
            sm_clock_default_mhz=None, source=r.source)
    return out, "perf.hardware"


def _int(v):
    return None if v is None or v != v else int(v)


def load_night(frames: Frames, dt: str) -> Night:
    dt = safe_date(dt)
    runs = frames.table("runs", "dt = ?", params=[dt])
    if runs.empty:
        raise FileNotFoundError(f"no published runs for dt={dt} under {frames.lake.warehouse}; "
                                f"mine that date first (`perflake mine --date {dt}`)")
    stats = case_stats(frames, "dt = ?", [dt])
    hardware, hardware_from = hardware_peaks(frames)
    regressions = frames.table("regressions") if frames.has("regressions") else None
    projections = frames.table("projections") if frames.has("projections") else None
    night = Night(dt, runs, stats, hardware, hardware_from, regressions, projections)
    night.workloads, night.workload_torch = workload_nights(frames, dt)
    return night


def workload_nights(frames: Frames, dt: str) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """(perf.workload_projections as of `dt` and the nights before it, or None when the
    table is absent; the torch versions of those nights' runs per GPU)."""
    from pipelines.projection.workload_table import torch_versions

    if not frames.has("workload_projections"):
        return None, pd.DataFrame()
    rows = frames.table("workload_projections", "as_of_dt <= ? AND as_of_dt <> ''", params=[safe_date(dt)])
    if rows.empty:
        return rows, pd.DataFrame()
    in_dates, dates = any_of("dt", rows["as_of_dt"].unique())
    runs = frames.table("runs", in_dates, "DISTINCT dt, gpu_sku, device_kind, torch_version", params=dates)
    return rows, torch_versions(runs)


def series_history(frames: Frames, series_keys, until_dt: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(perf.series rows of `series_keys`, their run-level points up to `until_dt`):
    one point per run with its median, CI and start time, oldest first."""
    if not len(series_keys) or not frames.has("series"):
        return pd.DataFrame(), pd.DataFrame()
    in_series, keys = any_of("series_key", series_keys)
    series = frames.table("series", in_series, params=keys)
    if series.empty:
        return series, pd.DataFrame()
    in_cases, case_ids = any_of("case_id", series["case_id"].unique())
    stats = latest_attempt(frames.table(
        "case_stats", f"{in_cases} AND dt <= ? AND status = 'ok'",
        "run_id, case_id, attempt, gpu_sku, device_kind, median_ns, median_ci_low_ns, median_ci_high_ns, dt",
        params=[*case_ids, safe_date(until_dt)]))
    if stats.empty:
        return series, pd.DataFrame()
    in_runs, run_ids = any_of("run_id", stats["run_id"].unique())
    runs = frames.table("runs", in_runs, "run_id, hardware_fingerprint, started_at", params=run_ids)
    runs = runs.groupby("run_id", as_index=False).agg(hardware_fingerprint=("hardware_fingerprint", "first"),
                                                      started_at=("started_at", "min"))
    pts = stats.merge(runs, on="run_id", how="left").merge(
        series[["series_key", "case_id", "gpu_sku", "hardware_fingerprint", "device_kind"]],
        on=["case_id", "gpu_sku", "hardware_fingerprint", "device_kind"])
    pts = pts.sort_values(["series_key", "started_at", "run_id"])
    return series, pts.groupby("series_key").tail(HISTORY_POINTS).reset_index(drop=True)
