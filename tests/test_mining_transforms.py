"""The mining transformations as pure functions on small DataFrames: cleaning, outlier
flags and robust statistics agree with numpy on the same numbers."""
from __future__ import annotations

import numpy as np
import pytest

from pipelines.mining.aggregate import sample_stats
from pipelines.mining.clean import clean_samples, latest_attempt
from pipelines.mining.outliers import flag_outliers
from test_changepoint import _ar1

COLS = ["run_id", "case_id", "attempt", "iteration", "latency_ns", "throttled"]


def frame(spark, rows):
    return spark.createDataFrame(rows, "run_id string, case_id string, attempt int, iteration int, "
                                       "latency_ns bigint, throttled boolean")


def test_clean_rejects_invalid_latencies_with_a_reason_and_keeps_one_copy_of_a_duplicate(spark):
    rows = [("r", "c", 1, 0, 100, False), ("r", "c", 1, 0, 100, False), ("r", "c", 1, 1, -5, False),
            ("r", "c", 1, 2, 0, False), ("r", "c", 1, 3, 110, False)]
    good, bad = clean_samples(frame(spark, rows))
    assert sorted(r.iteration for r in good.collect()) == [0, 3]
    assert sorted(r.reason for r in bad.collect()) == ["latency_ns is not positive: -5",
                                                       "latency_ns is not positive: 0"]


def test_only_the_latest_attempt_of_a_case_is_kept(spark):
    rows = [("r", "c", 1, 0, 100, False), ("r", "c", 2, 0, 120, False), ("r", "d", 1, 0, 90, False)]
    kept = latest_attempt(frame(spark, rows)).collect()
    assert sorted((r.case_id, r.attempt) for r in kept) == [("c", 2), ("d", 1)]


def test_a_case_measured_in_two_shards_of_one_run_keeps_one_shards_samples_whole(spark):
    """Found on the real H200 night: `memory` and `roofline` both hold a copy case, so one
    run measured it twice; the row-by-row deduplication mixed the two measurements."""
    from pipelines.mining.commit import one_shard_per_case

    key = "dt string, pool string, _run_dir string, _shard_file int"
    samples = spark.createDataFrame(
        [("r", "c", 1, i, 100 + i, False, "d", "p", "r", 3) for i in range(4)]
        + [("r", "c", 1, i, 200 + i, False, "d", "p", "r", 0) for i in range(3)]
        + [("r", "e", 1, 0, 50, False, "d", "p", "r", 3)],
        "run_id string, case_id string, attempt int, iteration int, latency_ns bigint, throttled boolean, " + key)
    results = spark.createDataFrame([("r", "c", 1, "d", "p", "r", 3), ("r", "c", 1, "d", "p", "r", 0),
                                     ("r", "e", 1, "d", "p", "r", 3)],
                                    "run_id string, case_id string, attempt int, " + key)
    results, samples, dropped = one_shard_per_case(results, samples)
    good, _ = clean_samples(samples.drop("dt", "pool", "_run_dir", "_shard_file"))
    assert sorted((r.case_id, r.latency_ns) for r in good.collect()) == [("c", 200), ("c", 201), ("c", 202), ("e", 50)]
    assert sorted((r.case_id, r._shard_file) for r in results.collect()) == [("c", 0), ("e", 3)]
    assert dropped == [("c", "p", 3)]
    assert one_shard_per_case(results, samples)[2] == []  # nothing repeated any more: the frames come back as they are


def test_a_far_sample_is_an_outlier_and_a_throttled_one_is_excluded_but_kept_as_a_row(spark):
    lat = [1000, 1010, 990, 1005, 995, 1002, 998, 5000]
    rows = [("r", "c", 1, i, v, False) for i, v in enumerate(lat)] + [("r", "c", 1, 99, 1003, True)]
    flagged = {r.iteration: r for r in flag_outliers(frame(spark, rows)).collect()}
    assert len(flagged) == 9  # nothing dropped
    assert [i for i, r in flagged.items() if r.outlier] == [7]
    assert not flagged[99].kept and not flagged[99].outlier  # throttled: excluded, not an outlier


def test_samples_on_a_timers_steps_are_not_outliers_of_a_zero_mad(spark):
    """CUDA events tick in about 0.5 us: 60 samples at 5120 ns and 40 at 5632 ns have a MAD
    of 0, and every sample off the median was flagged (IQR 0: 'stable'). The mean absolute
    deviation stands in for it; a spike stays an outlier."""
    lat = [5120] * 60 + [5632] * 40 + [50_000]
    rows = [("r", "c", 1, i, v, False) for i, v in enumerate(lat)]
    flagged = flag_outliers(frame(spark, rows))
    assert [r.iteration for r in flagged.where("outlier").collect()] == [100]
    s = sample_stats(flagged).collect()[0]
    assert s.n_kept == 100 and s.iqr_ns == pytest.approx(512.0)


def test_statistics_of_kept_samples_match_numpy(spark):
    rng = np.random.default_rng(3)
    lat = (1000 * np.exp(rng.normal(0, 0.05, 101))).astype(int)
    rows = [("r", "c", 1, i, int(v), False) for i, v in enumerate(lat)]
    s = sample_stats(flag_outliers(frame(spark, rows))).collect()[0]
    kept = lat  # lognormal 5 %: no sample is 5 robust sigmas out
    assert s.n == s.n_kept == 101
    assert s.median_ns == pytest.approx(np.median(kept))
    assert s.p10_ns == pytest.approx(np.quantile(kept, 0.1))
    assert s.p90_ns == pytest.approx(np.quantile(kept, 0.9))
    assert s.iqr_ns == pytest.approx(np.quantile(kept, 0.75) - np.quantile(kept, 0.25))
    assert s.mean_ns == pytest.approx(kept.mean())
    assert s.median_ci_low_ns <= s.median_ns <= s.median_ci_high_ns


def test_outlier_flags_match_numpy_median_and_mad_per_case_and_attempt(spark):
    """Several cases and attempts, odd and even counts, throttled samples and spikes: the
    flags are exactly those of numpy's median and MAD of each group's unthrottled samples."""
    rng = np.random.default_rng(11)
    rows, expected = [], {}
    for case, attempt, n in (("a", 1, 40), ("a", 2, 41), ("b", 1, 7), ("c", 1, 2), ("d", 1, 3), ("q", 1, 30)):
        lat = (1000 * np.exp(rng.normal(0, 0.02, n))).astype(int)
        if case == "q":  # a timer's steps: the MAD is 0
            lat = np.where(rng.random(n) < 0.7, 5120, 5632)
        lat[rng.random(n) < 0.15] *= 3  # spikes
        throttled = rng.random(n) < 0.2
        basis = lat[~throttled].astype(float)
        med = np.median(basis) if len(basis) else np.nan
        mad = np.median(np.abs(basis - med)) if len(basis) else np.nan
        robust = mad * 1.4826 if mad > 0 else np.mean(np.abs(basis - med)) * np.sqrt(np.pi / 2)
        scale = max(robust, med * 1e-4)
        for i in range(n):
            out = bool(abs(lat[i] - med) > 5.0 * scale) if len(basis) else False
            expected[(case, attempt, i)] = out
            rows.append(("r", case, attempt, i, int(lat[i]), bool(throttled[i])))
    rows.append(("r", "e", 1, 0, 500, True))  # only throttled samples: no centre, never an outlier
    expected[("e", 1, 0)] = False
    got = {(r.case_id, r.attempt, r.iteration): r for r in flag_outliers(frame(spark, rows)).collect()}
    assert {k: r.outlier for k, r in got.items()} == expected
    assert all(r.kept == (not r.throttled and not r.outlier) for r in got.values())


def test_the_hardware_catalog_is_published_again_only_when_it_changed(spark, lake):
    # Every mine upserts kernels_bench's hardware catalog; rows the table already holds
    # would only write a new snapshot under the table's lock, so the mine asks first.
    from pyspark.sql import functions as F

    from jobs.mine import hardware_frame
    from pipelines.warehouse import catalog
    from schemas.tables import HARDWARE

    hardware = hardware_frame(spark)
    catalog.replace_by_key(spark, lake, hardware, HARDWARE)  # what the first mine of a lake does
    assert catalog.holds(spark, hardware, HARDWARE)
    sku = hardware.where(F.col("board_power_w").isNotNull()).first().sku
    hotter = hardware.withColumn("board_power_w", F.when(F.col("sku") == sku, F.col("board_power_w") + 1)
                                 .otherwise(F.col("board_power_w")))
    assert not catalog.holds(spark, hotter, HARDWARE)
    new_gpu = hardware.limit(1).withColumn("sku", F.lit("NEW-GPU-TEST"))
    assert not catalog.holds(spark, hardware.unionByName(new_gpu), HARDWARE)


def test_a_change_the_runs_cannot_tell_from_a_drift_is_a_gradual_regression():
    # One series' step of perf.regressions on 300 nights with a 1.25 % (1.25-sigma) step
    # at night 150: the detector reports it as gradual, and so does the row.
    import pandas as pd

    from pipelines.changepoint import DetectorParams
    from pipelines.mining import regressions

    rng = np.random.default_rng(3)
    latency = 1000.0 * (1 + 0.01 * rng.standard_normal(300))
    latency[150:] += 12.5
    nights = pd.date_range("2026-01-01", periods=300, freq="D", tz="UTC")
    points = pd.DataFrame({"run_id": [f"r{i:03d}" for i in range(300)], "started_at": nights,
                           "dt": nights.strftime("%Y-%m-%d"), "value": latency, "median_ns": latency,
                           "metric": "latency", "series_key": "k", **{c: "x" for c in regressions._DESCRIBE}})
    known = pd.DataFrame(columns=regressions._candidate_schema().names)
    rows = regressions._series_changes(points, known, now=pd.Timestamp("2026-11-27", tz="UTC"),
                                       params=DetectorParams())
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["detected_by"] == "gradual" and row["status"] == "confirmed" and row["direction"] == "regression"
    assert abs(int(row["change_run_id"][1:]) - 150) <= 3 and 0.8 < row["change_pct"] < 2.5


def test_the_detectors_significance_confirms_a_change_only_at_a_tenth_of_its_level():
    """The mine asks the detector every night: a change it reports at its level but not at
    CONFIRM_SHARE of it stays provisional (rerun, not in the digest) until its p-value
    gets there, and is cleared once WEAK_WAIT_RUNS runs are in without it. The runs here
    hold a level 5 % up that clears the floors but is not unusual (three slow nights among
    the 20 before went further), so `confirms` leaves it to the detector."""
    from pipelines.changepoint import DetectorParams, confirms
    from pipelines.mining import regressions
    from pipelines.mining.regressions import CONFIRM_SHARE, WEAK_WAIT_RUNS

    params = DetectorParams()
    rng = np.random.default_rng(11)

    def decide(after, status, seen):
        values = 1000.0 * (1 + 0.003 * rng.standard_normal(40 + after))
        values[[24, 31, 37]] *= 1.10
        values[40:] *= 1.05
        assert confirms(values, 40, params=params) is None
        return regressions._decide(values, 40, [], None, {"status": status}, params, seen=seen)[0]

    body, young = params.alpha, params.strict_alpha  # 8 runs in: the body's level; 3: the newest runs'
    assert decide(8, "provisional", ("significance", 0.5 * body)) == "provisional"
    assert decide(8, "provisional", ("gradual", 0.5 * body)) == "provisional"
    assert decide(8, "provisional", ("significance", 0.9 * CONFIRM_SHARE * body)) == "confirmed"
    assert decide(8, "provisional", ("gradual", 0.9 * CONFIRM_SHARE * body)) == "confirmed"
    assert decide(3, "provisional", ("significance", 0.9 * CONFIRM_SHARE * body)) == "provisional"
    assert decide(3, "provisional", ("significance", 0.9 * CONFIRM_SHARE * young)) == "confirmed"
    assert decide(8, "provisional", ("newest-runs", 1e-12)) == "provisional"  # a flag is not a test
    assert decide(8, "provisional", None) == "cleared"  # no longer reported, never unusual
    assert decide(WEAK_WAIT_RUNS - 1, "provisional", ("significance", 0.5 * body)) == "provisional"
    assert decide(WEAK_WAIT_RUNS, "provisional", ("significance", 0.5 * body)) == "cleared"
    assert decide(WEAK_WAIT_RUNS, "cleared", ("significance", 0.5 * body)) == "cleared"
    assert decide(WEAK_WAIT_RUNS, "cleared", ("significance", 0.9 * CONFIRM_SHARE * body)) == "confirmed"
    # First seen tonight: the same rule.
    values = 1000.0 * (1 + 0.003 * rng.standard_normal(48))
    values[[24, 31, 37]] *= 1.10
    values[40:] *= 1.05
    assert regressions._decide(values, 40, [], object(), None, params, seen=("significance", 0.5 * body))[0] \
        == "provisional"


def nightly_points(latency):
    """One series' run-level points, one run a night, as the mine reads them."""
    import pandas as pd

    from pipelines.mining import regressions

    nights = pd.date_range("2026-01-01", periods=len(latency), freq="D", tz="UTC")
    return pd.DataFrame({"run_id": [f"r{i:03d}" for i in range(len(latency))], "started_at": nights,
                         "dt": nights.strftime("%Y-%m-%d"), "value": latency, "median_ns": latency,
                         "metric": "latency", "series_key": "k", **{c: "x" for c in regressions._DESCRIBE}})


def mined_nightly(latency, first: int = 20) -> list[list[tuple[str, str]]]:
    """One series' (change run, status) pairs, mined night after night as the nightly mine
    does (each night's rows carried into the next), from night `first` on."""
    import pandas as pd

    from pipelines.changepoint import DetectorParams
    from pipelines.mining import regressions

    points = nightly_points(latency)
    known, seen = pd.DataFrame(columns=regressions._candidate_schema().names), []
    for night in range(first, len(latency) + 1):
        known = regressions._series_changes(points.iloc[:night], known, now=pd.Timestamp("2026-11-27", tz="UTC"),
                                            params=DetectorParams())
        seen.append(sorted((r.change_run_id, r.status) for r in known.itertuples()))
    return seen


def test_two_slow_nights_confirmed_by_the_next_are_cleared_once_the_level_is_back_and_a_lasting_step_is_not():
    """Two 10-sigma slow nights, agreed by each other (beyond anything the history did),
    are confirmed, and stayed confirmed for good, re-measured at 0.2 %: now cleared once
    the level is back. A lasting step of the same size in the same noise stays confirmed."""
    rng = np.random.default_rng(5)
    quiet = 1000.0 * (1 + 0.003 * rng.standard_normal(34))
    blip, step = quiet.copy(), quiet.copy()
    blip[22:24] *= 1.03
    step[22:] *= 1.03
    seen = mined_nightly(blip)
    assert [("r022", "provisional")] in seen and [("r022", "confirmed")] in seen  # flagged, then agreed
    assert seen[-1] == [("r022", "cleared")]
    assert all(s == [("r022", "confirmed")] for s in mined_nightly(step)[4:])


def test_a_cleared_change_is_opened_again_only_by_a_report_that_would_confirm_it(monkeypatch):
    """A cleared change stays cleared (not re-opened, so not rerun every night) while the
    detector reports it at its level but not at CONFIRM_SHARE of it, and is confirmed the
    night it reports it at a tenth. The detector's report is set here, on the real
    mined history, since no short series holds a p-value in that band night after night."""
    import dataclasses

    import pandas as pd

    from pipelines.changepoint import DetectorParams, measure_at
    from pipelines.mining import regressions
    from pipelines.mining.regressions import CONFIRM_SHARE

    rng = np.random.default_rng(5)
    blip = 1000.0 * (1 + 0.003 * rng.standard_normal(34))
    blip[22:24] *= 1.03
    points, params, now = nightly_points(blip), DetectorParams(), pd.Timestamp("2026-11-27", tz="UTC")
    known = pd.DataFrame(columns=regressions._candidate_schema().names)
    for night in range(20, len(blip) + 1):  # as in the test above: confirmed, then cleared
        known = regressions._series_changes(points.iloc[:night], known, now=now, params=params)
    assert list(known["status"]) == ["cleared"]

    step = dataclasses.replace(measure_at(blip, 22, changes=[], params=params), provisional=False, gradual=False)
    for p, status in ((0.5 * params.alpha, "cleared"), (0.5 * CONFIRM_SHARE * params.alpha, "confirmed")):
        monkeypatch.setattr(regressions, "detect", lambda values, params, p=p: [dataclasses.replace(step, p_value=p)])
        night = regressions._series_changes(points, known, now=now, params=params)
        assert list(zip(night["change_run_id"], night["status"])) == [("r022", status)]
        if status == "cleared":  # kept as it was, not measured again
            assert night.drop(columns="is_new").to_dict("records") == known.drop(columns="is_new").to_dict("records")


def test_a_wander_the_detector_cut_is_confirmed_only_if_it_holds_at_the_noise_autocorrelation_of_its_peers():
    """Quiet AR(1) 0.5 noise, 38 runs: the detector cuts a wander at run 19 and, about the
    cut, reads the noise's autocorrelation as 0.10 (about no cut: 0.63), so its p-value
    (2e-5) passes a tenth of its level. At the autocorrelation its peers measure (0.5)
    the step is not significant (p 0.002): the change stays provisional. A lasting 5 %
    step in the same noise is confirmed either way."""
    import pandas as pd

    from pipelines.changepoint import DetectorParams
    from pipelines.mining import regressions

    def mined(latency, peer_rho=None):
        points = nightly_points(latency)
        if peer_rho is not None:
            points["peer_rho"] = peer_rho
        rows = regressions._series_changes(points, pd.DataFrame(columns=regressions._candidate_schema().names),
                                           now=pd.Timestamp("2026-11-27", tz="UTC"), params=DetectorParams())
        return sorted(zip(rows["change_run_id"], rows["status"]))

    wander = 1000.0 * _ar1(38, seed=205)
    assert mined(wander) == [("r019", "confirmed")]
    assert mined(wander, peer_rho=0.5) == [("r019", "provisional")]
    assert mined(wander, peer_rho=float("nan")) == [("r019", "confirmed")]  # no peers: as before

    step = 1000.0 * _ar1(40, seed=0)
    step[20:] *= 1.05
    assert mined(step) == mined(step, peer_rho=0.5) == [("r020", "confirmed")]


def test_a_groups_noise_autocorrelation_is_read_off_the_differences_which_a_common_step_does_not_move():
    """group_rho: 30 series of 40 runs of AR(1) 0.5 noise read about 0.5, and about the
    same with a 3-sigma step in every one of them (a new driver on the pool), where the
    runs' own autocorrelation (noise_rho about no change) reads the step as a wander;
    independent noise reads near 0 either way. Fewer than PEERS long series: none."""
    from pipelines.changepoint.noise import noise_rho
    from pipelines.mining.regressions import PEER_RUNS, PEERS, group_rho

    rng = np.random.default_rng(4)
    step = 3.0 * (np.arange(40) >= 20)
    ar1 = [_ar1(40, sigma=1.0, seed=seed) - 1.0 for seed in range(30)]
    independent = [rng.standard_normal(40) for _ in range(30)]
    assert 0.35 < group_rho(ar1) < 0.65
    assert 0.35 < group_rho([x + step for x in ar1]) < 0.65
    assert np.median([noise_rho(x + step, []) for x in ar1]) > 0.75
    assert group_rho(independent) < 0.15 and group_rho([x + step for x in independent]) < 0.2
    assert np.median([noise_rho(x + step, []) for x in independent]) > 0.6
    assert group_rho(ar1[:PEERS - 1] + [x[:PEER_RUNS - 1] for x in ar1[PEERS - 1:]]) is None


def test_each_series_gets_the_noise_autocorrelation_of_its_group(spark):
    """peer_rho: per group (pool, SKU, device, family, metric), `group_rho` of its series,
    given to each of them (a short one too); a group of fewer than PEERS long series gets none."""
    import datetime

    from pipelines.mining import regressions
    from pipelines.mining.regressions import PEER_RUNS, PEERS

    runs = {f"a{k}": PEER_RUNS + 6 for k in range(PEERS)} | {"as": PEER_RUNS - 1}
    runs |= {f"b{k}": PEER_RUNS + 6 for k in range(PEERS - 1)}
    rows, group_a = [], []
    for seed, (key, n) in enumerate(runs.items()):
        values = 1000.0 * _ar1(n, seed=seed)
        if key.startswith("a"):
            group_a.append(values)
        start = datetime.datetime(2026, 1, 1)
        rows += [(key, "latency", "p", "H100", "gpu", key[0], f"r{i:02d}", start + datetime.timedelta(days=i),
                  float(v)) for i, v in enumerate(values)]
    points = spark.createDataFrame(rows, "series_key string, metric string, pool string, gpu_sku string, "
                                         "device_kind string, family string, run_id string, started_at timestamp, "
                                         "value double")
    got = {r.series_key: r.peer_rho for r in regressions.peer_rho(points).collect()}
    assert set(got) == {*(f"a{k}" for k in range(PEERS)), "as"}
    assert all(v == pytest.approx(regressions.group_rho(group_a)) for v in got.values())


def test_slow_nights_at_a_series_own_second_mode_are_flagged_never_confirmed_and_real_steps_are():
    """A two-mode series (a fifth of its nights 3 % slow, as a second clock mode) had two
    or three slow nights in a row confirmed as a regression: each cleared the 2 % and
    2-sigma floors. Runs are now confirmed where they are unusual against the series' own
    recent runs: slow nights at its second mode are flagged (a rerun) and never confirmed;
    a 10 % step is confirmed by its second run, and a 3 % step, which its first runs cannot
    tell from the second mode, within its first 8 runs."""
    rng = np.random.default_rng(11)
    slow = rng.random(70) < 0.2
    slow[[40, 41, 55, 56, 57]] = True  # two and three slow nights in a row
    slow[[39, 42, 54, 58]] = False
    quiet = 1000.0 * (1 + 0.005 * rng.standard_normal(70) + 0.03 * slow)
    seen = mined_nightly(quiet)
    flagged = {run for night in seen for run, status in night}
    assert {"r040", "r055"} <= flagged  # each was asked about (rerun) ...
    assert not any(status == "confirmed" for night in seen for _, status in night)  # ... and none confirmed
    for size, runs in ((0.10, 2), (0.03, 8)):
        step = quiet.copy()
        step[62:] += 1000.0 * size
        night = mined_nightly(step, first=62 + runs)[0]  # the night of the step's runs-th run
        assert any(status == "confirmed" and abs(int(run[1:]) - 62) <= 1 for run, status in night), (size, night)


def test_a_flag_whose_rerun_goes_the_other_way_is_cleared_with_it_not_confirmed_from_it():
    """A slow run flagged, then a fast rerun flagged the other way: the rerun ended the
    first change's level, so the first stayed provisional, and the rerun's change was
    measured against the one slow run before it and confirmed (heavy-tailed noise,
    found in benchmarks/changepoint_lifecycle.py). Both are cleared now."""
    rng = np.random.default_rng(2)
    x = 1000.0 * (1 + 0.01 * rng.standard_normal(30))
    x[23], x[24], x[25] = 970.0, 1046.0, 998.0
    seen = mined_nightly(x, first=24)
    assert seen[0] == [("r023", "provisional")] and ("r024", "provisional") in seen[1]
    assert not any(status == "confirmed" for night in seen for _, status in night), seen
    assert seen[-1] == [("r023", "cleared"), ("r024", "cleared")]


def test_a_gradual_changes_cause_says_it_is_not_tied_to_one_run(spark):
    from pipelines.mining.attribution import ATTRIBUTES, GRADUAL, with_attribution

    names = [c for c, _ in ATTRIBUTES]
    context = spark.createDataFrame(
        [("a", *(["x"] * len(names)), {}), ("b", *(["x"] * 4), "2.13.0", *(["x"] * (len(names) - 5)), {})],
        ", ".join(["run_id string", *(f"{c} string" for c in names), "env map<string,string>"]))
    changes = spark.createDataFrame([("s", "a", "b", "significance"), ("g", "a", "b", "gradual")],
                                    "series_key string, last_good_run_id string, change_run_id string, "
                                    "detected_by string")
    cause = {r.series_key: r.cause for r in with_attribution(changes, context).collect()}
    assert cause == {"s": "torch x -> 2.13.0", "g": GRADUAL + "torch x -> 2.13.0"}


def test_the_rerun_plan_takes_every_open_flag_the_sweep_measured_again(spark):
    """A flag waits for up to 5 runs to be confirmed or cleared; the sweep reruns a case
    with an open flag whenever it measures it, not only on the flag's first night."""
    from pipelines.mining.regressions import provisional_cases

    regressions = spark.createDataFrame([
        ("p", "fresh", "r9", "provisional"), ("p", "waiting", "r7", "provisional"),
        ("p", "not-measured", "r7", "provisional"), ("p", "settled", "r9", "confirmed"),
        ("q", "waiting", "r8", "provisional")], "pool string, case_id string, change_run_id string, status string")
    measured = spark.createDataFrame([("p", "fresh"), ("p", "waiting"), ("p", "settled"), ("q", "other")],
                                     "pool string, case_id string")
    assert provisional_cases(regressions, measured) == {"p": ["fresh", "waiting"]}
