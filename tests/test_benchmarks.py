"""The benchmarks under benchmarks/ still run and still measure what their notes say.

Each runs as a script, as its notes' commands do, at a toy size: these tests check the
scripts' logic and the agreement they report, not the figures (those live in the notes).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(args, tmp_path, timeout):
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


@pytest.mark.slow  # starts its own Spark process (JVM start-up, ~20 s)
def test_scale_benchmark_engines_agree_on_every_case_median(tmp_path):
    out = tmp_path / "scale.json"
    _run(["benchmarks/scale_mining.py", "--sizes", "1.5e5", "--work", str(tmp_path / "work"), "--out", str(out),
          "--driver-memory", "512m"], tmp_path, timeout=600)
    [row] = json.loads(out.read_text())
    assert row["samples"] >= 150_000 and row["cases"] == 78
    for engine in ("duckdb", "pandas"):
        assert row[engine]["groups_match"], engine
        assert row[engine]["max_rel_median_diff_vs_spark"] == 0.0, engine
    jvm = row["spark-core"]["jvm"]
    assert jvm["heap_max_gib"] == pytest.approx(0.5, abs=0.05)  # --driver-memory reached the JVM
    assert 0 < jvm["heap_peak_gib"]


def _changepoint_eval():
    """benchmarks/changepoint_eval.py as a module (benchmarks/ is not a package)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import changepoint_eval
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return changepoint_eval


def _tcpd_dir_or_skip(changepoint_eval) -> Path:
    """The TCPD directory the script reads; skip where it is absent, but fail in CI
    (CI=true), where a missing data set must not pass as a skipped test."""
    root = changepoint_eval.tcpd_dir()
    if not (root / "annotations.json").exists():
        message = (f"no TCPD series at {root}: set PERFLAKE_TCPD_DIR, or put them in shared/eval/tcpd "
                   "beside the checkout")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return root


def test_tcpd_directory_is_found_beside_the_checkout_or_through_the_environment(monkeypatch, tmp_path):
    changepoint_eval = _changepoint_eval()
    monkeypatch.delenv("PERFLAKE_TCPD_DIR", raising=False)
    assert changepoint_eval.tcpd_dir() == REPO.parent / "shared" / "eval" / "tcpd"
    monkeypatch.setenv("PERFLAKE_TCPD_DIR", str(tmp_path))
    assert changepoint_eval.tcpd_dir() == tmp_path


def test_no_machine_path_in_the_changepoint_evaluation():
    machine_path = re.compile(r"""["' ](/(work|home|root|tmp|Users)/)""")
    for path in ("benchmarks/changepoint_eval.py", "benchmarks/changepoint_nightly.py",
                 "benchmarks/changepoint_otava.py", "benchmarks/changepoint_matched.py",
                 "benchmarks/changepoint_oracle.py", "benchmarks/changepoint_knowledge.py", "tests/test_benchmarks.py",
                 "benchmarks/NOTES-changepoint.md", "docs/regressions.md"):
        assert not machine_path.search((REPO / path).read_text()), path


@pytest.mark.slow  # scores TCPD and wide histories (~80 s on 2 cores): the end-to-end tier
def test_changepoint_evaluation_scores_tcpd_and_wide_histories(tmp_path):
    from pipelines.changepoint import covering, detect, f1_score

    changepoint_eval = _changepoint_eval()
    _tcpd_dir_or_skip(changepoint_eval)
    stdout = _run(["benchmarks/changepoint_eval.py", "--series", "6", "--per-series"], tmp_path, timeout=600)
    # one row of recall and false alarms for the detector per seed, development and held-out
    wide_rows = [ln for ln in stdout.splitlines() if ln.startswith("perflake detect ") and "(defaults)" not in ln]
    assert len(wide_rows) == 2
    assert f"held-out seed {changepoint_eval.HELDOUT_SEED}" in stdout
    # The table's mean F1 and cover are the means of the series' own lines ...
    per_series = {m["name"]: m for m in (re.match(
        r"\s+(?P<name>\S+)\s+F1 (?P<f1>[\d.]+) \(zero [\d.]+\)\s+cover (?P<cover>[\d.]+) \(zero [\d.]+\)"
        r"\s+cps (?P<cps>\[.*\])$", ln) for ln in stdout.splitlines()) if m}
    data = changepoint_eval.load_tcpd()
    assert set(per_series) == {name for name, _, _ in data}
    (table_row,) = [ln.split() for ln in stdout.splitlines() if ln.startswith("perflake detect (defaults)")]
    assert [float(v) for v in table_row[-2:]] == pytest.approx(
        [np.mean([float(m[k]) for m in per_series.values()]) for k in ("f1", "cover")], abs=0.002)
    # ... and each line is what scoring the detector directly gives (the five shortest
    # series: detecting on all 26 takes a minute, which the script has just spent).
    for name, x, ann in sorted(data, key=lambda d: len(d[1]))[:5]:
        found = [c.index for c in detect(x)]
        assert per_series[name]["cps"] == str(found), name
        assert float(per_series[name]["f1"]) == pytest.approx(f1_score(ann, found), abs=0.0005), name
        assert float(per_series[name]["cover"]) == pytest.approx(covering(ann, found, len(x)), abs=0.0005), name


@pytest.mark.slow  # a nightly evaluation run (~10 s): the end-to-end tier
def test_changepoint_nightly_evaluation_reports_each_noise_kind(tmp_path):
    changepoint_eval = _changepoint_eval()
    stdout = _run(["benchmarks/changepoint_eval.py", "--nightly", "--no-tcpd", "--series", "20", "--online", "2"],
                  tmp_path, timeout=600)
    for kind in changepoint_eval.NOISE_KINDS:  # a false-alarm row and a recall row each
        assert sum(line.startswith(kind) for line in stdout.splitlines()) == 2, kind


def test_wide_histories_score_a_found_change_a_missed_one_and_a_false_alarm():
    changepoint_eval = _changepoint_eval()
    x = np.ones(100)
    quiet = {"family": "gaussian", "label": "g", "x": x, "changes": []}
    stepped = {"family": "ar1", "label": "a", "x": x, "changes": [(40, 0.05, 5.0), (80, 0.01, 1.0)]}
    # 42 finds the step at 40 (within 3 nights); 60 and 10 match nothing: 10 is a confirmed false alarm
    score = changepoint_eval.score_wide([quiet, stepped], [[(10, True)], [(42, False), (60, False)]])
    assert score["all"] == (0.5, 2) and score["headline"] == (1.0, 1)
    assert score["family"]["ar1"] == (0.5, 2) and score["confirmed_all"] == 0.0
    assert score["fa_quiet"] == pytest.approx(10.0) and score["fa_all"] == pytest.approx(5.0)


def test_recall_intervals_pair_two_methods_on_the_same_histories():
    _changepoint_eval()  # puts benchmarks/ on the path of its helper modules
    from changepoint_wide import recall_intervals, score_wide

    # 40 histories of one step each; method a finds every step, method b every other one
    histories = [{"family": "gaussian" if i % 4 else "ar1", "label": "", "x": np.ones(60),
                  "changes": [(30, 0.05, 5.0)]} for i in range(40)]
    a = score_wide(histories, [[(30, True)] for _ in histories])
    b = score_wide(histories, [[(30, True)] if i % 2 else [] for i in range(len(histories))])
    assert recall_intervals(a)["all"] == (1.0, 1.0, 1.0)
    assert recall_intervals(a, a)["all"] == (0.0, 0.0, 0.0)  # paired: no spread between equals
    est, lo, hi = recall_intervals(b)["all"]
    assert est == 0.5 and 0.3 < lo < 0.5 < hi < 0.7  # about 0.5 +- 1.96 sqrt(0.25 / 40)
    est, lo, hi = recall_intervals(a, b)["ar1"]  # histories 0, 4, 8, ...: b finds none of them
    assert (est, lo, hi) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="different histories"):
        recall_intervals(a, score_wide(histories[:10], [[] for _ in range(10)]))


def test_false_alarm_interval_resamples_the_change_free_histories():
    _changepoint_eval()
    from changepoint_wide import false_alarm_interval, score_wide

    # 100 change-free histories of 100 nights; 5 of them raise 2 false alarms each: 1 per 1,000 nights
    quiet = [{"family": "gaussian", "label": "", "x": np.ones(100), "changes": []} for _ in range(100)]
    score = score_wide(quiet, [[(20, True), (70, True)] if i % 20 == 0 else [(50, False)] for i in range(100)])
    rate, lo, hi = false_alarm_interval(score)
    assert rate == pytest.approx(1.0) and 0.1 < lo < 1.0 < hi < 2.5
    assert false_alarm_interval(score_wide(quiet, [[] for _ in quiet])) == (0.0, 0.0, 0.0)


def test_a_nightly_alarm_first_seen_provisional_counts_once_and_as_confirmed():
    _changepoint_eval()  # puts benchmarks/ on the path of its helper modules
    import changepoint_nightly as nightly

    x = 1.0 + 0.005 * np.random.default_rng(0).standard_normal(nightly.NIGHTS)
    x[40:] += 0.10  # provisional the night it lands, confirmed a few nights later
    counts = nightly._count_alarms(x[None, :], 1)
    nights = nightly.NIGHTS - nightly.FIRST_ONLINE_NIGHT + 1
    assert counts["online_confirmed"] == pytest.approx(1000.0 / nights)
    assert counts["online_provisional"] == 0.0
    # a 20-sigma step is a step, not a gradual change, night by night and over the whole history
    assert counts["online_steps"] == counts["online_confirmed"]
    assert counts["steps"] == pytest.approx(1000.0 / nightly.NIGHTS) and counts["gradual"] == 0.0


def test_changepoint_hold_option_reports_a_share_per_night(tmp_path):
    out = _run(["benchmarks/changepoint_eval.py", "--hold", "--series", "6"], tmp_path, timeout=300)
    rows = {ln.split()[0]: [float(v) for v in ln.split()[1:]] for ln in out.splitlines()
            if ln.split() and ln.split()[0] in ("gaussian", "student_t3", "bimodal", "ar1_0.5")}
    assert len(rows) == 4 and all(len(v) == 16 and all(0.0 <= f <= 1.0 for f in v) for v in rows.values())


def _row(method, level, recall, fa, family_recall, family_fa):
    return {"method": method, "level": level,
            "score": {"all": (recall, 10), "fa_quiet": fa, "family": {"ar1": (family_recall, 5)},
                      "fa_quiet_family": {"ar1": family_fa}}}


def test_matched_comparison_takes_the_best_setting_within_the_false_alarm_budget():
    _changepoint_eval()  # puts benchmarks/ on the path of its helper modules
    import changepoint_matched as matched

    rows = [_row("otava", 1e-3, 0.90, 6.0, 0.95, 20.0),  # the most recall, 12x over the budget
            _row("otava", 1e-5, 0.80, 0.4, 0.70, 1.2),
            _row("otava", 1e-8, 0.70, 0.1, 0.60, 0.3),
            _row("ours", 5e-3, 0.85, 0.5, 0.75, 0.5)]  # exactly at the budget counts as within
    assert matched.best_within(rows, "otava")["level"] == 1e-5
    assert matched.best_within(rows, "ours")["level"] == 5e-3
    # per family, the budget is judged on that family's change-free histories alone
    assert matched.best_within(rows, "otava", family="ar1")["level"] == 1e-8
    assert matched.best_within(rows, "otava", budget=0.05) is None


def test_matched_comparison_script_scores_each_level_of_the_detector(tmp_path):
    env = {**os.environ, "PERFLAKE_OTAVA_PYTHON": str(tmp_path / "no-otava")}  # the detector's rows alone
    proc = subprocess.run([sys.executable, "benchmarks/changepoint_matched.py", "--series", "3", "--procs", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    _changepoint_eval()
    import changepoint_matched as matched

    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("perflake detect ")]
    assert len(rows) == len(matched.DETECTOR_ALPHAS)
    assert "otava 0.8: no setting within the budget" in proc.stdout  # said, not left out


def test_changepoint_oracle_option_runs(tmp_path):
    oracle = _run(["benchmarks/changepoint_eval.py", "--oracle"], tmp_path, timeout=300)
    power = {(float(ln.split()[4]), ln.split()[6]): float(ln.split()[-1]) for ln in oracle.splitlines()
             if ln.strip().startswith("false alarms per test")}
    assert len(power) == 9
    assert power[(0.024, "6")] > 0.99  # a 6-sigma step over 4 runs is plain to an oracle
    assert power[(0.001, "3")] < power[(0.024, "3")]  # a stricter threshold costs power


@pytest.mark.slow  # 20 evaluations of the 4 shortest TCPD series: the end-to-end tier (all 26: minutes)
def test_changepoint_stage5_sensitivity_option_runs(tmp_path):
    _tcpd_dir_or_skip(_changepoint_eval())
    sens = _run(["benchmarks/changepoint_eval.py", "--sensitivity", "--series", "4"], tmp_path, timeout=600)
    assert sum(ln.strip().startswith(("WINDOW", "WANDER_RATIO", "SEASONAL_ACF", "MAX_ZERO_SHARE"))
               for ln in sens.splitlines()) == 20


@pytest.mark.slow  # measures on the CPU (~20 s): the end-to-end tier
def test_gpu_validation_logic_runs_on_cpu_and_says_do_bench_is_unavailable(tmp_path):
    out = tmp_path / "v.json"
    _run(["benchmarks/gpu_validation.py", "--smoke", "--device", "cpu", "--out", str(out)], tmp_path, timeout=600)
    report = json.loads(out.read_text())
    assert report["smoke"] and report["device"] == "cpu"
    assert report["provenance"]["harness_commit"]
    assert report["cases"] and all(c["status"] == "ok" and c["correct"] for c in report["cases"])
    assert all(c["do_bench"].startswith("unavailable") for c in report["cases"])
    assert all(c["harness_cold_median_ns"] > 0 and c["torch_benchmark_median_ns"] > 0 for c in report["cases"])


def test_the_wide_oracle_tests_a_step_on_the_prewhitened_runs():
    _changepoint_eval()  # puts benchmarks/ on the path of its helper modules
    import changepoint_oracle as oracle

    rng = np.random.default_rng(3)
    # without autocorrelation the prewhitened z is the difference of means in standard errors
    seg = rng.standard_normal(40)
    seg[25:] += 1.0
    assert oracle.prewhitened_z(seg, 0.0)[24] == pytest.approx(oracle.means_z(seg, 25, 0.0), rel=1e-9)
    # under AR(1) 0.8 the night of a 3-sigma step carries much of it: expected z (the
    # noise-free step) 7.2 prewhitened against 5.5 for the difference of means (the step
    # over its innovation width alone is 3 / 0.6 = 5); in a noisy draw largest at the step
    phi, n = 0.8, 120
    step = np.r_[np.zeros(60), np.full(60, 3.0)]
    assert oracle.prewhitened_z(step, phi)[59] == pytest.approx(7.21, abs=0.01)
    assert oracle.means_z(step, 60, phi) == pytest.approx(5.48, abs=0.01)
    x = np.empty(n)
    x[0] = rng.standard_normal()
    for t in range(1, n):
        x[t] = phi * x[t - 1] + np.sqrt(1 - phi * phi) * rng.standard_normal()
    x[60:] += 3.0
    z = oracle.prewhitened_z(x, phi)
    assert int(np.argmax(z)) + 1 == 60


def test_the_knowledge_benchmark_is_the_detector_untold_and_finds_more_told_everything(tmp_path):
    from pipelines.changepoint import detect

    _changepoint_eval()  # puts benchmarks/ on the path of its helper modules
    from changepoint_wide import DEV_SEED, score_wide, wide_histories

    out = _run(["benchmarks/changepoint_knowledge.py", "--series", "10"], tmp_path, timeout=300)
    steps = ("as is", "true noise", "true candidates", "no drift guard", "no measured floors")
    rows = {ln[:20].strip(): [float(v) for v in ln[20:].split()[:8]] for ln in out.splitlines() if ln[:20].strip() in steps}
    assert list(rows) == list(steps)
    histories = wide_histories(10, DEV_SEED)
    direct = score_wide(histories, [[(c.index, not c.provisional) for c in detect(h["x"])] for h in histories])
    assert rows["as is"][0] == pytest.approx(direct["all"][0], abs=5e-4)  # untold, it is the detector
    # told everything, more of the body's steps are found (0.821 -> 0.964 on these 40 histories)
    assert rows["no measured floors"][5] > rows["as is"][5] + 0.1


def test_bonferroni_over_positions_is_conservative_for_the_oracle_on_independent_runs():
    _changepoint_eval()  # puts benchmarks/ on the path of its helper modules
    import changepoint_oracle as oracle

    rows = oracle.null_sizes(draws=300, seed=1)
    assert len(rows) == 3 * 4 * len(oracle.ALPHAS)
    # an upper bound: on independent runs not past alpha (but for 2 binomial standard
    # errors of 300 draws), and well under it at 0.05
    independent = [(n, a, share) for n, phi, a, share in rows if phi == 0.0]
    assert all(share <= a + 2 * np.sqrt(a / 300) for _, a, share in independent)
    assert all(share < 0.6 * a for _, a, share in independent if a == 0.05)
