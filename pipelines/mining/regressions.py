"""perf.regressions: the level changes of every series, with their significance, status
and attribution, recomputed from the whole history by every mine.

Each series (run medians in run order; a confirmation rerun is a run of its own) goes
through the change detector (pipelines.changepoint). The detector's non-provisional
changes are significant at its alpha within their series; across series, the changes
of one night (by the date of the change run) are one family, and Benjamini-Hochberg
over every series measured that night keeps those with q <= FDR_Q. A change among the
newest runs (the detector's provisional one) is gated by the effect-size floors and by
the next run instead, and reported whatever its q.

The lifecycle of one regression (key: series_key + change_run_id) is carried over from
the table's previous state, so re-mining recomputes the numbers but keeps the story:
- provisional: only the change run is at the new level so far;
- confirmed: a later run or a confirmation rerun agreed with it (`confirms`), or the
  significance test found it; a confirmed change stays confirmed (a later return to
  the old level is a change of its own);
- cleared: it was provisional and the next run or rerun did not agree; final;
- acknowledged: a person acknowledged it (`acknowledge`); kept with who, when and why.
A known change is re-measured at its run every night, even while the detector does not
report it (a level 3-5 runs old is often not yet significant in a short history).
"""
from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import catalog
from pipelines.changepoint import DetectorParams, bh_adjust, confirms, detect, measure_at
from pipelines.lake import Lake
from pipelines.mining.attribution import run_context, with_attribution
from pipelines.mining.history import series_points
from pipelines.spark import DATABASE
from schemas.spark import ordered_columns, spark_schema
from schemas.tables import REGRESSIONS

FDR_Q = 0.05
# A detection this many runs or fewer from a known change of the same direction is that
# change: as a history grows, the detector may place a step one run either side.
MATCH_RUNS = 2
_DESCRIBE = ("case_id", "pool", "gpu_sku", "device_kind", "family", "kernel", "dtype")
_DERIVED = ("cause", "attribution")  # joined on from perf.runs after detection


def _candidate_schema() -> T.StructType:
    fields = [T.StructField(f.name, f.dataType, True) for f in spark_schema(REGRESSIONS).fields
              if f.name not in _DERIVED]
    return T.StructType(fields + [T.StructField("is_new", T.BooleanType(), True)])


def regression_points(case_stats: DataFrame, runs: DataFrame) -> DataFrame:
    """The run-level points of every series (pipelines.mining.history), as detection needs them."""
    return series_points(case_stats, runs).select("series_key", *_DESCRIBE, "run_id", "dt", "started_at", "median_ns")


def regressions_table(points: DataFrame, previous: DataFrame, runs: DataFrame, now: datetime.datetime,
                      params: DetectorParams = DetectorParams(), fdr_q: float = FDR_Q) -> DataFrame:
    """perf.regressions from the series points, the table's previous state and perf.runs
    (for attribution). Deterministic given its inputs and `now` (the time stamped on
    rows whose status is new), so re-mining unchanged data changes nothing."""
    prev = previous.select(*[c for c in ordered_columns(REGRESSIONS) if c not in _DERIVED])
    candidates = (points.groupBy("series_key").cogroup(prev.groupBy("series_key"))
                  .applyInPandas(_series_detector(pd.Timestamp(now), params), _candidate_schema()))
    family = points.groupBy(F.col("dt").alias("change_dt")).agg(F.countDistinct("series_key").alias("family_size"))
    with_q = (candidates.join(family, "change_dt", "left")
              .groupBy("change_dt").applyInPandas(_night_q, T.StructType(
                  candidates.schema.fields + [T.StructField("family_size", T.LongType(), True)])))
    kept = with_q.where(~(F.col("is_new") & (F.col("detected_by") == "significance")
                          & (F.col("q_value") > F.lit(fdr_q))))
    return with_attribution(kept, run_context(runs)).select(*ordered_columns(REGRESSIONS))


def update_regressions(spark: SparkSession, lake: Lake, now: datetime.datetime | None = None,
                       params: DetectorParams = DetectorParams()) -> None:
    """Recompute perf.regressions from the whole published history, keeping each known
    regression's lifecycle."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    name = catalog.ensure_table(spark, lake, REGRESSIONS)
    runs = spark.table(f"{DATABASE}.runs")
    points = regression_points(spark.table(f"{DATABASE}.case_stats"), runs)
    table = regressions_table(points, spark.table(name), runs, now, params)
    # Materialise before overwriting: the table is an input of its own new state.
    catalog.overwrite(spark, lake, table.localCheckpoint(eager=True), REGRESSIONS)


def acknowledge(spark: SparkSession, lake: Lake, series_key: str, change_run_id: str, by: str,
                note: str | None = None, at: datetime.datetime | None = None) -> None:
    """Mark one regression acknowledged (by whom, when, why); later mines keep it so."""
    at = at or datetime.datetime.now(datetime.timezone.utc)
    name = catalog.ensure_table(spark, lake, REGRESSIONS)
    table = spark.table(name)
    this = (F.col("series_key") == F.lit(series_key)) & (F.col("change_run_id") == F.lit(change_run_id))
    if table.where(this).limit(1).count() == 0:
        raise KeyError(f"no regression with series_key {series_key!r} and change_run_id {change_run_id!r} in "
                       f"{name}; list them with: perflake sql \"SELECT series_key, change_run_id FROM {name}\"")
    updates = {"status_since": F.when(F.col("status") != "acknowledged", F.lit(at)).otherwise(F.col("status_since")),
               "status": F.lit("acknowledged"), "acknowledged_by": F.lit(by), "acknowledged_at": F.lit(at),
               "note": F.lit(note).cast("string")}
    for col, value in updates.items():
        table = table.withColumn(col, F.when(this, value).otherwise(F.col(col)))
    catalog.overwrite(spark, lake, table.localCheckpoint(eager=True), REGRESSIONS)


def provisional_cases(regressions: DataFrame, run_ids: list[str]) -> dict[str, list[str]]:
    """Per pool, the cases with a provisional change first seen in one of `run_ids`:
    what a confirmation rerun of those runs should measure again."""
    rows = (regressions.where((F.col("status") == "provisional") & F.col("change_run_id").isin(list(run_ids)))
            .select("pool", "case_id").distinct().orderBy("pool", "case_id").collect())
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r.pool, []).append(r.case_id)
    return out


# --- per series (pandas, on the executors) ----------------------------------------------

def _series_detector(now: pd.Timestamp, params: DetectorParams):
    # A plain function (not functools.partial): Spark inspects the UDF's type hints.
    def series_changes(points: pd.DataFrame, prev: pd.DataFrame) -> pd.DataFrame:
        return _series_changes(points, prev, now=now, params=params)
    return series_changes


def _series_changes(points: pd.DataFrame, prev: pd.DataFrame, *, now: pd.Timestamp,
                    params: DetectorParams) -> pd.DataFrame:
    """The regressions of one series: its detected changes merged with its known ones."""
    known = {r["change_run_id"]: r for r in prev.to_dict("records")}
    if points.empty:  # its history is gone: keep what was known as it was
        return _frame([{**r, "is_new": False} for r in known.values()])
    pts = (points.sort_values(["started_at", "run_id"]).drop_duplicates("run_id", keep="last")
           .reset_index(drop=True))
    values = pts["median_ns"].to_numpy(dtype=float)
    pos = {run: i for i, run in enumerate(pts["run_id"])}
    active = {pos[k]: r for k, r in known.items() if k in pos and r["status"] != "cleared"}
    cleared = {pos[k] for k, r in known.items() if k in pos and r["status"] == "cleared"}

    fresh: dict[int, object] = {}      # position -> Change, for changes not known before
    evidence: dict[int, str] = {}      # known position -> how the detector saw it this time
    exact: dict[int, object] = {}      # known position -> the detector's Change at exactly it
    for c in detect(values, params=params):
        how = "newest-runs" if c.provisional else "significance"
        if c.index in active:
            evidence[c.index], exact[c.index] = how, c
            continue
        if c.index in cleared:
            continue
        near = [i for i, r in active.items() if r["direction"] == c.direction and abs(i - c.index) <= MATCH_RUNS]
        if near:
            evidence.setdefault(min(near, key=lambda i: abs(i - c.index)), how)
        else:
            fresh[c.index] = c

    cuts = sorted(set(active) | set(fresh))
    # Statuses first: a change cleared now no longer bounds its neighbours' segments, so
    # decide again without it until nothing changes (as the next mine will see it).
    standing = cuts
    for _ in range(len(cuts) + 1):
        decided = {i: _decide(values, i, [j for j in standing if j != i], fresh.get(i), active.get(i), params)
                   for i in cuts}
        still = [i for i in cuts if decided[i][0] != "cleared"]
        if still == standing:
            break
        standing = still

    rows = [{**r, "is_new": False} for k, r in known.items() if k not in pos or r["status"] == "cleared"]
    for i in cuts:
        others = [j for j in standing if j != i]
        c = measure_at(values, i, changes=others, params=params)
        if c is None:  # a known change at the series' first run: nothing to measure it against
            rows.append({**active[i], "is_new": False})
            continue
        later = [j for j in standing if j > i]
        detected = fresh.get(i) or exact.get(i)
        how = ("newest-runs" if fresh[i].provisional else "significance") if i in fresh else evidence.get(i, "tracked")
        status, agree = decided[i]
        rows.append(_row(pts, i, c, detected.p_value if detected else c.p_value, status, how,
                         (later[0] if later else len(values)) - i, agree, active.get(i), now))
    return _frame(rows)


def _decide(values: np.ndarray, i: int, others: list[int], fresh, prior: dict | None,
            params: DetectorParams) -> tuple[str, bool | None]:
    """(status, whether the runs from i agree) of the change at position i."""
    agree = confirms(values, i, changes=others, params=params)
    if fresh is not None:
        return ("confirmed" if agree or not fresh.provisional else "provisional"), agree
    return _next_status(prior["status"], agree), agree


def _next_status(previous: str, agree: bool | None) -> str:
    if previous in ("acknowledged", "confirmed", "cleared"):
        return previous
    if agree is None:
        return "provisional"
    return "confirmed" if agree else "cleared"


def _row(pts: pd.DataFrame, i: int, change, p_value: float, status: str, how: str, runs_after: int,
         agree: bool | None, prior: dict | None, now: pd.Timestamp) -> dict:
    at, good = pts.iloc[i], pts.iloc[i - 1]
    prior = prior or {}
    keep_since = prior.get("status") == status and prior.get("status_since") is not None
    return {
        "series_key": at["series_key"], **{c: at[c] for c in _DESCRIBE},
        "change_run_id": at["run_id"], "change_dt": at["dt"],
        "last_good_run_id": good["run_id"], "last_good_dt": good["dt"],
        "before_ns": change.before, "after_ns": change.after, "change_pct": 100.0 * change.rel_change,
        "sigmas": change.sigmas, "p_value": p_value, "q_value": None,
        "direction": prior.get("direction") or change.direction, "status": status, "runs_after": runs_after,
        "confirmed_by_run_id": pts.iloc[i + 1]["run_id"] if agree and status != "provisional" else
        prior.get("confirmed_by_run_id"),
        "detected_by": how,
        "first_seen_at": prior.get("first_seen_at") or now,
        "status_since": prior["status_since"] if keep_since else now,
        "acknowledged_by": prior.get("acknowledged_by"), "acknowledged_at": prior.get("acknowledged_at"),
        "note": prior.get("note"), "is_new": not prior,
    }


def _frame(rows: list[dict]) -> pd.DataFrame:
    names = _candidate_schema().names
    return pd.DataFrame([{n: r.get(n) for n in names} for r in rows], columns=names)


def _night_q(rows: pd.DataFrame) -> pd.DataFrame:
    """BH q-values for the changes of one night: the family is every series measured
    that night (a series without a change is a test with p = 1)."""
    rows = rows.copy()
    tested = (rows["p_value"].notna() & (rows["status"] != "cleared")).to_numpy()
    k = int(tested.sum())
    if k:
        family = max(k, int(rows["family_size"].fillna(0).max()))
        p = np.concatenate([rows.loc[tested, "p_value"].to_numpy(dtype=float), np.ones(family - k)])
        rows.loc[tested, "q_value"] = bh_adjust(np.clip(p, 0.0, 1.0))[:k]
    return rows
