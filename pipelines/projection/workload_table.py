"""perf.workload_projections: the summaries of `perflake model`, kept per workload,
scenario, GPU, software and as-of night, so that a model's projected step time has a
history (replace by key: projecting the same thing again replaces its row)."""
from __future__ import annotations

import datetime

import pandas as pd

# Key columns hold '' rather than null: a null key would never match its own replacement.
_KEY_BLANKS = ("device_kind", "software", "as_of_dt")


def workload_rows(summaries: list[dict]) -> pd.DataFrame:
    """The summaries as perf.workload_projections rows (blank keys for absent values)."""
    from schemas.tables import WORKLOAD_PROJECTIONS

    rows = pd.DataFrame(summaries)
    for k in _KEY_BLANKS:
        rows[k] = rows[k].fillna("")
    rows["projected_at"] = datetime.datetime.now(datetime.timezone.utc)
    return rows.reindex(columns=WORKLOAD_PROJECTIONS.column_names)


def write_workload_projections(lake, summaries: list[dict], spark=None) -> None:
    """Replace the rows with the same key in perf.workload_projections (a Spark write)."""
    from pipelines.projection.roofline import _plain
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import get_spark
    from schemas.spark import ordered_columns, spark_schema
    from schemas.tables import WORKLOAD_PROJECTIONS

    spark = spark or get_spark(lake)
    frame = workload_rows(summaries).reindex(columns=ordered_columns(WORKLOAD_PROJECTIONS))
    records = [[_plain(v) for v in r] for r in frame.astype(object).where(frame.notna(), None).values.tolist()]
    catalog.replace_by_key(spark, lake, spark.createDataFrame(records, spark_schema(WORKLOAD_PROJECTIONS)),
                           WORKLOAD_PROJECTIONS)


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
