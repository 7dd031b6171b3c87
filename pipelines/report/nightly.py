"""The nightly report: one self-contained HTML file per date under <lake>/reports/.

Sections: the data it was built from, regressions and improvements (from
perf.regressions when it exists), a roofline per GPU, efficiency heat maps per kernel
family, unstable cases, coverage, projections, and the models' projected step times
night over night (perf.workload_projections). Simulated data is labelled as such.
"""
from __future__ import annotations

from pathlib import Path

from pipelines.warehouse.frames import Frames
from pipelines.config.lake import Lake
from pipelines.config.progress import Progress
from pipelines.report import regressions, sections, workloads
from pipelines.report.data import Night, latest_dt, load_night, series_history
from pipelines.report.html import Page, Section, banner, table, utc_now, write
from pipelines.report.svg import esc

STEPS = 8


def report_path(lake: Lake, dt: str) -> Path:
    return lake.reports / f"nightly-{dt}.html"


def build_nightly(lake: Lake, dt: str | None = None, *, engine: str = "duckdb", spark=None,
                  out: Path | None = None, quiet: bool = False) -> Path:
    """Write the report for `dt` (default: the newest night with runs); returns its path."""
    progress = Progress(STEPS, "report", quiet=quiet)
    with Frames(lake, engine, spark) as frames:
        progress.step("finding the night" if dt is None else f"night {dt}")
        dt = dt or latest_dt(frames)
        progress.step(f"reading perf.runs, perf.case_stats, perf.cases and perf.hardware for {dt}")
        night = load_night(frames, dt)
        progress.step("reading perf.regressions and the regressed series' histories")
        keys = []
        if night.regressions is not None and "series_key" in night.regressions:
            keys = regressions.of_night(night.regressions, dt, night.runs["run_id"].unique())["series_key"].dropna()
        night.series, night.history = series_history(frames, list(keys.unique()) if len(keys) else [], dt)
    progress.step("regressions, roofline and efficiency charts")
    run_ids = night.runs["run_id"].unique()
    body = [Section("regressions", "Regressions and improvements",
                    regressions.section(night.regressions, dt, run_ids, night.series, night.history)),
            Section("roofline", "Roofline per GPU", sections.roofline(night.stats, night.hardware)),
            Section("efficiency", "Efficiency across shapes", sections.efficiency(night.stats))]
    progress.step("unstable cases and coverage")
    body += [Section("unstable", "Unstable cases", sections.unstable(night.stats, _stability_note())),
             Section("coverage", "Coverage", sections.coverage(night.runs, night.stats, _registry()))]
    progress.step("projections")
    body.append(Section("projections", "Projections onto unmeasured hardware", sections.projections(night.projections)))
    progress.step("models: projected step times")
    body.append(Section("models", "Models: projected step time and tokens/s per GPU",
                        workloads.section(night.workloads, dt, night.workload_torch)))
    page = Page(title=f"perflake nightly report {dt}", subtitle=f"lake {lake.root}",
                provenance=_provenance(lake, night, engine), banners=_banners(night), sections=body)
    progress.step("writing the page")
    path = write(page.render(), out or report_path(lake, dt))
    progress.finish(f"wrote {path}")
    return path


def _banners(night: Night) -> list[str]:
    out = []
    sim = night.simulated_pools
    if sim:
        measured = sorted(set(night.runs["pool"]) - set(sim))
        out.append(banner("simulated", (
            f"<strong>Simulated data.</strong> Pools {esc(', '.join(sim))} ran on the simulated device "
            f"(<code>kernels_bench/sim.py</code>: a roofline model of catalog GPUs with noise); their figures are a "
            f"model, not measurements of real hardware, and are labelled <em>simulated</em> wherever they appear."
            + (f" Pools {esc(', '.join(measured))} were measured on real devices." if measured else "")),
            "simulated-banner"))
    return out


def _provenance(lake: Lake, night: Night, engine: str) -> list[tuple[str, str]]:
    runs = night.runs
    per_run = (runs.groupby(["run_id", "pool"], as_index=False)
               .agg(device_kind=("device_kind", "first"), gpu=("gpu_sku", "first"), torch=("torch_version", "first"),
                    cuda=("cuda_version", "first"), driver=("driver_version", "first"), reason=("reason", "first"),
                    suites=("suite", lambda s: ", ".join(sorted(set(s)))), shards=("shard", "nunique"),
                    started=("started_at", "min"), finished=("finished_at", "max")))
    run_table = table(["run id", "pool", "device kind", "GPU", "reason", "suites", "shards", "torch", "CUDA", "driver",
                       "started (UTC)", "finished (UTC)"],
                      [[r.run_id, r.pool, r.device_kind, r.gpu, r.reason, r.suites, r.shards, r.torch, r.cuda,
                        r.driver, _ts(r.started), _ts(r.finished)] for r in per_run.itertuples(index=False)],
                      cls="runs", id_="report-runs")
    stats = night.stats

    def rows(frame, what):
        return "absent (the table does not exist)" if frame is None else f"{len(frame)} {what}"

    return [
        ("lake", esc(str(lake.root))),
        ("date (dt)", esc(night.dt)),
        ("generated", esc(utc_now()) + f" by <code>perflake report</code>, read with {esc(engine)}"),
        ("perf.runs", esc(f"{len(runs)} rows (shard attempts) in {runs['run_id'].nunique()} runs")),
        ("perf.case_stats", esc(f"{len(stats)} rows (latest attempt per run and case), "
                                f"{stats['case_id'].nunique() if not stats.empty else 0} distinct cases")),
        ("perf.hardware", esc(f"peaks of {len(night.hardware)} SKUs from {night.hardware_from}")),
        ("perf.regressions", esc(rows(night.regressions, "rows (all nights)"))),
        ("perf.projections", esc(rows(night.projections, "rows"))),
        ("perf.workload_projections", esc(rows(night.workloads, f"rows as of {night.dt} and before"))),
        ("device kinds", esc(", ".join(f"{k}: {v} runs" for k, v in
                                      runs.groupby("device_kind")["run_id"].nunique().items()))),
        ("runs", run_table),
    ]


def _ts(v) -> str:
    return "" if v is None or v != v else str(v)[:19]


def _stability_note() -> str:
    try:
        from pipelines.mining.aggregate import STABLE_REL_IQR
    except ImportError:  # pyspark missing: the threshold is still the mining job's
        return "the mining job's stability threshold"
    return f"IQR / median over {STABLE_REL_IQR * 100:g} %"


def _registry() -> list[str]:
    from pipelines.config.pools import load_pools

    try:
        return sorted(load_pools())
    except (OSError, ValueError):
        return []
