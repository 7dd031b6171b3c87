"""Energy as a tracked metric, owners and due dates, and the triage lifecycle.

The history (pool sim-triage, dates in 2036): 8 quiet nights, then from the change
night (Friday 2036-03-07) on, the bf16 GEMMs draw 10 % more power at the same speed
(an injected power_factor) and one copy kernel is 10 % slower; a fp32 GEMM never
changes. Each step is published and followed by update_regressions with the time of
that night's mine, as every mine ends (tests/sim_history.py).
"""
from __future__ import annotations

import datetime
import json

import pytest

from kernels_bench.case import Case
from kernels_bench.sim import Injection, _unit
from pipelines.config.owners import add_working_days, load_owners, parse_owners
from sim_history import at, land_night, publish, snapshot

POOL = "sim-triage"
NIGHTS = ["2036-02-28", "2036-02-29"] + [f"2036-03-{d:02d}" for d in range(1, 10)]
CHANGE_NIGHT, CONFIRM_NIGHT, LATER_NIGHT = "2036-03-07", "2036-03-08", "2036-03-09"  # Fri, Sat, Sun
HOTTER = [Case.make("gemm", "matmul", "torch", "bf16", m=s, n=s, k=s) for s in (2048, 4096)]
SLOWER = Case.make("memory", "copy", "torch", "fp32", numel=1 << 22)
STEADY = Case.make("gemm", "matmul", "torch", "fp32", m=1024, n=1024, k=1024)
INJECTIONS = (Injection(match={"kernel": "matmul", "dtype": "bf16"}, since=CHANGE_NIGHT, power_factor=1.10),
              Injection(match={"kernel": "copy", "numel": 1 << 22}, since=CHANGE_NIGHT, factor=1.10))
OWNERS = parse_owners({
    "default_owner": "perf-triage",
    "teams": {"perf-triage": {"email": "perf@example.com"}, "gemm-bf16": {"email": "bf16@example.com"},
              "gemm": {"email": "gemm@example.com"}, "memory": {"webhook": "https://hooks.example.com/x"},
              "elsewhere": {}},
    "routes": [{"family": "gemm", "dtype": "bf16", "owner": "gemm-bf16"},
               {"family": "gemm", "owner": "gemm"},
               {"family": "memory", "pool": "sim-tri*", "owner": "memory"}],
}, "test-owners")
# A re-mine after the owners file changed: known regressions keep their owner.
REROUTED = parse_owners({"default_owner": "elsewhere", "teams": {"elsewhere": {}}}, "rerouted")


def test_routing_takes_the_first_matching_route_else_the_default():
    assert OWNERS.route({"family": "gemm", "backend": "torch", "dtype": "bf16", "pool": "h100"}) == "gemm-bf16"
    assert OWNERS.route({"family": "gemm", "backend": "torch", "dtype": "fp32", "pool": "h100"}) == "gemm"
    assert OWNERS.route({"family": "memory", "dtype": "fp32", "pool": "sim-triage"}) == "memory"
    assert OWNERS.route({"family": "memory", "dtype": "fp32", "pool": "cpu"}) == "perf-triage"
    assert OWNERS.route({"family": "attention", "dtype": "bf16", "pool": "sim-triage"}) == "perf-triage"


def test_the_due_date_is_two_working_days_later_skipping_weekends():
    day = datetime.date.fromisoformat
    assert add_working_days(day("2036-03-05"), 2) == day("2036-03-07")  # Wed -> Fri
    assert add_working_days(day("2036-03-06"), 2) == day("2036-03-10")  # Thu -> Mon
    assert add_working_days(day("2036-03-07"), 2) == day("2036-03-11")  # Fri -> Tue
    assert add_working_days(day("2036-03-08"), 2) == day("2036-03-11")  # Sat -> Tue


@pytest.mark.parametrize("text, where", [
    ("default_owner: nobody\nteams: {a: {}}\n", "default_owner: team 'nobody' is not defined"),
    ("default_owner: a\nteams: {a: {email: not-an-address}}\n", "teams.a.email: 'not-an-address'"),
    ("default_owner: a\nteams: {a: {}}\nroutes:\n  - {family: gemm, owner: a}\n  - {family: gemm, owner: b}\n",
     "routes[1].owner: team 'b'"),
    ("default_owner: a\nteams: {a: {}}\nroutes:\n  - {kernel: matmul, owner: a}\n", "routes[0]: unknown field"),
    ("default_owner: a\nteams: {a: {webhook: ftp://x}}\n", "teams.a.webhook"),
])
def test_a_bad_owners_file_is_refused_naming_file_entry_and_field(tmp_path, text, where):
    path = tmp_path / "owners.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        load_owners(path)
    assert str(path) in str(e.value) and where in str(e.value)


def test_the_shipped_owners_file_loads():
    owners = load_owners()
    assert owners.route({"family": "gemm"}) == "gemm" and owners.notify is False


def test_the_scenarios_cases_are_unimodal_on_the_simulator():
    assert all(_unit("bimodal", c.case_id) >= 0.10 for c in HOTTER + [SLOWER, STEADY])


@pytest.fixture(scope="module")
def history(spark, lake, tmp_path_factory):
    from pipelines.mining.regressions import update_regressions

    tmp = tmp_path_factory.mktemp("triage")

    def night(dates, owners=OWNERS):
        for dt in dates:
            land_night(lake, tmp, dt, POOL, HOTTER + [SLOWER, STEADY], INJECTIONS, prefix="triage")
        publish(spark, lake, dates, POOL)
        update_regressions(spark, lake, now=at(dates[-1]), owners=owners)
        return snapshot(spark, POOL)

    # The quiet nights and the change night in one pass: the change is first seen on Friday.
    return {CHANGE_NIGHT: night(NIGHTS[:9]), CONFIRM_NIGHT: night([CONFIRM_NIGHT])}


def energy_rows(rows):
    return rows[rows.case_id.isin([c.case_id for c in HOTTER])]


def test_nothing_is_reported_before_the_change_nor_in_steady_series(history):
    for rows in history.values():
        assert set(rows.change_dt) == {CHANGE_NIGHT}
        assert STEADY.case_id not in set(rows.case_id)


def test_more_power_at_the_same_speed_is_an_energy_regression_and_not_a_latency_one(history):
    first, rows = energy_rows(history[CHANGE_NIGHT]), energy_rows(history[CONFIRM_NIGHT])
    assert len(first) == len(HOTTER) and set(first.status) == {"provisional"}
    assert len(rows) == len(HOTTER)
    assert set(rows.metric) == {"energy"} and set(rows.unit) == {"J"}  # no latency row for these cases
    assert set(rows.status) == {"confirmed"} and set(rows.direction) == {"regression"}
    assert set(rows.change_run_id) == {f"triage-{CHANGE_NIGHT}-{POOL}"}
    assert rows.change_pct.between(8.5, 11.5).all(), rows.change_pct.tolist()
    assert (rows.after_value / rows.before_value).between(1.085, 1.115).all()
    # The latency on the same runs held.
    assert (rows.after_ns / rows.before_ns - 1).abs().lt(0.015).all(), (rows.after_ns / rows.before_ns).tolist()


def test_a_slowdown_is_a_latency_regression_and_costs_energy_too(history):
    rows = history[CONFIRM_NIGHT].query("case_id == @SLOWER.case_id")
    assert sorted(rows.metric) == ["energy", "latency"]
    assert set(rows.status) == {"confirmed"} and rows.change_pct.between(8.5, 11.5).all()


def test_each_regression_is_routed_to_its_owner_with_a_due_date_two_working_days_after_first_seen(history):
    rows = history[CONFIRM_NIGHT]
    owner = dict(zip(rows.case_id + "/" + rows.metric, rows.owner))
    assert {owner[f"{c.case_id}/energy"] for c in HOTTER} == {"gemm-bf16"}  # first match, not 'gemm'
    assert owner[f"{SLOWER.case_id}/latency"] == owner[f"{SLOWER.case_id}/energy"] == "memory"
    # First seen by the mine of Friday 2036-03-07: due on Tuesday, kept by the next mine.
    assert set(rows.first_seen_at.dt.strftime("%Y-%m-%d")) == {CHANGE_NIGHT}
    assert set(rows.triage_due_dt) == {"2036-03-11"}
    assert rows.regression_id.str.fullmatch(r"[0-9a-f]{10}").all() and rows.regression_id.is_unique


def cli(capsys, *argv) -> tuple[int, str, str]:
    from pipelines.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def lifecycle(history, spark, lake, tmp_path_factory):
    """Acknowledge one regression and close another from the terminal, then mine the
    next night with an owners file that routes everything elsewhere."""
    from pipelines.mining.regressions import update_regressions
    from pipelines.triage.status import acknowledge, close

    rows = energy_rows(history[CONFIRM_NIGHT]).sort_values("regression_id")
    acked, closed = rows.regression_id.iloc[0], rows.regression_id.iloc[1]
    acknowledge(spark, lake, acked, by="alice", note="new power policy; checking clocks", at=at(CONFIRM_NIGHT, 9))
    close(spark, lake, closed, by="bob", note="expected: boost clocks on", at=at(CONFIRM_NIGHT, 10))
    before = snapshot(spark, POOL)
    land_night(lake, tmp_path_factory.mktemp("triage-later"), LATER_NIGHT, POOL, HOTTER + [SLOWER, STEADY],
               INJECTIONS, prefix="triage")
    publish(spark, lake, [LATER_NIGHT], POOL)
    update_regressions(spark, lake, now=at(LATER_NIGHT), owners=REROUTED)
    return {"acked": acked, "closed": closed, "before": before, "after": snapshot(spark, POOL)}


def test_ack_and_close_survive_a_re_mine_with_who_when_and_why(lifecycle):
    after = lifecycle["after"].set_index("regression_id")
    a, c = after.loc[lifecycle["acked"]], after.loc[lifecycle["closed"]]
    assert (a.status, a.acknowledged_by, a.note) == ("acknowledged", "alice", "new power policy; checking clocks")
    assert a.acknowledged_at == a.status_since and a.acknowledged_at.hour == 9
    assert (c.status, c.closed_by, c.close_note) == ("closed", "bob", "expected: boost clocks on")
    assert c.closed_at.hour == 10 and c.status_since == c.closed_at
    assert len(after) == len(lifecycle["before"])  # the closed step is not reported again
    # Owner, due date and first sight are kept although the owners file now routes elsewhere.
    keep = ["owner", "triage_due_dt", "first_seen_at", "status", "note", "close_note"]
    before = lifecycle["before"].set_index("regression_id")
    assert after[keep].sort_index().equals(before[keep].sort_index())
    assert "elsewhere" not in set(after.owner)


def test_triage_commands_list_ack_and_close_from_the_terminal(lifecycle, capsys):
    code, out, _ = cli(capsys, "triage", "list", "--owner", "gemm-bf16", "--format", "json")
    assert code == 0
    listed = {r["regression_id"]: r for r in json.loads(out)["regressions"]}
    assert set(listed) == {lifecycle["acked"]}  # the closed one is no longer open
    code, out, _ = cli(capsys, "triage", "list", "--owner", "gemm-bf16")
    header, _, row, *_ = out.splitlines()
    assert code == 0 and "device_kind" in header.split(" | ") and " | simulated " in row  # simulated is labelled
    code, out, _ = cli(capsys, "triage", "list", "--overdue", "--today", "2036-03-12", "--format", "json")
    late = {r["regression_id"]: r for r in json.loads(out)["regressions"] if r["pool"] == POOL}
    assert {r["case_id"] for r in late.values()} == {SLOWER.case_id}  # acknowledged and closed are not late
    assert all(r["overdue"] and r["triage_due_dt"] == "2036-03-11" for r in late.values())
    (slow_id, *_) = sorted(late)
    assert cli(capsys, "triage", "ack", slow_id, "--note", "bisecting", "--by", "carol")[0] == 0
    assert cli(capsys, "triage", "close", slow_id, "--note", "fixed upstream", "--by", "carol")[0] == 0
    code, out, _ = cli(capsys, "triage", "list", "--status", "closed", "--owner", "memory", "--format", "json")
    (row,) = [r for r in json.loads(out)["regressions"] if r["regression_id"] == slow_id]
    assert (row["closed_by"], row["close_note"], row["acknowledged_by"], row["note"]) == (
        "carol", "fixed upstream", "carol", "bisecting")
    code, _, err = cli(capsys, "triage", "ack", lifecycle["closed"], "--note", "again", "--by", "dave")
    assert code == 2 and "closed" in err
    code, _, err = cli(capsys, "triage", "close", slow_id, "--note", "mine now", "--by", "mallory")
    assert code == 2 and "closed already" in err  # who closed it and why are kept
    code, out, _ = cli(capsys, "triage", "list", "--status", "closed", "--owner", "memory", "--format", "json")
    (row,) = [r for r in json.loads(out)["regressions"] if r["regression_id"] == slow_id]
    assert (row["closed_by"], row["close_note"]) == ("carol", "fixed upstream")
    code, _, err = cli(capsys, "triage", "ack", "0000000000", "--note", "x", "--by", "dave")
    assert code == 2 and "no regression with id '0000000000'" in err


def test_the_nightly_report_lists_energy_changes_apart_with_the_latency_on_the_same_runs():
    import pandas as pd

    from pipelines.report.regressions import section

    row = {"series_key": "s1", "case_id": "c1", "kernel": "matmul", "dtype": "bf16", "gpu_sku": "H100-SXM5-80GB",
           "device_kind": "simulated", "change_run_id": "r8", "change_dt": "2036-03-07", "last_good_run_id": "r7",
           "before_ns": 100.0, "after_ns": 100.2, "change_pct": 10.0, "q_value": None, "direction": "regression",
           "status": "confirmed", "cause": "no recorded difference"}
    energy = {**row, "metric": "energy", "before_value": 0.050, "after_value": 0.055}
    html = section(pd.DataFrame([{**row, "metric": "latency"}, energy]).iloc[1:], "2036-03-07", ["r8"],
                   pd.DataFrame(), pd.DataFrame())
    assert "Regressions (slower): 0" in html and "Energy per call: 1 change(s)" in html
    assert "+10.0 %" in html and "+0.2 %" in html and "50 mJ" in html and "55 mJ" in html


def test_the_dashboards_triage_write_runs_in_a_process_of_its_own_that_lets_the_metastore_go(tmp_path):
    from pipelines.config.lake import Lake
    from pipelines.triage.apply import apply
    from pipelines.warehouse.preflight import metastore_holder

    other = Lake(tmp_path / "lake")  # not this process's lake: the child starts Spark on it
    status, detail = apply(other, "close", "0123456789", "alice", "fixed")
    assert status == 404 and "no regression with id '0123456789'" in detail
    assert (other.metastore).exists() and metastore_holder(other) is None  # the child has ended and let go
