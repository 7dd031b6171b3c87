"""perf.regressions: the level changes of every series, with their significance, status
and attribution, brought up to date by every mine for the series its night measured
(over a window of HISTORY_DAYS days; `update_regressions(night=None)` re-examines the
whole history).

Each series is tracked in two metrics (METRICS): latency (run medians) and, where the
device has an energy counter, energy per call (so a kernel that holds its latency but
burns 10 % more energy per call is a regression too). Each metric of a series (values
in run order; a confirmation rerun is a run of its own) goes through the change
detector (pipelines.changepoint). The detector's non-provisional changes are
significant at its alpha within their series; across series, the changes of one night
(by the date of the change run) in one metric are one family, and Benjamini-Hochberg
over every series measured that night keeps those with q <= FDR_Q. A change among the
newest runs (the detector's provisional one) is gated by the effect-size floors and by
the runs after it instead (`confirms`), and reported whatever its q.

The lifecycle of one regression (key: series_key + metric + change_run_id; short id
regression_id) is carried over from the table's previous state, so re-mining
recomputes the numbers but keeps the story:
- provisional: only the newest runs are at the new level so far, or the detector's
  significance test finds it at its level but not yet at CONFIRM_SHARE of it;
- confirmed: the runs from it are unusual against the series' own recent runs
  (`confirms`: a change run and its rerun beyond anything the series did lately, or 4-5
  runs), or the detector's significance test found it at CONFIRM_SHARE of its level
  (a tenth: the mine asks it every night) and, where the series has peers, the step
  also holds at the noise autocorrelation they measure (`peer_rho`); a confirmed
  change stays confirmed (a later return to the old level is a change of its own),
  unless the detector no longer reports it and its level has faded back (`faded`: a
  few slow nights of a two-mode series);
- cleared: it was provisional and a later run or rerun did not agree, or the detector
  stopped reporting it before its runs were unusual, or it waited WEAK_WAIT_RUNS runs
  without being confirmed, or it faded; final, unless the detector's significance test
  later finds a change at that very run at CONFIRM_SHARE of its level;
- acknowledged: a person acknowledged it (`perflake triage ack`); kept with who, when and why;
- closed: its triage is finished (pipelines.triage.status); final, kept with who, when and why.
Its owner and triage due date (pipelines.config.owners) are set when it is first seen and kept.
A known change is re-measured at its run every night, even while the detector does not
report it (a level 3-5 runs old is often not yet significant in a short history).
"""
from __future__ import annotations

import datetime
import functools

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from scipy.stats import rankdata

from pipelines.warehouse import catalog
from pipelines.changepoint import DetectorParams, bh_adjust, confirms, detect, faded, measure_at
from pipelines.changepoint.known import CONFIRM_RUNS
from pipelines.changepoint.model import LOCAL_RUNS
from pipelines.changepoint.newest import TAIL_MAX
from pipelines.changepoint.noise import noise_sigma
from pipelines.changepoint.ranks import MAX_RHO, fixed_split_pvalue
from pipelines.config.lake import Lake
from pipelines.mining.attribution import run_context, with_attribution
from pipelines.config.owners import Owners, load_owners
from pipelines.mining.history import series_points
from pipelines.warehouse.session import DATABASE
from schemas.spark import ordered_columns, spark_schema
from schemas.tables import REGRESSIONS

FDR_Q = 0.05
# A night's mine re-examines the series it measured over this many days of runs before
# it: the detector's cost per night stays flat however long the history grows. Changes
# older than that keep the state they had when they left the window.
HISTORY_DAYS = 60
# A detection this many runs or fewer from a known change of the same direction is that
# change: as a history grows, the detector may place a step one run either side.
MATCH_RUNS = 2
# The detector's significance confirms a change for the mine only where its p-value is at
# most CONFIRM_SHARE of the level the detector reported it at (strict_alpha for a change
# among the newest TAIL_MAX runs, alpha before). The detector is asked every night, and
# again after each rerun, over histories that differ by a run: an excursion of
# autocorrelated noise that lasts a few runs passes its level at one of those looks, and
# a confirmed change is told to its owner. Replayed night by night
# (benchmarks/changepoint_lifecycle.py), a tenth of the level took the false alarms ever
# confirmed per 1,000 nights of AR(1) 0.5 noise from 5.7 to 1.2 (a second seed: 7.7 to
# 4.5), of two-mode noise from 1.2 to 0.4, and a 3-sigma step's confirmation by its
# third night from 0.42-0.73 to 0.20-0.52 of histories (0.38-0.75 to 0.30-0.67); lasting
# steps are still confirmed in the end (0.93-1.00). The detector's own reports (and
# issue #21's offline figures) are unchanged. A change reported at the detector's level
# but not at this one stays provisional (listed, rerun, not in the digest) until its
# p-value or its runs (`confirms`) confirm it, the detector stops reporting it, or
# WEAK_WAIT_RUNS runs pass.
CONFIRM_SHARE = 0.1
WEAK_WAIT_RUNS = 2 * LOCAL_RUNS
# The series of one family on one pool share its nights, and with them the noise's
# night-to-night autocorrelation, which one series' 20-60 runs measure poorly: where the
# detector cuts an excursion of autocorrelated noise, the cut takes the slow part of the
# wander with it, and the runs about it read as nearly independent (0.1 where the noise's
# is 0.5), so the excursion passes for a step. PEERS or more series of a group
# (PEER_KEYS), each with PEER_RUNS runs or more in the window, measure it together
# (`group_rho`), and the detector's significance confirms a step only where the step also
# holds at that autocorrelation (`_significant`). Replayed night by night with 8 peers
# (benchmarks/changepoint_lifecycle.py --peers 8), the false alarms confirmed per 1,000
# nights of AR(1) 0.5 noise went from 1.2 to 0.4 (a second seed: 4.5 to 1.2; 240 quiet
# histories: 2.5 to 0.5), the same with a step in every peer, and lasting 3 % (3-sigma)
# AR(1) steps were confirmed in the end in 0.90-0.92 of histories (0.93-0.95 alone);
# the other noise families did not move (NOTES-changepoint.md).
PEER_KEYS = ("pool", "gpu_sku", "device_kind", "family", "metric")
PEERS = 5
PEER_RUNS = 10
# metric -> (perf.case_stats column, unit); higher is worse for both.
METRICS = {"latency": ("median_ns", "ns"), "energy": ("energy_per_call_j", "J")}
_DESCRIBE = ("case_id", "pool", "gpu_sku", "device_kind", "family", "kernel", "backend", "dtype")
_DERIVED = ("cause", "attribution", "regression_id")  # derived after detection
# Set by people or at first sight, carried over by every mine.
_KEPT = ("acknowledged_by", "acknowledged_at", "note", "owner", "triage_due_dt", "closed_by", "closed_at", "close_note")


def _candidate_schema() -> T.StructType:
    fields = [T.StructField(f.name, f.dataType, True) for f in spark_schema(REGRESSIONS).fields
              if f.name not in _DERIVED]
    return T.StructType(fields + [T.StructField("is_new", T.BooleanType(), True)])


def regression_points(case_stats: DataFrame, runs: DataFrame) -> DataFrame:
    """The run-level points of every series (pipelines.mining.history), one row per
    series x metric x run with the metric's `value` (and the run's median latency); a
    value that is not positive is not a point."""
    points = series_points(case_stats, runs)
    common = ("series_key", *_DESCRIBE, "run_id", "dt", "started_at", "median_ns")
    # A value of 0 or less is no measurement (an energy counter that did not tick, or was reset):
    # a series stepping from it would read as a change of infinite percent. NaN and inf neither.
    def measured(v: F.Column) -> F.Column:
        return (v > 0) & (v < float("inf"))  # Spark orders NaN above inf

    by_metric = [points.withColumn("value", F.col(column).cast("double")).where(measured(F.col("value")))
                 .select(*common, F.lit(metric).alias("metric"), "value")
                 for metric, (column, _) in METRICS.items()]
    return functools.reduce(DataFrame.unionByName, by_metric)


def regression_id() -> F.Column:
    """The short stable id of a regression (what `perflake triage` takes)."""
    key = F.concat_ws("|", F.col("series_key"), F.col("metric"), F.col("change_run_id"))
    return F.substring(F.sha2(key, 256), 1, 10)


def regressions_table(points: DataFrame, previous: DataFrame, runs: DataFrame, now: datetime.datetime,
                      params: DetectorParams = DetectorParams(), fdr_q: float = FDR_Q,
                      owners: Owners | None = None, *, fixed: DataFrame | None = None,
                      family_points: DataFrame | None = None) -> DataFrame:
    """perf.regressions from the series points, the table's previous state and perf.runs
    (for attribution); new rows are routed by `owners` (default: load_owners()).
    `fixed`: earlier rows that are not re-examined but take part in their night's FDR
    family; `family_points`: the points that define each night's family (default
    `points`). Deterministic given its inputs and `now` (the time stamped on rows whose
    status is new), so re-mining unchanged data changes nothing."""
    owners = owners or load_owners()
    prev = _previous(previous)
    keys = ("series_key", "metric")
    points = points.join(peer_rho(family_points if family_points is not None else points), list(keys), "left")
    candidates = (points.groupBy(*keys).cogroup(prev.groupBy(*keys))
                  .applyInPandas(_series_detector(pd.Timestamp(now), params, owners), _candidate_schema()))
    if fixed is not None:
        names = _candidate_schema().names
        candidates = candidates.unionByName(_previous(fixed).withColumn("is_new", F.lit(False)).select(*names))
    family = ((family_points if family_points is not None else points)
              .groupBy(F.col("dt").alias("change_dt"), "metric")
              .agg(F.countDistinct("series_key").alias("family_size")))
    with_q = (candidates.join(family, ["change_dt", "metric"], "left")
              .groupBy("change_dt", "metric").applyInPandas(_night_q, T.StructType(
                  candidates.schema.fields + [T.StructField("family_size", T.LongType(), True)])))
    kept = with_q.where(~(F.col("is_new") & F.col("detected_by").isin("significance", "gradual")
                          & (F.col("q_value") > F.lit(fdr_q))))
    unit = F.coalesce(F.col("unit"), F.when(F.col("metric") == "energy", F.lit("J")).otherwise(F.lit("ns")))
    latency_old = F.col("metric") == "latency"  # rows from before schema v2 have no *_value
    return (with_attribution(kept, run_context(runs))
            .withColumn("regression_id", regression_id()).withColumn("unit", unit)
            .withColumn("before_value", F.coalesce(F.col("before_value"), F.when(latency_old, F.col("before_ns"))))
            .withColumn("after_value", F.coalesce(F.col("after_value"), F.when(latency_old, F.col("after_ns"))))
            .select(*ordered_columns(REGRESSIONS)))


def update_regressions(spark: SparkSession, lake: Lake, now: datetime.datetime | None = None,
                       params: DetectorParams = DetectorParams(), owners: Owners | None = None, *,
                       night: str | None = None, pools: list[str] | None = None) -> None:
    """Bring perf.regressions up to date, keeping each known regression's lifecycle, owner
    and due date (new ones are routed by `owners`, default: the owners file).

    With `night` (what a night's mine does), only the series that night measured (in
    `pools`, default all) are re-examined, over their runs of the HISTORY_DAYS days
    before it and any after it; every other row is kept as it was (rows of that window
    take part in their night's FDR family again). The work is proportional to the night,
    not to the lake. Without `night`, every series is re-examined over its whole history."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    with catalog.table_lock(lake, REGRESSIONS):  # read, change, publish: no `triage ack` in between
        name = catalog.ensure_table(spark, lake, REGRESSIONS)
        runs, stats = spark.table(f"{DATABASE}.runs"), spark.table(f"{DATABASE}.case_stats")
        previous = spark.table(name)
        if night is None:
            points = regression_points(stats, runs)
            table = regressions_table(points, previous, runs, now, params, owners=owners)
        else:
            start = window_start(night)
            # The window's runs, its points and the previous table are each read once and
            # held (localCheckpoint): every part of the plan below uses them, and as plain
            # lineage each use re-read and re-joined the tables (a night's plan had 107
            # file scans and 33 jobs; NOTES-services.md, "CI time").
            runs = runs.where(F.col("dt") >= F.lit(start)).localCheckpoint()
            window = regression_points(stats.where(F.col("dt") >= F.lit(start)), runs).localCheckpoint()
            previous = previous.localCheckpoint()
            tonight = window.where(F.col("dt") == F.lit(night))
            if pools:
                tonight = tonight.where(F.col("pool").isin(pools))
            touched = tonight.select("series_key").distinct()
            # A change whose last good run is in the window can be measured again; older ones stay as they are.
            inside = F.coalesce(F.col("last_good_dt") >= F.lit(start), F.col("change_dt") >= F.lit(start), F.lit(False))
            recent = previous.where(inside)
            table = (regressions_table(window.join(touched, "series_key", "left_semi"),
                                       recent.join(touched, "series_key", "left_semi"), runs, now, params,
                                       owners=owners, fixed=recent.join(touched, "series_key", "left_anti"),
                                       family_points=window)
                     .unionByName(previous.where(~inside).select(*ordered_columns(REGRESSIONS))))
        # The table is an input of its own new state; overwrite publishes a new snapshot
        # directory, so the plan reads the old files while it writes (catalog._publish_snapshot).
        catalog.overwrite(spark, lake, table, REGRESSIONS)


def peer_rho(points: DataFrame) -> DataFrame:
    """(series_key, metric, peer_rho): the noise autocorrelation of each series' group
    (PEER_KEYS; `group_rho`), for the series of groups that have one."""
    group = F.concat_ws("\x1f", *[F.coalesce(F.col(c).cast("string"), F.lit("")) for c in PEER_KEYS])
    return (points.select(group.alias("peer_group"), "series_key", "metric", "run_id", "started_at", "value")
            .groupBy("peer_group").applyInPandas(_group_rho, "series_key string, metric string, peer_rho double"))


def window_start(night: str) -> str:
    """The first date a night's mine reads when it re-examines its series."""
    return (datetime.date.fromisoformat(night) - datetime.timedelta(days=HISTORY_DAYS)).isoformat()


def _previous(rows: DataFrame) -> DataFrame:
    """Earlier rows without their derived columns (recomputed), metric filled in."""
    return (rows.select(*[c for c in ordered_columns(REGRESSIONS) if c not in _DERIVED])
            .withColumn("metric", F.coalesce(F.col("metric"), F.lit("latency"))))  # rows from before schema v2


def provisional_cases(regressions: DataFrame, measured: DataFrame) -> dict[str, list[str]]:
    """Per pool, the cases with an open provisional change that `measured` (rows of pool
    and case_id: what a sweep's runs measured) measured again: what a confirmation rerun
    should measure. A flag first seen in the sweep's run, and one still waiting for the
    runs that confirm or clear it (`confirms` takes up to CONFIRM_RUNS)."""
    rows = (regressions.where(F.col("status") == "provisional").select("pool", "case_id")
            .join(measured.select("pool", "case_id"), ["pool", "case_id"], "left_semi")
            .distinct().orderBy("pool", "case_id").collect())
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r.pool, []).append(r.case_id)
    return out


# --- per series (pandas, on the executors) ----------------------------------------------

def group_rho(series: list[np.ndarray]) -> float | None:
    """The noise autocorrelation of a group's series (each a history in run order), or
    None where fewer than PEERS of them have PEER_RUNS runs or more: read off the runs'
    consecutive differences, which no step moves but by one outlier. Under AR(1) noise
    of autocorrelation rho, d_t = x_t - x_(t-1) and d_(t-1) correlate as -(1 - rho) / 2;
    their rank correlation (Spearman's, each series' differences ranked on their own,
    pooled over the series) is turned into rho through the normal law's
    r = 2 sin(pi r_s / 6). Over 9 series of 35 runs (simulated), it reads 0.50 on AR(1)
    0.5 noise (10-90 %: 0.37-0.65) and 0.55 with a 3-sigma step in every series (the
    runs' own autocorrelation, as `noise_rho` measures it about no change, reads 0.47
    and 0.80); 0.05-0.06 on independent Gaussian, Student-t(3) and two-mode noise,
    0.09-0.10 with the step (about no change 0.57-0.72)."""
    lagged = pairs = 0.0
    used = 0
    for values in series:
        if len(values) < PEER_RUNS:
            continue
        r = rankdata(np.diff(values))
        if r.std() == 0:
            continue
        r = (r - r.mean()) / r.std()
        lagged, pairs, used = lagged + float(np.dot(r[1:], r[:-1])), pairs + len(r) - 1, used + 1
    if used < PEERS:
        return None
    diff_corr = 2 * np.sin(np.pi * (lagged / pairs) / 6)
    return float(np.clip(1 + 2 * diff_corr, 0.0, MAX_RHO))


def _group_rho(points: pd.DataFrame) -> pd.DataFrame:
    """group_rho of one group's points, as a row per series and metric."""
    points = points.sort_values(["started_at", "run_id"]).drop_duplicates(["series_key", "metric", "run_id"],
                                                                          keep="last")
    series = {key: g["value"].to_numpy(dtype=float) for key, g in points.groupby(["series_key", "metric"])}
    rho = group_rho(list(series.values()))
    return pd.DataFrame({"series_key": [k for k, _ in series], "metric": [m for _, m in series],
                         "peer_rho": [rho] * len(series)}).dropna()


def _series_detector(now: pd.Timestamp, params: DetectorParams, owners: Owners):
    # A plain function (not functools.partial): Spark inspects the UDF's type hints.
    def series_changes(points: pd.DataFrame, prev: pd.DataFrame) -> pd.DataFrame:
        return _triaged(_series_changes(points, prev, now=now, params=params), owners)
    return series_changes


def _triaged(rows: pd.DataFrame, owners: Owners) -> pd.DataFrame:
    """Rows with an owner and a due date: kept where known, routed where new."""
    for i, r in rows.iterrows():
        owner = r["owner"] if isinstance(r["owner"], str) else owners.route(r.to_dict())
        rows.at[i, "owner"] = owner
        if not isinstance(r["triage_due_dt"], str):
            seen = pd.Timestamp(r["first_seen_at"])
            seen = (seen.tz_localize("UTC") if seen.tzinfo is None else seen.tz_convert("UTC")).date()
            rows.at[i, "triage_due_dt"] = owners.due_date(owner, seen).isoformat()
    return rows


def _series_changes(points: pd.DataFrame, prev: pd.DataFrame, *, now: pd.Timestamp,
                    params: DetectorParams) -> pd.DataFrame:
    """The regressions of one metric of one series: its detected changes merged with its
    known ones."""
    known = {r["change_run_id"]: r for r in prev.to_dict("records")}
    if points.empty:  # its history is gone: keep what was known as it was
        return _frame([{**r, "is_new": False} for r in known.values()])
    pts = (points.sort_values(["started_at", "run_id"]).drop_duplicates("run_id", keep="last")
           .reset_index(drop=True))
    values = pts["value"].to_numpy(dtype=float)
    latency = pts["median_ns"].to_numpy(dtype=float)
    peer = pts["peer_rho"].iloc[0] if "peer_rho" in pts else None
    peer = float(peer) if peer is not None and pd.notna(peer) else None
    pos = {run: i for i, run in enumerate(pts["run_id"])}
    active = {pos[k]: r for k, r in known.items() if k in pos and r["status"] != "cleared"}
    cleared = {pos[k] for k, r in known.items() if k in pos and r["status"] == "cleared"}

    fresh: dict[int, object] = {}      # position -> Change, for changes not known before
    evidence: dict[int, tuple] = {}    # known position -> (how, p-value): the detector's report this time
    exact: dict[int, object] = {}      # known position -> the detector's Change at exactly it
    reported = detect(values, params=params)
    for c in reported:
        report = (_detected_by(c), c.p_value)
        if c.index in cleared and _significant(values, c.index, report, params, others=[o.index for o in reported],
                                               peer_rho=peer):  # cleared, now significant: open again
            cleared.discard(c.index)
            active[c.index] = known[pts.at[c.index, "run_id"]]
        if c.index in active:
            evidence[c.index], exact[c.index] = report, c
            continue
        if c.index in cleared:
            continue
        near = [i for i, r in active.items() if r["direction"] == c.direction and abs(i - c.index) <= MATCH_RUNS]
        if near:
            evidence.setdefault(min(near, key=lambda i: abs(i - c.index)), report)
        else:
            fresh[c.index] = c

    cuts = sorted(set(active) | set(fresh))
    # Statuses first: a change cleared now no longer bounds its neighbours' segments, so
    # decide again without it until nothing changes (as the next mine will see it).
    # A provisional change does not end the level of one before it, for `confirms`: a rerun
    # that went the other way is that change not holding, not the start of its own level.
    tentative = {i for i in cuts if (fresh[i].provisional if i in fresh else active[i]["status"] == "provisional")}
    standing = cuts
    for _ in range(len(cuts) + 1):
        decided = {i: _decide(values, i, [j for j in standing if j != i], fresh.get(i), active.get(i), params,
                              seen=(_detected_by(fresh[i]), fresh[i].p_value) if i in fresh else evidence.get(i),
                              later_tentative=tentative, peer_rho=peer) for i in cuts}
        still = [i for i in cuts if decided[i][0] != "cleared"]
        if still == standing:
            break
        standing = still

    rows = [{**r, "is_new": False} for k, r in known.items() if k not in pos or pos[k] in cleared]
    for i in cuts:
        others = [j for j in standing if j != i]
        c = measure_at(values, i, changes=others, params=params)
        if c is None:  # a known change at the series' first run: nothing to measure it against
            rows.append({**active[i], "is_new": False})
            continue
        later = [j for j in standing if j > i]
        detected = fresh.get(i) or exact.get(i)
        how = _detected_by(fresh[i]) if i in fresh else evidence[i][0] if i in evidence else "tracked"
        status, agree = decided[i]
        # Latency on the same split: for an energy change, whether the speed held.
        speed = c if pts.at[i, "metric"] == "latency" else measure_at(latency, i, changes=others, params=params)
        rows.append(_row(pts, i, c, speed, detected.p_value if detected else c.p_value, status, how,
                         (later[0] if later else len(values)) - i, agree, active.get(i), now))
    return _frame(rows)


def _detected_by(change) -> str:
    """How the detector found a change: its newest-runs floors (provisional), its
    significance test, or that test with a level change it cannot tell from a drift
    (gradual: the cause may lie in any run of the segments either side)."""
    return "newest-runs" if change.provisional else "gradual" if change.gradual else "significance"


def _decide(values: np.ndarray, i: int, others: list[int], fresh, prior: dict | None,
            params: DetectorParams, seen: tuple[str, float] | None = None,
            later_tentative=frozenset(), peer_rho: float | None = None) -> tuple[str, bool | None]:
    """(status, whether the runs from i agree) of the change at position i; `seen`: how the
    detector reported it this time (`_detected_by`) and its p-value, None where it did
    not; `peer_rho`: the noise autocorrelation of its group (`group_rho`), or None.
    Whether the runs agree (`confirms`) is asked up to the next change that is not
    itself provisional (`later_tentative`).
    - A provisional change is confirmed when its runs agree or the detector's test finds
      it significant at CONFIRM_SHARE of its level (`_significant`); cleared when its runs
      disagree, when the detector no longer reports it once CONFIRM_RUNS runs are in (it
      never became unusual), or when WEAK_WAIT_RUNS runs are in and it is still only
      significant at the detector's level.
    - A confirmed change that the detector no longer reports and whose level has faded
      back is cleared (a short excursion, not a change).
    """
    agree = confirms(values, i, changes=[j for j in others if j < i or j not in later_tentative], params=params)
    significant = _significant(values, i, seen, params, others=others, peer_rho=peer_rho)
    if fresh is not None:
        return ("confirmed" if agree or significant else "provisional"), agree
    status = prior["status"]
    if status == "confirmed" and seen is None and faded(values, i, changes=others, params=params):
        return "cleared", agree
    if status == "cleared" and significant:  # the mine cleared it; the detector's test now finds it
        return "confirmed", agree
    if status != "provisional":
        return status, agree
    if agree or significant:
        return "confirmed", agree
    runs = np.sum(np.isfinite(values[i:]))
    if agree is False or (seen is None and runs >= CONFIRM_RUNS) or runs >= WEAK_WAIT_RUNS:
        return "cleared", agree
    return "provisional", agree


def _significant(values: np.ndarray, i: int, seen: tuple[str, float] | None, params: DetectorParams, *,
                 others=(), peer_rho: float | None = None) -> bool:
    """Whether the detector's report of the change at i confirms it: found by its
    significance test (a step or a gradual change, not a newest-runs flag) at a p-value
    of at most CONFIRM_SHARE of the level it was tested at; given its group's noise
    autocorrelation `peer_rho`, also as a step at that autocorrelation (`_step_p`,
    between the changes `others` either side: a gradual change too is a level that
    moved)."""
    if seen is None or seen[0] not in ("significance", "gradual") or seen[1] is None:
        return False
    young = np.sum(np.isfinite(values[i:])) <= TAIL_MAX
    level = CONFIRM_SHARE * (params.strict_alpha if young else params.alpha)
    if seen[1] > level:
        return False
    return not peer_rho or _step_p(values, i, others, peer_rho) <= level


def _step_p(values: np.ndarray, i: int, others, rho: float) -> float:
    """The detector's p-value (`fixed_split_pvalue`) of a step at i between the
    neighbouring changes in `others`, at the noise autocorrelation rho."""
    start = max((j for j in others if j < i), default=0)
    end = min((j for j in others if j > i), default=len(values))
    left, right = values[start:i], values[i:end]
    left, right = left[np.isfinite(left)], right[np.isfinite(right)]
    if len(left) == 0 or len(right) == 0:
        return 1.0
    return fixed_split_pvalue(left, right, rho, noise_sigma(np.concatenate([left, right]), [len(left)]))


def _row(pts: pd.DataFrame, i: int, change, speed, p_value: float, status: str, how: str, runs_after: int,
         agree: bool | None, prior: dict | None, now: pd.Timestamp) -> dict:
    at, good = pts.iloc[i], pts.iloc[i - 1]
    prior = prior or {}
    keep_since = prior.get("status") == status and prior.get("status_since") is not None
    return {
        **{c: prior.get(c) for c in _KEPT}, "metric": at["metric"], "unit": METRICS[at["metric"]][1],
        "series_key": at["series_key"], **{c: at[c] for c in _DESCRIBE},
        "change_run_id": at["run_id"], "change_dt": at["dt"],
        "last_good_run_id": good["run_id"], "last_good_dt": good["dt"],
        "before_ns": speed.before if speed else None, "after_ns": speed.after if speed else None,
        "before_value": change.before, "after_value": change.after, "change_pct": 100.0 * change.rel_change,
        "sigmas": change.sigmas, "p_value": p_value, "q_value": None,
        "direction": prior.get("direction") or change.direction, "status": status, "runs_after": runs_after,
        "confirmed_by_run_id": pts.iloc[i + 1]["run_id"] if agree and status != "provisional" else
        prior.get("confirmed_by_run_id"),
        "detected_by": how,
        "first_seen_at": prior.get("first_seen_at") or now,
        "status_since": prior["status_since"] if keep_since else now,
        "is_new": not prior,
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
