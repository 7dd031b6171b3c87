"""perf.series as a night's mine updates it: from each touched series' previous row and
the window of runs before the night, the same rows as from the whole history, night
after night, for a series that comes back after a gap, a new one, one measured too
rarely for the window, and a night mined again."""
from __future__ import annotations

import datetime

import pytest
from pyspark.sql import functions as F

from pipelines.mining.history import series_for_night, series_table, series_update, window_start
from schemas.spark import spark_schema
from schemas.tables import SERIES

# Thirteen mines, each checked against the whole history: minutes on a shared 2-core
# machine, so it runs in the end-to-end tier (make test-full).
pytestmark = pytest.mark.slow

# Small, so that a dozen nights cross the cut often: a row needs 3 runs, a night reads 2 days back.
BASELINE, WINDOW = 2, 2
POINT = ("series_key string, case_id string, pool string, gpu_sku string, hardware_fingerprint string, "
         "device_kind string, family string, kernel string, dtype string, run_id string, dt string, "
         "started_at timestamp, median_ns double")
LAST = 11


def night(n: int) -> str:
    return (datetime.date(2031, 1, 1) + datetime.timedelta(days=n - 1)).isoformat()


def point(key: str, n: int, median: float, run: str = "nightly", minute: int = 0) -> tuple:
    start = datetime.datetime(2031, 1, 1, 2, minute) + datetime.timedelta(days=n - 1)
    return (key, f"case-{key}", "pool", "H100", "hw", "simulated", "gemm", "mm", "bf16",
            f"{run}-{night(n)}", night(n), start, median)


def measured(n: int) -> list[tuple]:
    """What night n measures in the scenario."""
    rows = [point("nightly", n, 100.0 + n % 3)]
    if n == 4:
        rows.append(point("nightly", n, 104.0, run="rerun", minute=30))  # a confirmation rerun: its own run
    if n <= 5 or n >= 10:
        rows.append(point("gap", n, 50.0 + n % 2))  # away for four nights, longer than the window
    if n >= 8:
        rows.append(point("new", n, 10.0 + n % 4))  # first seen on night 8
    if n % 3 == 1:
        rows.append(point("sparse", n, 7.0 + n % 5))  # every third night: the window never holds 3 runs
    return rows


def rows(df) -> list[dict]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: r["series_key"])


class Lake:
    """Points by date, and the series table as jobs.mine.update_history keeps it."""

    def __init__(self, spark):
        self.spark, self.points = spark, {}
        self.table = spark.createDataFrame([], spark_schema(SERIES))

    def since(self, dt: str | None):
        return self.spark.createDataFrame(
            [p for d, ps in self.points.items() if dt is None or d >= dt for p in ps], POINT)

    def touched(self, n: int):
        return self.spark.createDataFrame([(k,) for k in sorted({p[0] for p in self.points[night(n)]})],
                                          "series_key string")

    def mine(self, n: int, measured_rows: list[tuple]) -> None:
        self.points[night(n)] = measured_rows  # a partition is replaced whole, as write_partitions does
        new = series_for_night(self.table, self.touched(n), night(n), self.since, BASELINE, WINDOW)
        table = new.unionByName(self.table.join(new.select("series_key"), "series_key", "left_anti"))
        self.table = self.spark.createDataFrame(table.collect(), table.schema)  # as a write cuts the lineage

    def whole_history(self) -> list[dict]:
        return rows(series_table(self.since(None), BASELINE, window_days=WINDOW))


REMINED = [point("nightly", LAST, 130.0), point("nightly", LAST, 131.0, run="rerun", minute=30)]


@pytest.fixture(scope="module")
def history(spark):
    """Nights 1..LAST mined in order, then night LAST mined again with a rerun landed
    since, and once more unchanged: after each mine, (label, incremental rows, rows
    from the whole history)."""
    lake, steps = Lake(spark), []
    plan = [(n, measured(n), f"night {n}") for n in range(1, LAST + 1)]
    again = [p for p in measured(LAST) if p[0] != "nightly"] + REMINED
    plan += [(LAST, again, "re-mined"), (LAST, again, "re-mined twice")]
    for n, measured_rows, label in plan:
        lake.mine(n, measured_rows)
        steps.append((label, rows(lake.table), lake.whole_history()))
    return lake, steps


def test_every_nights_update_equals_the_rows_of_the_whole_history(history):
    _, steps = history
    for label, incremental, whole in steps:
        assert incremental == whole, label


def test_counts_and_first_runs_carry_over_a_gap_a_new_series_and_a_rerun(history):
    _, steps = history
    by_key = {r["series_key"]: r for r in dict((s[0], s[1]) for s in steps)[f"night {LAST}"]}
    assert (by_key["nightly"]["n_runs"], by_key["nightly"]["first_dt"]) == (LAST + 1, night(1))
    assert (by_key["gap"]["n_runs"], by_key["gap"]["first_dt"]) == (7, night(1))
    assert (by_key["new"]["n_runs"], by_key["new"]["first_dt"]) == (LAST - 7, night(8))
    assert by_key["nightly"]["history_cut_dt"] == window_start(night(LAST), WINDOW)


def test_a_night_mined_again_replaces_its_runs_and_counts_them_once(history):
    _, steps = history
    n_runs = {label: {r["series_key"]: r["n_runs"] for r in incremental} for label, incremental, _ in steps}
    assert n_runs["re-mined"]["nightly"] == n_runs[f"night {LAST}"]["nightly"] + 1  # the rerun, once
    assert n_runs["re-mined twice"] == n_runs["re-mined"]


def test_only_a_series_measured_too_rarely_for_the_window_needs_its_whole_history(history, spark):
    lake, _ = history
    n = LAST + 2  # sparse's next night
    lake.points[night(n)] = measured(n)
    try:
        _, unsure = series_update(lake.table, lake.since(night(1)), lake.touched(n), night(n), night(1),
                                  BASELINE, WINDOW)
        assert sorted(r.series_key for r in unsure.collect()) == ["sparse"]
    finally:
        del lake.points[night(n)]


def test_a_row_from_before_the_carried_columns_is_recomputed_from_its_whole_history(history, spark):
    lake, _ = history
    tonight = sorted({p[0] for p in lake.points[night(LAST)]})
    old = F.col("series_key").isin(tonight)  # the night's series have rows without their cut
    lake.table = lake.table.withColumn("history_cut_dt", F.when(~old, F.col("history_cut_dt")))
    lake.mine(LAST, lake.points[night(LAST)])
    assert rows(lake.table) == lake.whole_history()
