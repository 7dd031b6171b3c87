"""Large lasting steps under autocorrelated noise (issue #21), and what lets them through
without letting bursts of a second mode through.

Each history is drawn from its own seed: AR(1) noise with lag-1 autocorrelation 0.5-0.8
and marginal sigma 0.3-1 % of the level, 64-130 nights, one step of 10-20 % either way.
"""

import numpy as np
import pytest

from pipelines.changepoint import detect
from pipelines.changepoint.ranks import fixed_split_pvalue, shift_raw_p
from test_changepoint import _ar1

DRAWS = 40


def _ar1_history(seed: int) -> tuple[np.ndarray, int, float, int]:
    """(values, nights, step, nights held) of one draw; the noise only."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(64, 131))
    held = int(rng.integers(17, min(100, n - 10) + 1))
    phi, sigma = rng.uniform(0.5, 0.8), rng.uniform(0.003, 0.01)
    step = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.10, 0.20))
    e = np.empty(n)
    e[0] = rng.standard_normal()
    for t in range(1, n):
        e[t] = phi * e[t - 1] + np.sqrt(1 - phi**2) * rng.standard_normal()
    return 1.0 + sigma * e, n, step, held


def test_a_large_step_held_to_the_end_of_an_ar1_history_is_confirmed_at_its_night_every_time():
    for seed in range(DRAWS):
        x, n, step, held = _ar1_history(seed)
        x[n - held:] += step
        confirmed = [c.index for c in detect(x) if not c.provisional]
        assert n - held in confirmed, f"seed {seed}: step {step:+.1%} at {n - held} of {n}, got {confirmed}"


def test_a_large_step_held_then_undone_in_an_ar1_history_is_confirmed_at_both_nights_every_time():
    for seed in range(DRAWS):
        x, n, step, held = _ar1_history(seed)
        start = int(np.random.default_rng(1000 + seed).integers(10, n - held + 1))
        x[start:start + held] += step
        changes = detect(x)
        confirmed = [c.index for c in changes if not c.provisional]
        assert start in confirmed, f"seed {seed}: step {step:+.1%} at {start} held {held} of {n}, got {confirmed}"
        if n - (start + held) > 5:  # the return, once past the newest-runs test's 5 runs
            assert start + held in confirmed, f"seed {seed}: return at {start + held}, got {confirmed}"
        elif start + held < n:  # there: reported, provisional until a rerun agrees
            assert start + held in [c.index for c in changes], f"seed {seed}: return at {start + held}"


def test_the_issue_case_a_20_percent_drop_held_17_nights_of_71_is_found_at_its_night():
    x = 1.0 + 0.6 * (_ar1(71, phi=0.7, seed=21) - 1.0)
    x[54:] -= 0.20
    (c,) = [c for c in detect(x) if not c.provisional]
    assert c.index == 54 and c.rel_change == pytest.approx(-0.20, abs=0.02) and c.p_value < 1e-3


def test_ranks_wholly_apart_are_no_more_significant_for_a_larger_step_but_the_shift_test_is():
    rng = np.random.default_rng(0)
    left, right = rng.standard_normal(54), rng.standard_normal(17)
    small, large = fixed_split_pvalue(left, right + 6, rho=0.8), fixed_split_pvalue(left, right + 30, rho=0.8)
    assert small == large > 1e-3  # the ceiling: wholly apart, whatever the size
    assert fixed_split_pvalue(left, right + 30, rho=0.8, sigma=1.0) < 1e-10
    assert shift_raw_p(left, right + 30, 1.0) < shift_raw_p(left, right + 6, 1.0) < 1e-10


def test_the_shift_test_never_makes_a_split_more_significant_than_ranks_for_independent_runs():
    # A burst of 5 slow nights (a second mode 5 sigma away) in 60 runs: far apart in
    # magnitude, but such bursts are common in two-mode histories; ranks hold them back.
    rng = np.random.default_rng(1)
    left, burst = rng.standard_normal(60), 5.0 + rng.standard_normal(5)
    rank_only = fixed_split_pvalue(left, burst, rho=0.0)
    assert fixed_split_pvalue(left, burst, rho=0.0, sigma=1.0) == rank_only
    assert fixed_split_pvalue(left, burst, rho=0.3, sigma=1.0) >= fixed_split_pvalue(left, burst, rho=0.0)


def test_bursts_of_slow_nights_in_a_two_mode_history_are_not_confirmed_as_changes():
    for seed in range(10):
        rng = np.random.default_rng(seed)
        x = 1.0 + 0.005 * (rng.standard_normal(200) + 5.0 * (rng.random(200) < 0.3))
        x[60:66] = 1.0 + 0.005 * (5.0 + rng.standard_normal(6))  # six slow nights in a row
        assert [c.index for c in detect(x) if not c.provisional] == [], f"seed {seed}"


def test_measure_at_keeps_a_large_ar1_step_significant_night_after_night():
    from pipelines.changepoint import measure_at

    for seed in range(10):
        x, n, step, held = _ar1_history(seed)
        x[n - held:] += step
        c = measure_at(x, n - held)
        assert c.p_value < 1e-3 and c.rel_change == pytest.approx(step, rel=0.3), f"seed {seed}"


# --- the measured floors (a small step between long segments) ------------------------

def test_a_small_step_between_long_segments_is_found_and_a_drift_is_not_cut():
    from pipelines.changepoint import detect
    from pipelines.changepoint.detector import step_net_of_slope

    found = drifts = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        x = 1.0 + 0.004 * rng.standard_normal(120)  # a 2-sigma, 0.8 % step at 60
        x[60:] += 0.008
        found += any(abs(c.index - 60) <= 3 and not c.provisional for c in detect(x))
        # a linear drift of 0.05 sigma per run (6 sigma over the history): no step, at
        # most one gradual change for the whole drift
        d = 1.0 + 0.004 * (rng.standard_normal(120) + 0.05 * np.arange(120))
        drift = [c for c in detect(d) if not c.provisional]
        assert all(c.gradual for c in drift) and len(drift) <= 1, f"seed {seed}"
        drifts += len(drift)
        step, z = step_net_of_slope(d[30:60], d[60:90], 0.004, 0.0)
        assert z < 4, f"seed {seed}"
    assert found >= 23  # 25 of 30 measured; the default floors (2 %, 2 sigma) find none
    assert drifts >= 15  # a 6-sigma drift is a change: 24 of 30 reported gradual (measured)


def test_a_step_the_runs_cannot_tell_from_a_drift_is_reported_as_gradual():
    # A 1.25-sigma step between 150-run segments (issue #21): the ranks put it at p 1e-5
    # or less, but with a slope fitted across it the step alone is often under 3
    # standard errors. Until 2026-11-27 that hid it; now it is reported, as gradual.
    # Measured: found (confirmed, within 3 runs) in 22 of 30 draws, 7 of them gradual;
    # 15 before.
    found = gradual = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        x = 1.0 + 0.01 * rng.standard_normal(300)
        x[150:] += 0.0125
        at = [c for c in detect(x) if abs(c.index - 150) <= 3 and not c.provisional]
        found += bool(at)
        gradual += bool(at) and at[0].gradual
    assert found >= 19 and gradual >= 4


def test_a_step_is_judged_in_noise_units_in_a_quiet_series_as_in_a_noisy_one():
    # The same 2-sigma step between 40-run segments as a 0.4 % step in 0.2 % noise: the
    # relative floor (0.2 %) must not stop what the noise-units floors let through in a
    # noisier series; a drift of 0.05 noise widths per run is never confirmed as a step
    # (1 history in 30 before gradual changes were reported, with either floor).
    from pipelines.changepoint import DetectorParams

    old = DetectorParams(min_rel_change_measured=0.005)  # the relative floor before 2026-11-26
    found = found_old = drifts = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        x = 1.0 + 0.002 * rng.standard_normal(80)
        x[40:] += 0.004
        found += any(abs(c.index - 40) <= 3 and not c.provisional for c in detect(x))
        found_old += any(abs(c.index - 40) <= 3 and not c.provisional for c in detect(x, params=old))
        d = 1.0 + 0.002 * (rng.standard_normal(120) + 0.05 * np.arange(120))
        drifts += any(not c.provisional and not c.gradual for c in detect(d))
    assert found >= 24 and found_old <= 6  # 27 and 3 of 30 measured
    assert drifts <= 1  # 1 of these 30 (seed 25)


def test_the_search_over_split_positions_is_corrected_to_its_nominal_level():
    # Siegmund's approximation for the largest of the split statistics: on independent
    # runs the corrected p of the best split is <= 0.05 in about 5 % of 60-run series.
    # Bonferroni over the 55 positions (the correction before) gave about 1 %: its
    # alpha was worth a fifth of what it said.
    from pipelines.changepoint.search import best_split

    rng = np.random.default_rng(4)
    p = np.array([best_split(rng.standard_normal(60), 3)[1] for _ in range(2000)])
    assert 0.035 <= float(np.mean(p <= 0.05)) <= 0.065


def test_the_noise_autocorrelation_of_a_short_history_is_not_read_low():
    # AR(1) noise of 0.7 over 30 runs: the rank lag-1 autocorrelation about the mean
    # reads about 0.55 uncorrected; corrected for its bias, within 0.06 of the target
    # (the rank correlation of Gaussian AR(1) 0.7 is 0.683).
    from pipelines.changepoint.noise import noise_rho

    rhos = [noise_rho(_ar1(30, 0.7, seed=seed), []) for seed in range(400)]
    assert abs(float(np.mean(rhos)) - 0.683) <= 0.06



# --- a second mode (slow nights): steps of the main mode --------------------------------

def _two_mode(seed: int, step: float) -> tuple[np.ndarray, np.ndarray]:
    """160 nights of 0.4 % noise, a quarter of them 2 % slow (5 sigma), with and without
    a step of `step` at night 80: (stepped, quiet)."""
    rng = np.random.default_rng(seed)
    quiet = 1.0 + 0.004 * rng.standard_normal(160) + 0.02 * (rng.random(160) < 0.25)
    stepped = quiet.copy()
    stepped[80:] += step
    return stepped, quiet


def test_the_slow_nights_of_a_second_mode_are_found():
    from pipelines.changepoint.modes import second_mode_runs

    rng = np.random.default_rng(3)
    slow = rng.random(160) < 0.25
    x = 1.0 + 0.004 * rng.standard_normal(160) + 0.02 * slow
    x[80:] += 0.008  # a step of the main mode is not a mode
    found = second_mode_runs(x, [])
    assert found is not None and (found & slow).sum() >= 0.75 * slow.sum() and (found & ~slow).sum() <= 2
    # heavy tails on both sides, or Gaussian noise, have no second mode
    assert second_mode_runs(1.0 + 0.004 * rng.standard_t(2.5, 160), []) is None
    assert second_mode_runs(1.0 + 0.004 * rng.standard_normal(160), []) is None


def test_a_small_step_under_a_second_mode_is_found_among_the_main_modes_runs():
    found = 0
    for seed in range(30):
        stepped, quiet = _two_mode(seed, 0.008)  # 2 sigma of the main mode, 0.8 %
        found += any(abs(c.index - 80) <= 3 and not c.provisional for c in detect(stepped))
        assert not [c for c in detect(quiet) if not c.provisional], f"seed {seed}"
    assert found >= 15  # 19 of 30 measured; 4 on ranks over all nights


def test_prewhitened_least_squares_sees_the_night_of_a_step_that_the_long_run_factor_ignores():
    # A 2-sigma step at a known split of 60 runs of AR(1) 0.8 noise: least squares on
    # the prewhitened runs against the difference of means with the long-run factor
    # (1 + rho) / (1 - rho), same draws, rho given. Without a step, it is no more eager.
    from scipy.special import ndtr

    from pipelines.changepoint import ar1

    phi, draws = 0.8, 200
    gls = means = null = 0
    for seed in range(draws):
        e = _ar1(60, phi, sigma=1.0, seed=seed)
        null += ar1.step_p(e[:30], e[30:], phi, 1.0) < 0.01
        x = e.copy()
        x[30:] += 2.0
        gls += ar1.step_p(x[:30], x[30:], phi, 1.0) < 0.001
        z = abs(x[30:].mean() - x[:30].mean()) / np.sqrt((1 + phi) / (1 - phi) * (2 / 30))
        means += 2 * ndtr(-z) < 0.001
    assert gls >= 0.6 * draws and means <= 0.35 * draws  # 156 and 52 of 200 measured
    assert null <= 0.03 * draws  # none of these 200 (1 in 400) measured at p < 0.01


def _step_at_50_of_100(phi: float, sigmas: float, draws: int = 30) -> tuple[int, int, int]:
    """(draws whose step of `sigmas` at night 50 of 100 nights of AR(1) noise is confirmed
    within 3 nights, draws of the same noise without the step with a confirmed step,
    those with a gradual change)."""
    found = alarms = gradual = 0
    for seed in range(draws):
        x = _ar1(100, phi, sigma=0.005, seed=seed)
        quiet = [c for c in detect(x) if not c.provisional]
        alarms += any(not c.gradual for c in quiet)
        gradual += any(c.gradual for c in quiet)
        x[50:] += 0.005 * sigmas
        found += any(abs(c.index - 50) <= 3 and not c.provisional for c in detect(x))
    return found, alarms, gradual


def test_a_2_sigma_step_under_ar1_noise_is_found_where_the_long_run_factor_lost_it():
    # 100 nights of AR(1) 0.6 noise, a 2-sigma step at night 50: found (confirmed,
    # within 3 nights) in 16 of 30 draws measured, 10 before the prewhitened tests; the
    # same noise without the step raises no confirmed step, and a gradual change in 1
    # draw (0.33 per 1,000 nights, under the 0.5 budget; benchmarks/NOTES-changepoint.md).
    found, alarms, gradual = _step_at_50_of_100(phi=0.6, sigmas=2.0)
    assert found >= 13 and alarms == 0 and gradual <= 1


def test_a_3_sigma_step_under_ar1_noise_past_the_rho_cap_is_found_by_the_differences():
    # AR(1) 0.85: the noise's rho estimate sits at the cap (0.8), where the step was
    # tested without prewhitening (the noise might be a random walk); whitened at rho 1
    # (differences) it is tested as a random walk's would be. Found within 3 nights,
    # confirmed: 28 of 30 draws measured, 19 before; the same noise without the step
    # raises no confirmed step (0 of 30, before and after); gradual changes in 2 draws,
    # where the excursions of 0.85 noise, once cut, take the autocorrelation with them.
    found, alarms, gradual = _step_at_50_of_100(phi=0.85, sigmas=3.0)
    assert found >= 25 and alarms == 0 and gradual <= 2
