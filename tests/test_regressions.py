"""perf.regressions over a simulated nightly history with known ground truth, pooled
attribution, and `perflake compare`.

The history: 12 nights on the simulated H100 in pool sim-regress (dates in 2033). From
night 9 on, every bf16 GEMM is 10 % slower (an injected regression) and torch goes from
2.12.0 to 2.13.0 (the run provenance says so). On night 12 one copy case is 15 % slower
in the nightly run only; its confirmation rerun that night measures it at its usual
level. Two more cases never change. Every night is landed as the harness lands it; see `history` for how each is mined.
"""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from kernels_bench.case import Case
from kernels_bench.sim import Injection, _unit

import sim_history

POOL = "sim-regress"
NIGHTS = [f"2033-03-{d:02d}" for d in range(1, 13)]
CHANGE_NIGHT, BLIP_NIGHT = NIGHTS[8], NIGHTS[11]
SLOWED = [Case.make("gemm", "matmul", "torch", "bf16", m=s, n=s, k=s) for s in (1024, 2048, 3072, 4096)]
STEADY = [Case.make("gemm", "matmul", "torch", "fp32", m=1024, n=1024, k=1024),
          Case.make("memory", "copy", "torch", "fp32", numel=1 << 22)]
BLIP = Case.make("memory", "copy", "torch", "fp32", numel=1 << 20)
NIGHTLY_INJECTIONS = (Injection(match={"kernel": "matmul", "dtype": "bf16"}, since=CHANGE_NIGHT, factor=1.10),
                      Injection(match={"kernel": "copy", "numel": 1 << 20}, since=BLIP_NIGHT, factor=1.15))


def run_id(dt: str, suffix: str = "") -> str:
    return f"regress-{dt}-{POOL}{suffix}"


def land_night(lake, tmp_path, dt: str, *, cases, injections, reason="nightly", suffix="", hour=2) -> str:
    """Measure `cases` on the simulated device for night `dt` and land them, with the
    provenance of that night: torch 2.12.0 before the change night, 2.13.0 from it on."""
    rid = sim_history.land_night(lake, tmp_path, dt, POOL, cases, injections, prefix="regress", reason=reason,
                                 suffix=suffix, hour=hour,
                                 torch_version="2.13.0" if dt >= CHANGE_NIGHT else "2.12.0")
    assert rid == run_id(dt, suffix)
    return rid


def snapshot(spark) -> pd.DataFrame:
    """The pool's latency changes (energy per call, tracked too, is tests/test_triage.py's)."""
    df = spark.sql(f"SELECT * FROM perf.regressions WHERE pool = '{POOL}' AND metric = 'latency'").toPandas()
    return df.sort_values(["series_key", "change_run_id"]).reset_index(drop=True)


def case_of(spark, case: Case) -> pd.DataFrame:
    return snapshot(spark).query("case_id == @case.case_id")


def publish(spark, lake, dates: list[str]) -> None:
    """Publish the landed nights `dates` in one Spark pass (tests/sim_history.py): the
    background history, without a mine per night."""
    sim_history.publish(spark, lake, dates, POOL)


@pytest.fixture(scope="module")
def history(spark, lake, tmp_path_factory):
    """Land the 12 nights and the blip's rerun; the table after each step. Nights are
    published in bulk and followed by update_regressions, the step every mine ends with;
    the blip night is then mined a second time by the real mining job."""
    from pyspark.sql import functions as F

    from jobs.mine import mine
    from pipelines.mining.regressions import provisional_cases, update_regressions
    from pipelines.triage.status import acknowledge

    tmp = tmp_path_factory.mktemp("regress")

    def land(dates):
        for dt in dates:
            land_night(lake, tmp, dt, cases=SLOWED + STEADY + [BLIP], injections=NIGHTLY_INJECTIONS)

    steps = {}
    land(NIGHTS[:8])
    publish(spark, lake, NIGHTS[:8])
    update_regressions(spark, lake)
    steps[NIGHTS[7]] = snapshot(spark)
    land([CHANGE_NIGHT])
    publish(spark, lake, [CHANGE_NIGHT])
    update_regressions(spark, lake)
    steps[CHANGE_NIGHT] = snapshot(spark)
    land(NIGHTS[9:11])
    publish(spark, lake, NIGHTS[9:11])
    update_regressions(spark, lake)
    steps[NIGHTS[10]] = snapshot(spark)
    land([BLIP_NIGHT])
    publish(spark, lake, [BLIP_NIGHT])
    update_regressions(spark, lake)
    steps[BLIP_NIGHT] = snapshot(spark)
    measured = spark.table("perf.case_stats").where(F.col("run_id") == run_id(BLIP_NIGHT))
    steps["to rerun"] = provisional_cases(spark.table("perf.regressions"), measured)
    # What the nightly DAG's rerun plan asks for after this night's mine (the sweep id
    # regress-<dt> names the pool's run regress-<dt>-<pool>, as pipelines.orchestration.tasks does).
    from pipelines.orchestration.tasks import unstable_cases

    steps["rerun plan"] = unstable_cases({"dt": BLIP_NIGHT, "run_id": f"regress-{BLIP_NIGHT}", "pools": [POOL]})
    mine(spark, lake, BLIP_NIGHT, [POOL])  # the same night again, by the real job
    steps["re-mined"] = snapshot(spark)
    first = steps[BLIP_NIGHT].query("case_id == @SLOWED[0].case_id").iloc[0]
    acknowledge(spark, lake, first.regression_id, by="alice", note="known: new bf16 tiles")
    # The rerun of the blip case that night, on a device without the slowdown.
    land_night(lake, tmp, BLIP_NIGHT, cases=[BLIP], injections=(), reason="rerun", suffix="-rerun", hour=5)
    publish(spark, lake, [BLIP_NIGHT])
    update_regressions(spark, lake)
    steps["after rerun"] = snapshot(spark)
    steps["acknowledged"] = (first.series_key, first.change_run_id)
    return steps


def test_the_simulated_cases_of_the_scenario_are_unimodal():
    # The sim gives 10 % of cases two modes 3 % apart; the scenario's ground truth
    # assumes none of its cases is one of them.
    assert all(_unit("bimodal", c.case_id) >= 0.10 for c in SLOWED + STEADY + [BLIP])


def test_nothing_is_reported_before_the_injected_change(history):
    assert history[NIGHTS[7]].empty


def test_the_injected_step_is_provisional_on_its_first_night(history):
    rows = history[CHANGE_NIGHT]
    assert sorted(rows.case_id) == sorted(c.case_id for c in SLOWED)
    assert set(rows.status) == {"provisional"}
    assert set(rows.change_run_id) == {run_id(CHANGE_NIGHT)}
    assert set(rows.last_good_run_id) == {run_id(NIGHTS[7])}
    assert set(rows.direction) == {"regression"} and set(rows.runs_after) == {1}


def test_the_next_nights_confirm_it_at_the_same_change_run(history):
    rows = history[NIGHTS[10]]
    assert sorted(rows.case_id) == sorted(c.case_id for c in SLOWED)
    assert set(rows.status) == {"confirmed"}
    assert set(rows.change_run_id) == {run_id(CHANGE_NIGHT)}
    assert set(rows.confirmed_by_run_id) == {run_id(NIGHTS[9])}


def test_the_step_is_found_with_its_size_direction_and_cause(history):
    rows = history[NIGHTS[10]].query("case_id in @ids", local_dict={"ids": [c.case_id for c in SLOWED]})
    assert len(rows) == len(SLOWED)
    assert set(rows.change_run_id) == {run_id(CHANGE_NIGHT)} and set(rows.status) == {"confirmed"}
    assert set(rows.direction) == {"regression"}
    assert rows.change_pct.between(8.5, 11.5).all(), rows.change_pct.tolist()
    assert (rows.after_ns > rows.before_ns).all() and (rows.p_value > 0).all() and rows.q_value.notna().all()
    assert set(rows.cause) == {"torch 2.12.0 -> 2.13.0"}
    assert all(dict(a) == {"torch": "2.12.0 -> 2.13.0"} for a in rows.attribution)


def test_change_free_series_yield_no_regression(history):
    ids = {c.case_id for c in STEADY}
    for step, rows in history.items():
        if isinstance(rows, pd.DataFrame):
            assert not set(rows.case_id) & ids, step


def test_a_one_run_slowdown_is_provisional_and_cleared_by_its_rerun(history):
    (blip,) = history[BLIP_NIGHT].query("case_id == @BLIP.case_id").itertuples()
    assert blip.status == "provisional" and blip.change_run_id == run_id(BLIP_NIGHT)
    assert blip.change_pct == pytest.approx(15, abs=2) and blip.cause == "no recorded difference"
    assert history["to rerun"] == {POOL: [BLIP.case_id]}
    (after,) = history["after rerun"].query("case_id == @BLIP.case_id").itertuples()
    assert after.status == "cleared" and after.change_run_id == run_id(BLIP_NIGHT)


def test_the_nightly_rerun_plan_includes_the_provisional_regression(history):
    assert BLIP.case_id in history["rerun plan"][POOL]


def test_mining_the_same_night_twice_gives_the_same_table(history):
    pd.testing.assert_frame_equal(history[BLIP_NIGHT], history["re-mined"])


def test_a_nights_update_leaves_alone_what_that_night_did_not_measure(history, spark, lake):
    # What every mine runs: update_regressions(night=...). Rows of series the night did
    # not measure, and changes whose last good run left the window, stay exactly as they were.
    import datetime

    from pipelines.mining.regressions import HISTORY_DAYS, update_regressions

    before = snapshot(spark)
    later = (datetime.date.fromisoformat(BLIP_NIGHT) + datetime.timedelta(days=HISTORY_DAYS + 30)).isoformat()
    update_regressions(spark, lake, night=later)
    pd.testing.assert_frame_equal(before, snapshot(spark))
    update_regressions(spark, lake, night=BLIP_NIGHT, pools=["a-pool-that-measured-nothing"])
    pd.testing.assert_frame_equal(before, snapshot(spark))


def test_an_acknowledged_regression_stays_acknowledged_when_re_mined(history):
    key, change = history["acknowledged"]
    (row,) = history["after rerun"].query("series_key == @key and change_run_id == @change").itertuples()
    assert row.status == "acknowledged" and row.acknowledged_by == "alice" and row.note == "known: new bf16 tiles"
    others = history["after rerun"].query("case_id in @ids and series_key != @key",
                                          local_dict={"ids": [c.case_id for c in SLOWED], "key": key})
    assert set(others.status) == {"confirmed"}


def test_pooled_attribution_groups_the_nights_changes_by_cause(history, spark):
    from pipelines.mining.attribution import changes, describe, pooled

    table = spark.table("perf.regressions").where(f"pool = '{POOL}' AND metric = 'latency'")
    groups = [r.asDict() for r in pooled(changes(table, CHANGE_NIGHT)).collect()]
    assert len(groups) == 1
    (g,) = groups
    assert (g["cause"], g["direction"], g["family"], g["dtype"], g["series"]) == (
        "torch 2.12.0 -> 2.13.0", "regression", "gemm", "bf16", 4)
    assert 8.5 <= g["min_pct"] <= g["max_pct"] <= 11.5
    assert describe(g).startswith("torch 2.12.0 -> 2.13.0: 4 bf16 gemm series (simulated) slower by ")


def test_the_regressions_command_prints_the_pooled_groups(history, capsys):
    from pipelines.cli import main

    assert main(["regressions", "--date", CHANGE_NIGHT, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    mine = [g for g in out["groups"] if g["cause"] == "torch 2.12.0 -> 2.13.0" and g["dtype"] == "bf16"
            and g["metric"] == "latency"]
    assert len(mine) == 1 and mine[0]["series"] == 4 and "slower by" in mine[0]["summary"]


def test_a_night_without_changes_says_whether_it_was_mined(history, capsys):
    from pipelines.cli import main

    assert main(["regressions", "--date", NIGHTS[2]]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"  (runs of {NIGHTS[2]} were mined: no series changed that night)"
    assert main(["regressions", "--date", "2033-04-30"]) == 0
    # The tier's lake is shared: other modules' nights widen the range around this one's.
    note = re.fullmatch(r"  \(no run of 2033-04-30 was mined; the lake's nights run from (\S+) to (\S+)\)",
                        capsys.readouterr().out.splitlines()[-1])
    assert note and note[1] <= NIGHTS[0] and note[2] >= NIGHTS[-1]


def compare_json(capsys, *argv) -> dict:
    from pipelines.cli import main

    assert main(["compare", *argv, "--format", "json"]) == 0
    return {c["case_id"]: c for c in json.loads(capsys.readouterr().out)["cases"]}


def test_compare_calls_a_10_percent_slowdown_slower_and_the_rest_same(history, capsys):
    cases = compare_json(capsys, run_id(NIGHTS[7]), run_id(CHANGE_NIGHT))
    for c in SLOWED:
        r = cases[c.case_id]
        assert r["verdict"] == "slower" and r["ratio"] == pytest.approx(1.10, abs=0.02)
        assert r["ci_low"] > 1.02 and r["test"].startswith("mann-whitney")
    for c in STEADY + [BLIP]:
        assert cases[c.case_id]["verdict"] == "same", cases[c.case_id]


def test_compare_on_duckdb_gives_the_same_rows_as_on_spark(history, capsys):
    spark_rows = compare_json(capsys, run_id(NIGHTS[7]), run_id(CHANGE_NIGHT))
    duck_rows = compare_json(capsys, run_id(NIGHTS[7]), run_id(CHANGE_NIGHT), "--engine", "duckdb")
    assert duck_rows == spark_rows
    assert {duck_rows[c.case_id]["verdict"] for c in SLOWED} == {"slower"}
    by_filters = compare_json(capsys, "--a", f"pool={POOL}", "--a", "torch_version=2.12.0", "--b", f"pool={POOL}",
                              "--b", "torch_version=2.13.0", "--b", "reason=nightly", "--engine", "duckdb")
    assert {by_filters[c.case_id]["verdict"] for c in SLOWED} == {"slower"}


def test_compare_of_a_run_with_itself_is_all_same(history, capsys):
    cases = compare_json(capsys, run_id(NIGHTS[3]), run_id(NIGHTS[3]))
    assert len(cases) == len(SLOWED + STEADY) + 1
    assert {c["verdict"] for c in cases.values()} == {"same"}


def test_compare_by_filters_pools_the_runs_of_each_side(history, capsys):
    cases = compare_json(capsys, "--a", f"pool={POOL}", "--a", "torch_version=2.12.0",
                         "--b", f"pool={POOL}", "--b", "torch_version=2.13.0", "--b", "reason=nightly")
    assert {cases[c.case_id]["verdict"] for c in SLOWED} == {"slower"}
    assert cases[STEADY[0].case_id]["verdict"] == "same"


def test_compare_refuses_an_unknown_filter_key(capsys):
    from pipelines.cli import main

    assert main(["compare", "--a", "1=1; DROP TABLE perf.runs", "--b", "run_id=x"]) == 2
    assert "not a run attribute" in capsys.readouterr().err
