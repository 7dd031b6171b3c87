"""perf.workload_projections: the summaries of `perflake model`, kept per workload,
scenario, GPU, software and as-of night, so that a model's projected step time has a
history (replace by key: projecting the same thing again replaces its row).

A projection made from none of its target's own measurements (as_of_dt '': a GPU the lake
had not measured, priced by the roofline calibrated on another GPU, or by the spec sheet)
is scored once the lake measures the target: the same workload is priced from the
target's own measurements and the error is kept beside the projection, which stays as
it was made (`rescore_workloads`, after every mine)."""
from __future__ import annotations

import datetime

import pandas as pd

from pipelines.projection.workload import WorkloadError

# Key columns hold '' rather than null: a null key would never match its own replacement.
_KEY_BLANKS = ("device_kind", "software", "as_of_dt")


def workload_rows(summaries: list[dict]) -> pd.DataFrame:
    """The summaries as perf.workload_projections rows (blank keys for absent values)."""
    from schemas.tables import WORKLOAD_PROJECTIONS

    rows = pd.DataFrame(summaries)
    for k in _KEY_BLANKS:
        rows[k] = rows[k].fillna("")
    rows["projected_at"] = datetime.datetime.now(datetime.timezone.utc)
    rows = rows.reindex(columns=WORKLOAD_PROJECTIONS.column_names)
    # Not scored yet: nulls of the scored columns' own types.
    rows["scored_as_of_dt"] = pd.Series([None] * len(rows), index=rows.index, dtype=object)
    rows["scored_at"] = pd.Series(pd.NaT, index=rows.index, dtype="datetime64[ns, UTC]")
    return rows


def write_workload_projections(lake, summaries: list[dict], spark=None) -> None:
    """Replace the rows with the same key in perf.workload_projections (a Spark write)."""
    write_rows(lake, workload_rows(summaries), spark)


def write_rows(lake, rows: pd.DataFrame, spark=None) -> None:
    """Replace the rows of perf.workload_projections with the same key as `rows`."""
    from pipelines.projection.roofline import _plain
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import get_spark
    from schemas.spark import ordered_columns, spark_schema
    from schemas.tables import WORKLOAD_PROJECTIONS

    spark = spark or get_spark(lake)
    frame = rows.reindex(columns=ordered_columns(WORKLOAD_PROJECTIONS))
    records = [[_plain(v) for v in r] for r in frame.astype(object).where(frame.notna(), None).values.tolist()]
    catalog.replace_by_key(spark, lake, spark.createDataFrame(records, spark_schema(WORKLOAD_PROJECTIONS)),
                           WORKLOAD_PROJECTIONS)


def score(frames, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of `rows` made from none of their target's own measurements (as_of_dt '')
    whose target `frames`' lake has measured since, with the scored columns filled in:
    the same workload and scenario priced from the target's newest measurements (of the
    row's device kind and software), and the projection's error against that. Rows that
    cannot be scored yet (target still unmeasured, a workload that is no preset) are left
    out; the projection's own columns are returned unchanged."""
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.projection.workload import Scenario, load_workload

    made_blind = rows[rows["as_of_dt"] == ""] if not rows.empty else rows
    out = []
    for (sku, kind, software), group in made_blind.groupby(["target_sku", "device_kind", "software"]):
        try:
            lookup = load_lookup(frames, sku, device_kind=kind or None, torch_version=software or None)
        except ValueError:  # measured both ways, and the row says neither: nothing to score against
            continue
        if lookup.history.empty:
            continue
        for row in group.to_dict("records"):
            try:
                w = load_workload(row["workload"])
                s = Scenario(row["phase"], int(row["batch"]), int(row["seq"]), int(row["tp"]), int(row["ep"])).check(w)
            except WorkloadError:
                continue
            _, truth = project_workload(w, s, lookup)
            out.append({**row, "scored_as_of_dt": truth["as_of_dt"], "scored_step_ns": truth["step_ns"],
                        "scored_measured_pct": truth["measured_pct"],
                        "error_pct": (row["step_ns"] - truth["step_ns"]) / truth["step_ns"] * 100,
                        "scored_at": datetime.datetime.now(datetime.timezone.utc)})
    return pd.DataFrame(out) if out else rows.iloc[0:0]


def rescore_workloads(lake, dt: str, pools=None, *, spark=None) -> list[dict]:
    """After night `dt` is mined: score every workload projection made blind onto a GPU
    that night measured (`score`), and write the scored columns; one summary per target
    GPU and device kind: projections scored, their median absolute error in percent."""
    from pipelines.projection.nightly_workloads import measured_gpus
    from pipelines.warehouse.frames import Frames

    with Frames(lake) as frames:
        if not frames.has("workload_projections"):
            return []
        measured = {(sku, kind) for _, sku, kind in measured_gpus(frames, [dt], pools)}
        rows = frames.table("workload_projections", "as_of_dt = ''")
        # A projection from the spec sheet alone (device_kind '') is scored by any kind measured.
        rows = rows[[(r.target_sku, r.device_kind) in measured or (r.device_kind == "" and r.target_sku in
                     {sku for sku, _ in measured}) for r in rows.itertuples(index=False)]]
        scored = score(frames, rows) if not rows.empty else rows
    if scored.empty:
        return []
    write_rows(lake, scored, spark)
    return [{"target_sku": sku, "device_kind": kind, "scored": len(g),
             "median_abs_error_pct": round(float(g["error_pct"].abs().median()), 2)}
            for (sku, kind), g in scored.groupby(["target_sku", "device_kind"])]


KEY = ("workload", "scenario", "target_sku", "device_kind", "software")  # a projection's identity across nights


def night_changes(rows: pd.DataFrame, dt: str | None = None, torch: pd.DataFrame | None = None) -> pd.DataFrame:
    """The projections as of night `dt` (None: each projection's newest night) from
    perf.workload_projections `rows` of any nights, each beside the same projection as
    of the newest night before it: `prev_dt`, `prev_step_ns`, `prev_tokens_per_s` and
    `change_pct` (the step time's change, + is slower; NaN without an earlier night), and
    `tokens_per_s_per_gpu`. With `torch` (dt, gpu_sku, device_kind, torch: the torch
    versions of that night's runs), also `torch` and `prev_torch`, so that a change reads
    against a software change."""
    rows = rows[rows["as_of_dt"] != ""] if not rows.empty else rows
    if dt is not None and not rows.empty:
        rows = rows[rows["as_of_dt"] <= dt]
    if rows.empty:
        return rows.assign(prev_dt=None, prev_step_ns=None, prev_tokens_per_s=None, change_pct=None,
                           tokens_per_s_per_gpu=None, torch=None, prev_torch=None)
    ordered = rows.sort_values("as_of_dt").groupby(list(KEY), as_index=False)
    now = ordered.tail(1)
    before = (ordered.nth(-2)[[*KEY, "as_of_dt", "step_ns", "tokens_per_s"]]
              .rename(columns={"as_of_dt": "prev_dt", "step_ns": "prev_step_ns", "tokens_per_s": "prev_tokens_per_s"}))
    if dt is not None:
        now = now[now["as_of_dt"] == dt]
    out = now.merge(before, on=list(KEY), how="left")
    out["change_pct"] = (out["step_ns"] / out["prev_step_ns"] - 1) * 100
    out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / out["tp"]
    out["torch"] = out["prev_torch"] = None
    if torch is not None and not torch.empty:
        versions = torch.rename(columns={"gpu_sku": "target_sku"})
        out = out.drop(columns=["torch", "prev_torch"])
        out = out.merge(versions.rename(columns={"dt": "as_of_dt"}), on=["as_of_dt", "target_sku", "device_kind"],
                        how="left")
        out = out.merge(versions.rename(columns={"dt": "prev_dt", "torch": "prev_torch"}),
                        on=["prev_dt", "target_sku", "device_kind"], how="left")
    return out.sort_values(["workload", "phase", "scenario", "target_sku", "device_kind"]).reset_index(drop=True)


def torch_versions(runs: pd.DataFrame) -> pd.DataFrame:
    """(dt, gpu_sku, device_kind, torch): the torch versions of each night's runs per GPU,
    joined by ', ' (perf.runs rows with at least those columns and torch_version)."""
    if runs.empty:
        return pd.DataFrame(columns=["dt", "gpu_sku", "device_kind", "torch"])
    known = runs.dropna(subset=["torch_version"])
    return (known.groupby(["dt", "gpu_sku", "device_kind"])["torch_version"]
            .agg(lambda v: ", ".join(sorted(set(map(str, v))))).rename("torch").reset_index())
