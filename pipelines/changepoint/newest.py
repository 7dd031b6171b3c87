"""The nightly question: did the newest runs (up to 5) leave the recent level?

The position is fixed in advance (the last m runs), so the test needs no correction for
a search over the whole series; a new level too young to be significant is reported as
provisional so that the orchestration reruns the case and confirms or clears it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pipelines.changepoint import ar1
from pipelines.changepoint.model import LOCAL_RUNS, DetectorParams, effect_floor
from pipelines.changepoint.noise import noise_rho, noise_sigma
from pipelines.changepoint.ranks import MAX_RHO, corrected_p, split_raw_p, split_rho, split_z

# A single newest run must clear the floor in noise units by this factor: one bad night
# is the most common false alarm of all, and a rerun confirms a real step the next night
# anyway. The relative floor is not raised: it says what size matters, not how likely
# an outlier is (doubled, it hid a lone run 10-19 sigma and 3.2-4.4 % off its level).
LONE_RUN_FACTOR = 2.0
# ... but only LONE_RUN_MIN times where none of the last 2 x LOCAL_RUNS runs strayed
# that far on the lone run's side (`lone_run_factor`): there a 3-sigma night is already
# further out than the history goes, whereas after slow nights of 4-6 sigma (a second
# mode, heavy tails) the full factor stands.
LONE_RUN_MIN = 1.5
# The newest-runs test looks at the last 1..TAIL_MAX runs for a significant new level
# (a level seen for up to 5 nights; past that, the whole-series search confirms it).
TAIL_MAX = 5
# A new level of SPARE_FROM or more runs may hold one run (not its first) that does not
# clear half the floor: a slow night of a two-mode kernel, or a single outlier, must not
# hide a level the other runs show. Shorter levels have no run to spare.
SPARE_FROM = 4
# A young level of TAIL_MAX + 1 to YOUNG_MAX runs that passes run by run stays reported,
# provisional, until the whole-series search confirms it (it is never confirmed here:
# the significance test counts TAIL_MAX choices of m). Without this a step found on its
# first nights often vanished from the output on nights 5-10: the search over all split
# positions, corrected for autocorrelation, needs more runs (on its 6th night a 3-6
# sigma step was still reported in 85 % of Gaussian, 65 % of bimodal and 12 % of AR(1)
# histories; see NOTES-changepoint.md).
YOUNG_MAX = LOCAL_RUNS
# A young level of up to MEASURED_TAIL runs under the default relative floor may be
# reported on the newest runs' own (min_rel_change_newest): confirmed where the rank test
# reaches strict_alpha, flagged (provisional) only where its median clears MEASURED_FLAG times
# that floor, i.e. 3 sigma for 2-5 runs, the size of step the detector promises
# (at 1.0, i.e. 2 sigma, reruns of change-free Gaussian histories doubled).
MEASURED_TAIL = TAIL_MAX
MEASURED_FLAG = 1.5
# Under autocorrelated noise a level of 3-TAIL_MAX runs is also tested by least squares
# on the prewhitened runs (`ar1`; the night the level begins is one prediction error of
# the whole step): its p, corrected for the TAIL_MAX choices of m, must be PREWHITENED_MARGIN
# times below strict_alpha. It is a second, parametric test of runs that are asked
# again every night; at the same level as the rank test (margin 1) the 60-night nightly
# replays had more confirmed false alarms (AR(1) 0.5: 4.15 -> 4.76 per 1,000 nights,
# Student-t3: 0.37 -> 0.49), at 5 about as before (4.27, 0.37), and steps of 3-6 sigma
# confirmed by their fourth night went from 0.50 to 0.68 of AR(1) histories (Gaussian
# 0.78 -> 0.84; NOTES-changepoint.md).
PREWHITENED_MARGIN = 5.0


def tail_change(x: np.ndarray, cps: list[int], sigma: float, params: DetectorParams,
                prewhitened: bool = True) -> tuple[int, float, float, bool] | None:
    """A new level among the newest runs: (start index, p-value, level before,
    provisional), or None.

    This answers the nightly question "did the last m runs leave the recent level?" for
    m = 1..TAIL_MAX. The position is fixed in advance, so the rank test is corrected for
    the TAIL_MAX choices of m only, not for a search over the whole series.
    - The level before is the median of the (up to LOCAL_RUNS) runs preceding the m
      runs, within the last segment, so that slow drift does not read as a step; or of
      up to 2 x LOCAL_RUNS runs, whichever is nearer the new runs (`level_before`).
    - Every m needs the median of its m runs to clear both floors (a lone run:
      LONE_RUN_FACTOR times the floor in noise units, or down to LONE_RUN_MIN times where
      the recent runs never strayed that far on its side, `lone_run_factor`). For
      m > confirm_points the noise-units floor uses the noise with the m runs as a level of their own (`noise_sigma`): a new
      level of 3-5 runs left inside the last segment inflates its own yardstick.
    - "Run by run": every one of the m runs clears half the floor on the same side (a
      level of SPARE_FROM or more runs may spare one run, not its first: a slow night or
      a single outlier), and the run just before them has not begun the new level: it
      does not clear the floor on that side, or it sits nearer the level before than
      any of the m runs (else the new level began earlier, and reporting its last m
      runs would put the change at the wrong run). Without the second clause an old
      run that strayed 3 noise widths towards a 20-sigma drop on the last 2 nights was
      taken for the drop's first night, and the drop was not reported at all.
    - Two modes: where the history before the newest TAIL_MAX runs has a second mode
      (`mode_gap`: slow clocks on some nights), a run of a 3-5-run level that sits at
      that level's own second mode counts as at the level (`fold_other_mode`), and a
      run just before m <= confirm_points runs that does so (its predecessor having
      moved) means the level began earlier. Without this a down-step of about the mode
      gap is seen late or not at all: its slow runs land back on the old level. The
      other way round, before a step towards the second mode, a run just before the m
      runs that sits at the old level's own second mode (its predecessor not moved) is
      a slow night of the old level, not a sign that the new level began earlier.
    - m <= confirm_points has no test to lean on: it is reported, provisional, when it
      passes run by run. But where a level of 3-5 runs that contains it also passes run
      by run, its first run clears the whole floor, and the history strays the other way
      (`heavy_side`: slow nights above a step down), that level is reported instead: the
      run it spares is most likely the new level's slow night, and the last 1-2 runs
      would place the change late. Where the history strays on the step's side, or on
      neither, a noisy old run is as likely the first of the "longer level", and the
      1-2-run level stands (preferring the longer level there cost recall at c+1).
    - A longer m is reported when significant at strict_alpha (not provisional; the longest
      such m wins). Under autocorrelated noise (and where `prewhitened`: not in a series
      that wanders) a level of 3-TAIL_MAX runs that passes run by run may also be
      significant by the step fitted on the prewhitened runs (`young_level_p`; run by
      run, because a least-squares step also stands where the level's first run is
      still an old one: a 20-sigma step was placed one run early). Failing that, a
      level of 3-5 runs that passes run by run is reported as provisional (where
      several do, the one with the smallest p, i.e. the best-placed start): a level
      seen for a few runs is often not yet significant in a short or noisy history,
      and flagging it is what gets the case rerun.
    - Failing all of these, a young level of TAIL_MAX + 1 to YOUNG_MAX runs that passes
      run by run is reported, provisional (the smallest p): the whole-series search
      has not confirmed it yet, and the level must not vanish meanwhile.
    """
    start = cps[-1] if cps else 0
    n = len(x)
    # A level of 3-5 runs that the rank test confirms (p <= strict_alpha) is held to the
    # newest runs' relative floor (its noise-units floor stays min_sigma); a provisional
    # flag, and a level of 1-2 runs or past TAIL_MAX, to the default one: with that
    # floor there, 2-4 runs past 1 sigma on one side of a 0.5 %-noise history
    # were flagged (a rerun) on nights after a step.
    # (min_rel_change_measured comes down with it: DetectorParams holds it to <= min_rel_change)
    measured = replace(params, min_rel_change=params.min_rel_change_newest,
                       min_rel_change_measured=min(params.min_rel_change_measured, params.min_rel_change_newest))
    not_yet_significant = older = firm = None
    gap = mode_gap(x[start:n - TAIL_MAX], sigma)  # the history's second mode, if any
    heavy = heavy_side(x[start:n - TAIL_MAX], sigma)  # the side its stray runs fall on
    for m in range(YOUNG_MAX, 0, -1):
        if n - m - start < params.min_segment:
            continue
        new = x[n - m:]
        level = level_before(x[start:n - m], float(np.median(new)))
        scale = noise_sigma(x, [*cps, n - m]) if m > params.confirm_points else sigma
        # under the default relative floor a level of up to TAIL_MAX runs may still be
        # reported on the measured one (`measured` above): confirmed at strict_alpha, or flagged
        # where its median clears MEASURED_FLAG times the measured floor
        reach = (lone_run_factor(x[start:n - 1], level, float(np.sign(new[0] - level)), scale, params)
                 if m == 1 else 1.0)
        measured_only = (m <= MEASURED_TAIL
                         and abs(float(np.median(new)) - level) < effect_floor(level, scale * reach, params))
        floors = measured if measured_only else params
        base_floor = effect_floor(level, scale, floors)
        floor = effect_floor(level, scale * reach, floors)
        if gap is not None and m > params.confirm_points:
            new = fold_other_mode(new, level, gap, floor)
        shift = new - level
        if floor == 0 or abs(float(np.median(shift))) < floor:
            continue
        side = np.sign(np.median(shift))
        # the run before began the new level if it moved past the floor towards it and
        # sits nearer one of the new runs than the level before ("nearer their median"
        # let an accelerating drift's last runs through: each of its runs is near the next)
        before_run = x[n - m - 1]
        moved_before = bool(side * (before_run - level) >= base_floor
                            and float(np.min(np.abs(new - before_run))) < abs(before_run - level))
        if gap is not None and side * gap < 0 and n - m - 2 >= start:
            # the run before is the new level's other mode, and the one before it moved
            other_mode = abs(before_run - (float(np.median(new)) + gap)) < floor / 2
            moved_before |= bool(other_mode and side * (x[n - m - 2] - level) >= base_floor)
        if moved_before and gap is not None and side * gap > 0 and n - m - 2 >= start:
            # the run before is the old level's other mode, and the one before it did not move
            old_other_mode = abs(before_run - (level + gap)) < floor / 2
            moved_before = not (old_other_mode and side * (x[n - m - 2] - level) < base_floor)
        at_level = side * shift >= floor / 2
        # the level's first run must belong to it: nearer its median than the level
        # before (with a low relative floor, the old level's highest run cleared half
        # the floor and a young level was placed one run early)
        at_level[0] &= abs(new[0] - float(np.median(new))) < abs(new[0] - level)
        spare = 1 if m >= SPARE_FROM else 0
        run_by_run = bool(at_level[0] and np.sum(~at_level) <= spare) and not moved_before
        if m <= params.confirm_points and not run_by_run:
            continue
        flag = not measured_only or abs(float(np.median(shift))) >= MEASURED_FLAG * floor
        if m <= params.confirm_points and not flag:
            continue
        seg = x[start:]
        k = n - m - start
        z, r = split_z(seg, np.array([k]))
        raw = split_raw_p(seg, k, float(z[0]))
        p = corrected_p(raw, split_rho(r, k), TAIL_MAX)
        if prewhitened and run_by_run and params.confirm_points < m <= TAIL_MAX:
            p = min(p, young_level_p(x, cps, m, raw, scale))
        if m <= params.confirm_points:
            if firm is not None and firm[4] == side:
                return firm[:4]  # the 1-2 runs are the end of a longer level
            return n - m, p, level, True
        if p <= params.strict_alpha and m <= TAIL_MAX:
            return n - m, p, level, False
        if not flag:
            continue
        if m > TAIL_MAX:
            if run_by_run and (older is None or p < older[1]):
                older = (n - m, p, level, True)
            continue
        if run_by_run and (not_yet_significant is None or p < not_yet_significant[1]):
            not_yet_significant = (n - m, p, level, True)
        if run_by_run and side * shift[0] >= base_floor and heavy == -side:
            if firm is None or p < firm[1]:  # a 3-5-run level the newest runs may end
                firm = (n - m, p, level, True, side)
    return not_yet_significant or older


def young_level_p(x: np.ndarray, cps: list[int], m: int, raw_p: float, sigma: float) -> float:
    """p of a young level of the newest m runs against the last segment before it, by
    least squares on the prewhitened runs (`ar1.step_p`), corrected for the TAIL_MAX
    choices of m and raised by PREWHITENED_MARGIN (so that it counts at strict_alpha /
    PREWHITENED_MARGIN); never below the rank test's p for independent runs (raw_p, so
    corrected), as in `ranks.fixed_split_pvalue`. 1 where the noise, measured with the
    m runs as a level of their own, shows no autocorrelation.

    The rank test under AR(1) noise divides by the long-run factor, which leaves out the
    night of the step, and with 3-5 runs that night is most of the evidence: a 2.6-sigma
    step under autocorrelation 0.7, seen for 4 nights, sat at rank p 0.09 (corrected)
    and at 2e-6 here (5e-5 corrected; development draws). The noise's autocorrelation is
    measured with the young level cut off: left in, its runs on one side read as
    autocorrelation."""
    n = len(x)
    rho = noise_rho(x, [*cps, n - m])
    if rho <= 0:
        return 1.0
    start = cps[-1] if cps else 0
    p = ar1.step_p(x[start:n - m], x[n - m:], ar1.whitening_rho(rho, MAX_RHO), sigma)
    return float(min(1.0, max(p * PREWHITENED_MARGIN, raw_p) * TAIL_MAX))


def lone_run_factor(before: np.ndarray, level: float, side: float, sigma: float,
                    params: DetectorParams) -> float:
    """How many times the noise-units floor a lone newest run on `side` (+1 up, -1 down)
    of `level` must clear: how far the farthest of the last 2 x LOCAL_RUNS runs before it
    strayed on that side, in units of that floor, within [LONE_RUN_MIN, LONE_RUN_FACTOR]
    (LONE_RUN_FACTOR where there are fewer than LOCAL_RUNS runs to judge by)."""
    recent = before[-2 * LOCAL_RUNS:]
    unit = params.min_sigma * sigma
    if len(recent) < LOCAL_RUNS or unit <= 0 or side == 0:
        return LONE_RUN_FACTOR
    reach = float(np.max(side * (recent - level))) / unit
    return float(np.clip(reach, LONE_RUN_MIN, LONE_RUN_FACTOR))


def _recent_runs(before: np.ndarray, sigma: float) -> tuple[np.ndarray, float] | None:
    """The last 2 x LOCAL_RUNS runs of `before` and their median, or None where there are
    fewer than LOCAL_RUNS or no noise scale (too little to tell stray runs)."""
    runs = before[-2 * LOCAL_RUNS:]
    if len(runs) < LOCAL_RUNS or sigma <= 0:
        return None
    return runs, float(np.median(runs))


def mode_gap(before: np.ndarray, sigma: float) -> float | None:
    """The offset of a second mode (slow clocks, another placement) among the runs
    before, or None: 2 or more, and at most 40 %, of the last 2 x LOCAL_RUNS runs sit
    more than 2 sigma from their median, all on one side; the gap is their median's
    distance from the median of all."""
    recent = _recent_runs(before, sigma)
    if recent is None:
        return None
    runs, centre = recent
    far = runs[np.abs(runs - centre) > 2 * sigma]
    if len(far) < 2 or len(far) > 0.4 * len(runs) or not (np.all(far > centre) or np.all(far < centre)):
        return None
    return float(np.median(far)) - centre


def heavy_side(before: np.ndarray, sigma: float) -> int:
    """+1 or -1: the side on which the last 2 x LOCAL_RUNS runs before stray from their
    median by more than 1.5 sigma (3 or more of them, and 3 times as many as on the
    other side), else 0.

    Looser than `mode_gap`, which needs every stray run on one side: a two-mode history
    with one fast outlier still has a heavy (slow) side. Gaussian noise has one in about
    1 history of 5, which is why `tail_change` also asks the longer level's first run to
    clear the whole floor."""
    recent = _recent_runs(before, sigma)
    if recent is None:
        return 0
    runs, centre = recent
    above = int(np.sum(runs > centre + 1.5 * sigma))
    below = int(np.sum(runs < centre - 1.5 * sigma))
    if above >= 3 and above >= 3 * below:
        return 1
    if below >= 3 and below >= 3 * above:
        return -1
    return 0


def fold_other_mode(new: np.ndarray, level: float, gap: float, floor: float) -> np.ndarray:
    """The newest runs with those at the candidate level's other mode moved onto it.

    A step against the side of the second mode (down, when the second mode is slow)
    leaves that mode's runs near the old level: they fall back, and would count against
    the new level. The new level is taken from the runs that moved (the first run among
    them, and 2 at least); a later run within floor / 2 of that level + gap is its
    other mode and is moved by -gap."""
    side = -np.sign(gap)
    moved = side * (new - level) >= floor / 2
    if not moved[0] or moved.sum() < 2:
        return new
    target = float(np.median(new[moved])) + gap
    other = ~moved & (np.abs(new - target) < floor / 2)
    other[0] = False
    return np.where(other, new - gap, new)


def level_before(before: np.ndarray, new_median: float) -> float:
    """The level the newest runs are measured from: the median of the last LOCAL_RUNS
    runs of `before`, or of its last 2 x LOCAL_RUNS, whichever is nearer `new_median`.

    The short window is the drift guard (under a slow drift it lags least, so it is the
    nearer one); the long one is the more precise level where there is no drift, so a
    pair of noisy runs has to stand out from both."""
    recent = float(np.median(before[-LOCAL_RUNS:]))
    longer = float(np.median(before[-2 * LOCAL_RUNS:]))
    return recent if abs(new_median - recent) <= abs(new_median - longer) else longer
