"""Specification of pipelines.changepoint: detection and the FDR over a family of series
(hand-computed scoring, FDR and A/B compare examples: test_changepoint_scoring.py)."""

import numpy as np
import pytest

from pipelines.changepoint import DetectorParams, confirms, detect, measure_at, select_significant
from pipelines.changepoint.detector import _sigma_floor_scale
from pipelines.changepoint.known import unusual


def _gaussian(n, sigma=0.01, seed=0):
    return 1.0 + sigma * np.random.default_rng(seed).standard_normal(n)


def _ar1(n, phi=0.5, sigma=0.01, seed=0):
    rng = np.random.default_rng(seed)
    e = np.empty(n)
    e[0] = rng.standard_normal()
    for t in range(1, n):
        e[t] = phi * e[t - 1] + np.sqrt(1 - phi**2) * rng.standard_normal()
    return 1.0 + sigma * e


def test_clean_5_percent_step_is_found_at_its_index_as_a_regression():
    x = _gaussian(60)
    x[30:] += 0.05
    changes = detect(x)
    assert len(changes) == 1
    c = changes[0]
    assert abs(c.index - 30) <= 1
    assert c.direction == "regression" and not c.provisional
    assert c.rel_change == pytest.approx(0.05, abs=0.01)
    assert c.p_value < 1e-3


def test_a_drop_in_a_higher_is_better_metric_is_a_regression():
    x = _gaussian(60)
    x[30:] -= 0.05
    (c,) = detect(x, params=DetectorParams(higher_is_worse=False))
    assert c.direction == "regression"


def test_a_single_outlier_is_not_a_change():
    x = _gaussian(60)
    x[25] = 1.5
    assert detect(x) == []


def test_change_free_ar1_series_of_200_points_gives_no_change():
    for seed in range(5):
        assert detect(_ar1(200, seed=seed)) == [], f"seed {seed}"


def test_a_shift_below_the_relative_floor_is_reported_only_once_well_measured():
    # A 1 % step is 10 sigma here: only the relative floor can stop it. Seen for 40 runs
    # either side it clears the measured floor (0.2 %) and is reported; seen for 2 runs
    # it is flagged for a rerun, not confirmed; a 0.15 % step (1.5 sigma, z about 7
    # between the two 40-run segments) is under the relative floor of both.
    x = _gaussian(80, sigma=0.001)
    x[40:] += 0.01
    (c,) = detect(x)
    assert c.index == 40 and not c.provisional
    off = DetectorParams(min_rel_change_measured=0.02, min_sigma_measured=2.0)
    assert detect(x, params=off) == []
    short = _gaussian(40, sigma=0.001, seed=1)
    short[38:] += 0.01
    assert [(c.index, c.provisional) for c in detect(short)] == [(38, True)]
    tiny = _gaussian(80, sigma=0.001, seed=2)
    tiny[40:] += 0.0015
    assert detect(tiny) == []
    tiny[40:] += 0.0015  # 0.3 %, 3 sigma: over the measured floors
    assert [(c.index, c.provisional) for c in detect(tiny)] == [(40, False)]


def test_a_long_established_step_under_two_sigma_between_segments_is_found():
    # 100 runs either side, noise 2 %: a 4 % step. Here its segment medians differ by
    # 1.86 sigma (under min_sigma 2.0, which the earlier detector required between them),
    # while the 10 runs either side differ by more than 2 sigma (the drift guard).
    # Medians of 100 runs are precise, so between them the floor is 1 sigma, not 2.
    x = _gaussian(200, sigma=0.02)
    x[100:] += 0.04
    (c,) = detect(x)
    assert c.index == 100 and not c.provisional and c.direction == "regression"
    assert 1.5 < c.sigmas < 2.0
    assert c.rel_change == pytest.approx(0.04, abs=0.01)
    assert c.p_value < 1e-3


def test_the_noise_units_floor_shrinks_only_for_precise_medians():
    assert _sigma_floor_scale(10, 4) == pytest.approx(1.0)  # the nightly case min_sigma is set for
    assert _sigma_floor_scale(3, 3) == pytest.approx(1.0)  # never above 1
    assert _sigma_floor_scale(20, 20) == pytest.approx(np.sqrt(0.1 / 0.35))
    assert _sigma_floor_scale(100, 100) == pytest.approx(0.5)  # at most halved


def test_a_history_with_several_steps_is_cut_at_each_of_them():
    # Six levels of 50 runs, 5 noise widths apart. Correcting each search split for the
    # autocorrelation seen around it (the other steps' residuals) once found none of them.
    for seed in range(5):
        x = 100 + np.repeat([0, 5, 10, 5, 0, 5], 50) + np.random.default_rng(seed).standard_normal(300)
        found = [c.index for c in detect(x)]
        assert len(found) == 5 and all(abs(i - t) <= 3 for i, t in zip(found, (50, 100, 150, 200, 250))), found


def test_noise_autocorrelation_is_measured_about_the_levels():
    from pipelines.changepoint.noise import noise_rho

    rng = np.random.default_rng(3)
    white = rng.standard_normal(2000)
    ar = np.empty(2000)
    ar[0] = white[0]
    for t in range(1, 2000):
        ar[t] = 0.5 * ar[t - 1] + np.sqrt(0.75) * white[t]
    steps = white + np.repeat([0.0, 5.0, 0.0, 5.0], 500)
    assert noise_rho(white, []) < 0.05
    assert 0.4 < noise_rho(ar, []) < 0.6  # rank lag-1 correlation of AR(1) 0.5: 0.48
    assert noise_rho(steps, [500, 1000, 1500]) < 0.05  # about the levels: white
    assert noise_rho(steps, []) > 0.7  # the steps read as autocorrelation if not cut


def test_a_slow_drift_is_not_cut_into_steps():
    # A 10 % drift over 200 runs (10 noise widths): no step, and at most one gradual
    # change, which spans the drift rather than a staircase of its pieces.
    gradual = 0
    for seed in range(5):
        x = np.linspace(1.0, 1.1, 200) + 0.01 * np.random.default_rng(seed).standard_normal(200)
        found = detect(x)
        assert all(c.gradual for c in found) and len(found) <= 1, f"seed {seed}: {found}"
        assert all(c.rel_change > 0.06 and c.direction == "regression" for c in found), f"seed {seed}"
        gradual += len(found)
    assert gradual >= 3  # 4 of 5 measured: the level did move by 10 %


def test_the_autocorrelation_correction_applies_to_the_strongest_splits_too():
    from pipelines.changepoint.ranks import corrected_p

    # A raw p far below 1e-16 used to overflow to z = inf and skip the correction (p = 0).
    # At rho 0.8 the variance factor is 9: z = 9.3 (p 1e-20) counts as z = 3.1.
    corrected = corrected_p(1e-20, rho=0.8, n_tests=1)
    assert 1e-3 < corrected < 3e-3
    assert corrected_p(1e-20, rho=0.0, n_tests=1) == pytest.approx(1e-20, rel=1e-6)


def test_a_step_in_the_last_point_is_provisional():
    x = _gaussian(60)
    x[-1] += 0.10
    (c,) = detect(x)
    assert c.index == 59 and c.provisional and c.direction == "regression"


def test_a_step_in_the_last_two_points_is_provisional():
    x = _gaussian(60)
    x[-2:] += 0.05
    (c,) = detect(x)
    assert c.index == 58 and c.provisional


def test_a_young_level_that_is_not_yet_significant_is_never_placed_after_its_start():
    # 8 runs, then a 10 % step seen for 3-7 runs: too short a history for the rank test,
    # and its newest runs must not be reported as a change of their own.
    for n in range(11, 16):
        x = _gaussian(n, sigma=0.005)
        x[8:] += 0.10
        assert [c.index for c in detect(x) if c.index != 8] == [], f"{n} runs"


def test_a_three_run_level_not_yet_significant_is_provisional_at_its_first_run():
    # 30 runs, then 3 runs 4 noise widths higher: too few for alpha (the rank test's
    # smallest p is 10/C(33, 3) = 0.002), and the last two alone began before their start.
    x = _gaussian(33)
    x[30:] += 0.04 + np.array([0.0, 0.01, -0.005])
    (c,) = detect(x)
    assert c.index == 30 and c.provisional and c.direction == "regression"
    assert detect(_gaussian(33)) == []


def _two_mode_history_then_down_step():
    rng = np.random.default_rng(3)
    before = 1.0 + 0.01 * rng.standard_normal(30)
    before[::5] += 0.04  # a slow mode on 20 % of nights, 4 noise widths up
    after = 0.96 + 0.01 * rng.standard_normal(4)  # a 4 % step down...
    after[1] += 0.04  # ...whose slow night lands back on the old level
    return np.concatenate([before, after])


def test_a_new_levels_slow_mode_night_does_not_push_the_change_late():
    from pipelines.changepoint.newest import mode_gap

    x = _two_mode_history_then_down_step()
    assert mode_gap(x[:30], 0.012) == pytest.approx(0.04, abs=0.005)
    assert mode_gap(_gaussian(30), 0.01) is None
    [c] = detect(x)
    assert c.index == 30 and c.provisional and c.direction == "improvement"


def test_the_search_places_a_step_at_its_run_even_when_the_runs_before_it_rank_high():
    from pipelines.changepoint.search import search

    # x[38] and x[39] happen to be the two highest runs of the old level: by ranks alone,
    # the split at 38 separates best (it was found there, and then pruned).
    x = _gaussian(46, sigma=0.005)
    x[40:] += 0.10
    assert search(x, DetectorParams()) == [40]


def test_a_step_is_reported_on_every_night_from_its_first():
    # Nights 5-10 after a step are the hand-off from the newest-runs test to the search
    # over the whole series: the young level stays reported (provisional) until the
    # search confirms it. It had vanished on nights 45-55, and on night 49 (9 runs at the
    # new level) the normal approximation to the rank test had cost a factor of 600.
    x = _gaussian(60, sigma=0.005)
    x[40:] += 0.10
    for t in range(41, 61):
        assert [c.index for c in detect(x[:t])] == [40], f"{t} runs"
    assert not detect(x[:50])[0].provisional


def test_a_four_run_level_whose_newest_run_is_back_at_the_old_level_is_still_reported():
    # A slow night (or one outlier) among the 4 runs of a young level must not hide it
    # (each run had to clear half the floor: nothing was reported). Where the run before
    # the level is itself a noise width up, the level may be placed there (seed 0).
    found = []
    for seed in range(5):
        x = _gaussian(24, seed=seed)
        x[20:] += 0.05 * np.array([1, 1, 1, 0])
        [c] = detect(x)
        assert c.index in (19, 20) and c.direction == "regression", f"seed {seed}"
        found.append(c.index)
    assert found.count(20) >= 4


@pytest.mark.parametrize("noise", [0.012, 0.025])
def test_a_noisy_run_before_a_two_run_level_does_not_move_the_change_early(noise):
    # [noise at half the floor or past the whole floor, old level, new, new]: the 2-run
    # level is reported, not the 4-run "level" that would spare the old-level run and
    # begin at the noisy one (Gaussian noise strays to neither side).
    for seed in range(5):
        x = _gaussian(22, seed=seed)
        x[18] += noise
        x[20:] += 0.05
        assert [c.index for c in detect(x)] == [20], f"seed {seed}"


def test_a_slow_night_just_before_a_step_up_does_not_pull_the_change_early():
    # Before a step towards the slow mode, the slow night just before it is the old
    # level's other mode: the 2-run level is placed at its first run, not at that night.
    placed = []
    for seed in range(8):
        x = _gaussian(32, seed=seed)
        x[:30:5] += 0.04  # a slow mode 4 noise widths up on 20 % of nights
        x[28:30] = [1.0, 1.04]  # the night before the step is a slow one
        x[30:] += 0.06
        placed += [c.index for c in detect(x)]
    assert placed.count(30) >= 6 and set(placed) <= {29, 30}, placed


def test_a_slow_night_among_a_new_levels_runs_does_not_push_a_step_down_late():
    # A two-mode history with one fast outlier (so `mode_gap` finds no clean second mode)
    # steps down at 30; the new level's slow night at 31 lands back above the old level.
    # The 4-run level sparing it is reported, not the last 2 runs (without this rule, 4
    # of 8 seeds were placed at 32).
    placed = []
    for seed in range(8):
        x = _gaussian(34, seed=seed)
        x[:30:4] += 0.04  # slow nights, 4 noise widths up
        x[13] -= 0.035  # one fast outlier
        x[30:] -= 0.04
        x[31] += 0.045
        placed += [c.index for c in detect(x)]
    assert placed.count(30) >= 6, placed


def test_a_slow_night_two_runs_before_a_step_up_does_not_pull_the_change_early():
    # [slow night, old level, new, new] before a step towards the slow mode: the slow
    # night is no first run of a 4-run level (the history strays on the step's side).
    # Preferring the 4-run level there placed all 8 at 28.
    placed = []
    for seed in range(8):
        x = _gaussian(32, seed=seed)
        x[:30:4] += 0.04
        x[28:30] = [1.04, 1.0]
        x[30:] += 0.05
        placed += [c.index for c in detect(x)]
    assert placed.count(30) >= 7, placed


@pytest.mark.parametrize("levels, runs", [((0, 4, 8, 12, 8, 4, 0), 30), ((0, 6, 2, 8, 3, 9, 1), 40)])
def test_tent_and_alternating_levels_are_cut_at_each_step(levels, runs):
    # No single split of the whole series is strong (the tent is symmetric), so plain
    # binary segmentation stopped early; the seeded sub-intervals find each step.
    for seed in range(3):
        x = 10.0 + np.repeat(levels, runs) + np.random.default_rng(seed).standard_normal(runs * len(levels))
        found = [c.index for c in detect(x)]
        assert len(found) == len(levels) - 1, f"seed {seed}: {found}"
        assert all(abs(f - runs * (i + 1)) <= 2 for i, f in enumerate(found)), f"seed {seed}: {found}"


def test_measure_at_re_measures_a_known_change_where_it_was_found():
    x = _gaussian(14, sigma=0.005)
    x[8:] += 0.10
    c = measure_at(x, 8)
    assert c.index == 8 and c.direction == "regression" and not c.provisional
    assert c.rel_change == pytest.approx(0.10, abs=0.01) and c.sigmas > 10
    assert measure_at(x, 0) is None


def test_confirms_waits_for_a_second_run_and_then_says_whether_it_agrees():
    x = _gaussian(10, sigma=0.005)
    x[9] += 0.10
    assert confirms(x, 9) is None  # the change run alone
    assert confirms(np.append(x, x[9]), 9) is True  # the next run (or a rerun) agrees
    assert confirms(np.append(x, 1.0), 9) is False  # it is back at the old level


def test_unusual_runs_are_a_calibrated_p_value_for_exchangeable_runs():
    """`unusual` is what confirms a flag of 3-5 runs at strict_alpha: for runs that are no
    change at all (exchangeable with the 20 before them) it must reach a level at most
    that often. Reading each run's share of the runs before as an independent uniform,
    and the side as given, passed 2-5 times too many (3 runs at 0.01: 2.3 %), and three
    slow nights of a two-mode series were confirmed as a regression."""
    rng = np.random.default_rng(3)
    for m in (3, 4, 5):
        ps = []
        for _ in range(10_000):
            x = rng.standard_normal(20 + m)
            level, new = float(np.median(x[10:20])), x[20:]
            one_side = abs(int(np.sum(np.sign(new - level)))) == m  # confirms asks only then
            ps.append(unusual(x[:20], level, new) if one_side else 1.0)
        ps = np.array(ps)
        assert np.mean(ps <= 0.01) <= 0.013 and np.mean(ps <= 0.05) <= 0.055, m
    # 3 runs beyond all 20 before: the least p there is for 3 runs, 2 / C(23, 3)
    assert unusual(np.zeros(20), 0.0, np.array([1.0, 2.0, 3.0])) == pytest.approx(2 / 1771)


def test_missing_runs_are_skipped_and_indices_refer_to_the_input():
    x = _gaussian(60)
    x[30:] += 0.05
    x[[5, 10]] = np.nan
    (c,) = detect(x)
    assert abs(c.index - 30) <= 1


def test_select_significant_keeps_only_changes_under_the_family_fdr():
    x = _gaussian(60)
    x[30:] += 0.05
    family = {"real": detect(x), "quiet": detect(_gaussian(60, seed=1))}
    kept = select_significant(family, q=0.05)
    assert len(kept["real"]) == 1 and kept["quiet"] == []


def test_detect_changes_cli_reads_a_csv_column_and_prints_the_change_indices(tmp_path, capsys):
    import json

    from pipelines.cli import main

    values = np.r_[_gaussian(40, seed=1), _gaussian(40, seed=2) + 0.10] * 1000  # a 10 % step at 40
    lines = ["night,median_ns"] + [f"{i},{v:.3f}" for i, v in enumerate(values)]
    lines[11] = "10,"  # a missing run stays a position in the output
    path = tmp_path / "history.csv"
    path.write_text("\n".join(lines) + "\n")
    assert main(["detect-changes", str(path), "--column", "median_ns"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changes"] == [40]
    assert out["details"][0]["rel_change"] == pytest.approx(0.10, abs=0.01)


def test_detect_changes_cli_takes_the_users_alpha(tmp_path, capsys):
    import json

    from pipelines.cli import main

    # a 1.2 % (1.2-sigma) step between 40-run levels: p 0.002 after the search correction,
    # found at the default alpha (0.005), not at a user's stricter 0.001
    values = np.r_[_gaussian(40, seed=30), _gaussian(40, seed=130) + 0.012] * 1000
    path = tmp_path / "history.csv"
    path.write_text("\n".join(["median_ns", *(f"{v:.4f}" for v in values)]) + "\n")
    assert main(["detect-changes", str(path), "--column", "median_ns", "--alpha", "0.001"]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == []
    assert main(["detect-changes", str(path), "--column", "median_ns"]) == 0
    (found,) = json.loads(capsys.readouterr().out)["changes"]
    assert abs(found - 40) <= 3
    with pytest.raises(SystemExit) as exit_:
        main(["detect-changes", str(path), "--column", "median_ns", "--alpha", "1.5"])
    assert exit_.value.code == 2
    assert "'1.5' is not a probability strictly between 0 and 1" in capsys.readouterr().err


def test_detect_changes_cli_names_the_file_line_and_value_of_bad_input(tmp_path, capsys):
    from pipelines.cli import main

    path = tmp_path / "history.csv"
    path.write_text("night,median_ns\n0,1.0\n1,\n2,NaN\n3,1.2ms\n4,1.1\n")
    assert main(["detect-changes", str(path), "--column", "median_ns"]) == 2
    err = capsys.readouterr().err
    assert f"{path}, row 4 (line 5), column 'median_ns': '1.2ms' is not a finite number" in err
    path.write_text("night,median_ns\n0,1.0\n1,inf\n2,1.1\n")  # a broken timer, not a run
    assert main(["detect-changes", str(path), "--column", "median_ns"]) == 2
    assert "row 2 (line 3), column 'median_ns': 'inf' is not a finite number" in capsys.readouterr().err
    assert main(["detect-changes", str(path), "--column", "latency"]) == 2
    assert "no column 'latency' (columns: night, median_ns)" in capsys.readouterr().err


@pytest.mark.parametrize("given, says", [("folder", "Is a directory"), ("missing.csv", "No such file or directory"),
                                         ("empty.csv", "not a readable CSV file"),
                                         ("binary.csv", "not a readable CSV file"),
                                         ("ragged.csv", "not a readable CSV file (Error tokenizing data. C error: "
                                                        "Expected 2 fields in line 3, saw 3)\n")])
def test_detect_changes_cli_names_a_path_it_cannot_read_without_a_traceback(tmp_path, capsys, given, says):
    from pipelines.cli import main

    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "binary.csv").write_bytes(b"\x00\xff\xfe\x00")
    (tmp_path / "ragged.csv").write_text("night,median_ns\n0,1.0\n1,1.1,9\n")  # one line, not two
    assert main(["detect-changes", str(tmp_path / given), "--column", "median_ns"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / given}: {says}" in err and "Traceback" not in err


# --- stage 5: jumps in series that wander -------------------------------------------

def _random_walk(n, step=0.002, seed=0):
    return 1.0 + np.cumsum(step * np.random.default_rng(seed).standard_normal(n))


def test_a_jump_in_a_random_walk_is_found_where_it_happens():
    for seed in range(5):
        x = _random_walk(120, seed=seed)
        x[70:] += 0.05  # 25 increment-sigmas, but the walk wanders by ~0.02 around any level
        # the only step (a walk's level moves: seed 2 has a gradual change at 55 as well)
        changes = [c for c in detect(x) if not c.gradual]
        assert [c.index for c in changes] == [70], f"seed {seed}"
        c = changes[0]
        # stage 3's shift test, or stage 5 (before = the run just before the jump)
        assert 0.03 < c.after - c.before < 0.07 and not c.provisional and c.p_value < 1e-3


def test_a_random_walk_without_a_jump_gives_no_change():
    for seed in range(20):
        assert detect(_random_walk(300, seed=seed)) == [], f"seed {seed}"


def test_a_spike_that_reverts_in_a_random_walk_is_not_a_change():
    x = _random_walk(120)
    x[60:62] += 0.05
    assert detect(x) == []


def test_a_jump_that_recurs_every_season_is_not_a_change():
    from pipelines.changepoint.jumps import jumps

    month = np.arange(240) % 12
    x = 1.0 + 0.001 * np.arange(240) + 0.002 * np.random.default_rng(1).standard_normal(240).cumsum()
    x = x + 0.05 * month / 11.0  # climbs through each year, drops back every January
    assert jumps(x, DetectorParams()) == []
    x[150:] += 0.08  # one real jump on top of the season
    assert [j[0] for j in jumps(x, DetectorParams())] == [150]


def test_stationary_series_never_reach_the_jump_stage():
    from pipelines.changepoint.jumps import wanders
    from pipelines.changepoint.noise import noise_sigma

    assert not wanders(_gaussian(200), noise_sigma(_gaussian(200), []))
    assert not wanders(_ar1(200), noise_sigma(_ar1(200), []))
    assert wanders(_random_walk(200), noise_sigma(_random_walk(200), []))


def test_held_values_are_left_to_the_level_tests():
    from pipelines.changepoint.jumps import jumps

    x = np.repeat(1.0 + 0.002 * np.random.default_rng(2).standard_normal(30).cumsum(), 10)
    x[150:] += 0.05  # a step, but most increments are exactly 0: their MAD says nothing
    assert jumps(x, DetectorParams()) == []
