"""The demos' parts that need neither Spark nor a DAG run (issue #20): the quiet console,
which task lines show, the rerun budget, the simulated history's events and landings,
and the discovery commands. The demos themselves run end to end in
benchmarks/demo_time.py (minutes: not a test)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from pipelines.config.lake import Lake
from pipelines.orchestration import demo_history as history
from pipelines.orchestration.demo import hidden_tasks

REPO = Path(__file__).resolve().parent.parent


CONSOLE_SCRIPT = """
import os, sys
from pipelines.orchestration.console import Console
with Console(sys.argv[1], verbose=sys.argv[2] == "1") as out:
    print("an Airflow log line", flush=True)
    os.system("echo a child process line >&2")
    out.say("[1/2] run_cpu ok")
print("after")
"""


def console_run(log: Path, verbose: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, str(log), "1" if verbose else "0"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


def test_quiet_console_sends_output_to_the_log_and_says_steps_on_the_terminal(tmp_path):
    log = tmp_path / "logs" / "demo.log"
    proc = console_run(log, verbose=False)
    assert (proc.stdout, proc.stderr) == ("[1/2] run_cpu ok\nafter\n", "")
    text = log.read_text()
    assert "an Airflow log line" in text and "a child process line" in text and "[1/2] run_cpu ok" in text


def test_verbose_console_leaves_the_output_on_the_terminal(tmp_path):
    proc = console_run(tmp_path / "demo.log", verbose=True)
    assert proc.stdout == "an Airflow log line\n[1/2] run_cpu ok\nafter\n"
    assert proc.stderr == "a child process line\n" and not (tmp_path / "demo.log").exists()


def test_tasks_of_pools_outside_the_run_get_no_line():
    ids = ["run_info", "plan_cpu", "run_cpu", "plan_sim_h100", "run_sim_h100", "plan_rerun_sim_h100",
           "rerun_sim_h100", "mine"]
    assert hidden_tasks(ids, ["cpu", "sim-h100"], ["cpu"]) == {"plan_sim_h100", "run_sim_h100",
                                                                "plan_rerun_sim_h100", "rerun_sim_h100"}


def test_a_confirmation_rerun_gets_three_times_its_suites_budget():
    from kernels_bench.suite import load_suite
    from pipelines.orchestration.tasks import plan

    suite = load_suite("gemm-demo")
    info = {"dt": "2026-11-24", "run_id": "2026-11-24-abcd1234", "pools": ["cpu"], "suites": ["gemm-demo"],
            "kernel": None, "stopping": None, "inject": None, "reason": "nightly"}
    (shard,) = plan(info, "cpu", {"unstable": {"cpu": [suite.cases[0].case.case_id]}})
    assert shard["stopping"]["timeout_s"] == 3 * suite.stopping.timeout_s
    assert shard["stopping"]["min_samples"] == 3 * suite.stopping.min_samples
    assert shard["reason"] == "rerun" and shard["landing_shard"] == 0


def test_history_events_keep_their_order_at_any_length():
    for n in (8, 21, 42):
        ev = history.Events(n)
        assert 0 < ev.upgrade < ev.arrival < ev.driver < n - 1


def test_history_backfills_the_new_gpu_before_its_first_nightly_run():
    steps = history.plan(21, backfill=7)
    arrival = history.Events(21).arrival
    first_both = next(i for i, (_, pools, _) in enumerate(steps) if pools == ["sim-h100", "sim-h200"])
    backfills = [night for night, _, landings in steps[:first_both] if landings == [("sim-h200", "backfill")]]
    assert backfills == list(range(arrival - 7, arrival)) and steps[first_both][0] == arrival
    (missing_pool, missing_night), = history.Events(21).missing
    assert all((missing_pool, "nightly") not in landings for night, _, landings in steps if night == missing_night)


def test_a_simulated_night_lands_with_its_software_and_its_failures(tmp_path):
    lake = Lake.from_env(tmp_path / "lake")
    dates = history.nights(21)
    ev = history.Events(21)
    suite = history.history_suite()
    (pool, night), failing = next(iter(ev.failed_cases.items()))
    counts = history.land_night(lake, suite, pool, night, dates, "nightly", tmp_path / "staging")
    assert counts["case_results"] == len(suite.cases)
    (run,) = pq.read_table(next(lake.landing.glob("runs/**/*.parquet"))).to_pylist()
    assert run["device_kind"] == "simulated" and "(simulated)" in run["gpu_name"]
    assert (run["torch_version"], run["driver_version"]) == ("2.13.0", "570.86.10")  # after both changes
    assert run["status"] == "partial" and run["cases_ok"] == len(suite.cases) - failing
    results = pq.read_table(next(lake.landing.glob("case_results/**/*.parquet"))).to_pylist()
    failed = {r["case_id"] for r in results if r["status"] == "failed"}
    assert len(failed) == failing and all("simulated failure" in r["error"] for r in results if r["case_id"] in failed)
    samples = pq.read_table(next(lake.landing.glob("samples/**/*.parquet")), columns=["case_id"])
    assert failed.isdisjoint(samples.column("case_id").to_pylist())


def test_kernels_bench_list_names_every_suite_with_its_case_count():
    proc = subprocess.run([sys.executable, "-m", "kernels_bench", "list"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    suites = sorted(p.stem for p in (REPO / "kernels_bench" / "suites").glob("*.yaml"))
    assert [line.split()[0] for line in lines[:-1]] == suites
    assert any(line.startswith("gemm-demo") and " 6 cases " in line for line in lines)


def test_info_on_an_empty_lake_says_how_to_fill_it(tmp_path, capsys, monkeypatch):
    from pipelines.cli import main

    monkeypatch.setenv("PERFLAKE_HOME", str(tmp_path))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "nothing published yet" in out and "make demo-history" in out and "sim-h200" in out
    assert "services: not set up on this lake (make up" in out
