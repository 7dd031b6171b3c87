"""The benchmarks under benchmarks/ still run and still measure what their notes say.

Each runs as a script, as its notes' commands do, at a toy size: these tests check the
scripts' logic and the agreement they report, not the figures (those live in the notes).
"""
import json
import subprocess
import sys
from pathlib import Path

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


def test_changepoint_evaluation_scores_tcpd_and_simulated_histories(tmp_path):
    from pipelines.changepoint import covering, detect, f1_score

    changepoint_eval = _changepoint_eval()
    if not (changepoint_eval.TCPD_DIR / "annotations.json").exists():
        pytest.skip(f"no TCPD series at {changepoint_eval.TCPD_DIR}")
    stdout = _run(["benchmarks/changepoint_eval.py", "--series", "30", "--online", "3"], tmp_path, timeout=600)
    for kind in changepoint_eval.NOISE_KINDS:  # a false-alarm row and a recall row each
        assert sum(line.startswith(kind) for line in stdout.splitlines()) == 2, kind
    data = changepoint_eval.load_tcpd()
    f1 = sum(f1_score(ann, [c.index for c in detect(x)]) for _, x, ann in data) / len(data)
    cover = sum(covering(ann, [c.index for c in detect(x)], len(x)) for _, x, ann in data) / len(data)
    # The script's table reports the same mean F1 and cover as scoring the detector directly.
    assert f"{f1:.3f}" in stdout and f"{cover:.3f}" in stdout


def test_a_nightly_alarm_first_seen_provisional_counts_once_and_as_confirmed():
    import numpy as np

    changepoint_eval = _changepoint_eval()

    x = 1.0 + 0.005 * np.random.default_rng(0).standard_normal(changepoint_eval.NIGHTS)
    x[40:] += 0.10  # provisional the night it lands, confirmed a few nights later
    counts = changepoint_eval._count_alarms(x[None, :], 1)
    nights = changepoint_eval.NIGHTS - changepoint_eval.FIRST_ONLINE_NIGHT + 1
    assert counts["online_confirmed"] == pytest.approx(1000.0 / nights)
    assert counts["online_provisional"] == 0.0


def test_changepoint_hold_option_reports_a_share_per_night(tmp_path):
    out = _run(["benchmarks/changepoint_eval.py", "--hold", "--series", "6"], tmp_path, timeout=300)
    rows = {ln.split()[0]: [float(v) for v in ln.split()[1:]] for ln in out.splitlines()
            if ln.split() and ln.split()[0] in ("gaussian", "student_t3", "bimodal", "ar1_0.5")}
    assert len(rows) == 4 and all(len(v) == 16 and all(0.0 <= f <= 1.0 for f in v) for v in rows.values())


def test_changepoint_oracle_and_stage5_sensitivity_options_run(tmp_path):
    oracle = _run(["benchmarks/changepoint_eval.py", "--oracle"], tmp_path, timeout=300)
    power = {(float(ln.split()[4]), ln.split()[6]): float(ln.split()[-1]) for ln in oracle.splitlines()
             if ln.strip().startswith("false alarms per test")}
    assert len(power) == 9
    assert power[(0.024, "6")] > 0.99  # a 6-sigma step over 4 runs is plain to an oracle
    assert power[(0.001, "3")] < power[(0.024, "3")]  # a stricter threshold costs power
    if Path("/work/shared/eval/tcpd/annotations.json").exists():  # changepoint_eval.TCPD_DIR
        sens = _run(["benchmarks/changepoint_eval.py", "--sensitivity"], tmp_path, timeout=300)
        assert sum(ln.strip().startswith(("WINDOW", "WANDER_RATIO", "SEASONAL_ACF", "MAX_ZERO_SHARE"))
                   for ln in sens.splitlines()) == 20


def test_gpu_validation_logic_runs_on_cpu_and_says_do_bench_is_unavailable(tmp_path):
    out = tmp_path / "v.json"
    _run(["benchmarks/gpu_validation.py", "--smoke", "--device", "cpu", "--out", str(out)], tmp_path, timeout=600)
    report = json.loads(out.read_text())
    assert report["smoke"] and report["device"] == "cpu"
    assert report["provenance"]["harness_commit"]
    assert report["cases"] and all(c["status"] == "ok" and c["correct"] for c in report["cases"])
    assert all(c["do_bench"].startswith("unavailable") for c in report["cases"])
    assert all(c["harness_cold_median_ns"] > 0 and c["torch_benchmark_median_ns"] > 0 for c in report["cases"])
