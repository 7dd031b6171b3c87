"""A level change known from an earlier look, followed as the history grows: its size
and significance re-measured at its run (`measure_at`), whether the runs after it
agree that a new level starts there (`confirms`), and whether the level has since
faded back (`faded`). pipelines.mining.regressions asks these of every known change,
every night, whether or not `detect` reports it again."""
from __future__ import annotations

from math import comb

import numpy as np

from pipelines.changepoint.model import LOCAL_RUNS, Change, DetectorParams, describe, effect_floor
from pipelines.changepoint.noise import noise_rho, noise_sigma
from pipelines.changepoint.ranks import fixed_split_pvalue


def measure_at(values, index: int, *, changes=(), params: DetectorParams = DetectorParams()) -> Change | None:
    """Re-measure a level change already known to start at position `index` of `values`.

    For tracking a reported change night after night, when the data grew since it was
    found. `changes` are the positions of the series' other known changes (they bound
    the segments). Positions and NaN handling are as in `detect`. before: median of up
    to LOCAL_RUNS runs before `index`, back to the previous change (the last good
    level); after: median of the runs from `index` to the next change; sigmas: in the
    robust noise of the series cut at every change; p_value: the split test between the
    two neighbouring segments (ranks, or the shift of medians where autocorrelation holds
    the ranks back, as in `detect`), every position in them counted as searched. None when
    `index` is not a finite run or has no run before it.
    """
    known = _known_split(values, index, changes)
    if known is None:
        return None
    x, k, lo, hi, sigma, _ = known
    left, right = x[lo:k], x[k:hi]
    return describe(index, float(np.median(left[-LOCAL_RUNS:])), right, sigma,
                    fixed_split_pvalue(left, right, sigma=sigma), k >= len(x) - params.confirm_points, params)


# A new level is confirmed where its runs are unusual against the recent runs before
# it (up to 2 x LOCAL_RUNS, back to the previous change), not only far in noise widths:
# two slow nights of a two-mode kernel, or two heavy-tailed ones, clear the floors as a
# step does (benchmarks/changepoint_lifecycle.py). With two runs, each must sit beyond
# every recent run by the effect floor (the change run and its rerun confirm a step
# larger than anything the history did, the same night). With 3 to CONFIRM_RUNS runs,
# the chance that the runs land as far out as the least unusual of them does, among the
# recent runs (`unusual`: a rank p-value, exact for exchangeable runs, discounted for
# the series' autocorrelation) must be at most strict_alpha, the level of the
# newest-runs test: against 20 recent runs, from 4 runs on. Past CONFIRM_RUNS runs it
# is the detector's significance test that confirms a level, at a tenth of its level
# (pipelines.mining.regressions.CONFIRM_SHARE; where the series has peers, the step must
# also hold there at the noise autocorrelation they measure: `regressions.group_rho`).
CONFIRM_RUNS = 5


def confirms(values, index: int, *, changes=(), params: DetectorParams = DetectorParams()) -> bool | None:
    """Do the runs from `index` agree that a new level starts there?

    The first m runs from `index` (m from max(confirm_points, 2), i.e. the change run and
    a later run such as a confirmation rerun, up to CONFIRM_RUNS) must each leave the
    last good level (as in `measure_at`) by half the effect floor or more on the same
    side, and their median by the whole floor: False where they do not. True where,
    besides, they are unusual against the recent runs before the change (see
    CONFIRM_RUNS). None while there are not yet enough runs to say, or while the first
    CONFIRM_RUNS runs hold the new level without being unusual (the detector's test has
    to decide). Where the next known change ends the level before it is unusual, the
    floors alone decide.
    """
    known = _known_split(values, index, changes)
    if known is None:
        return None
    x, k, lo, hi, sigma, cps = known
    need = max(params.confirm_points, 2)
    before = x[lo:k]
    level = float(np.median(before[-LOCAL_RUNS:]))
    recent = before[-2 * LOCAL_RUNS:]
    floor = effect_floor(level, sigma, params)
    rho = None  # measured once 3 runs are in: most calls end before
    for m in range(need, max(need, CONFIRM_RUNS) + 1):
        if hi - k < m:  # not yet; or the next known change ends the level: the floors decided
            return None if hi == len(x) or m == need else True
        shift = x[k:k + m] - level
        if not (floor > 0 and abs(float(np.median(shift))) >= floor
                and (np.all(shift >= floor / 2) or np.all(shift <= -floor / 2))):
            return False
        side = np.sign(np.median(shift))
        if m == 2 and np.all(side * shift >= float(np.max(side * (recent - level))) + floor):
            return True
        if m > 2:
            rho = noise_rho(x, cps) if rho is None else rho
            if unusual(recent, level, x[k:k + m], rho) <= params.strict_alpha:
                return True
    return None


def unusual(before: np.ndarray, level: float, new: np.ndarray, rho: float = 0.0) -> float:
    """How usual it is for len(new) runs in a row to sit as far out as `new` among the
    runs `before`, on either side of `level`: a p-value over ranks, for exchangeable
    runs exact. With j of the n runs before at least as far out as the least unusual new
    run (on the new runs' side), it is the chance that m new runs among n + m
    exchangeable ones have at most j of the others beyond the least of them,
    C(m + j, m) / C(n + m, m) (the sum over i <= j of the C(m - 1 + i, m - 1) ways with
    exactly i), doubled for the side, which the runs chose. Under lag-1 autocorrelation
    rho the runs say less than m independent ones: the p-value is raised to the power
    (1 - rho) / (1 + rho) (3 runs of AR(1) 0.5 noise say about as much as one). The
    series' own runs are the yardstick, so a second mode or heavy tails count where a
    noise width does not.

    For 3 runs against 20 it is at least 2 / C(23, 3) = 0.0011: reading each run's share
    of the runs before as an independent uniform ((k + 1) / 21, cubed: 0.00086 for k = 1)
    took the runs before, which every share is read from, for known, and the side for
    given; three slow nights of a two-mode series passed 0.001 far more often than that."""
    n, m = len(before), len(new)
    side = np.sign(np.median(new - level))
    if side == 0 or m == 0:
        return 1.0
    j = int(np.sum(side * (before - level) >= float(np.min(side * (new - level)))))
    p = min(1.0, 2.0 * comb(m + j, m) / comb(n + m, m))
    return float(p ** ((1 - rho) / (1 + rho)))


# The runs from a confirmed change before `faded` may say the level did not hold.
FADE_RUNS = LOCAL_RUNS // 2


def faded(values, index: int, *, changes=(), params: DetectorParams = DetectorParams()) -> bool:
    """Has a level change confirmed at `index` faded: FADE_RUNS runs or more from it to the
    next change, whose median sits within the smallest floor the detector reports at
    (min_rel_change_measured and min_sigma_measured) of the last good level? Two slow
    nights of a two-mode series, agreed by the run after them, are confirmed; the runs
    since, back at the old level, say the level never moved."""
    known = _known_split(values, index, changes)
    if known is None:
        return False
    x, k, lo, hi, sigma, _ = known
    if hi - k < FADE_RUNS:
        return False
    level = float(np.median(x[lo:k][-LOCAL_RUNS:]))
    floor = max(params.min_rel_change_measured * abs(level), params.min_sigma_measured * sigma)
    return bool(abs(float(np.median(x[k:hi])) - level) < floor)


def _known_split(values, index: int, changes) -> tuple[np.ndarray, int, int, int, float, list[int]] | None:
    """(finite runs, position of `index` among them, segment start, segment end, noise
    sigma, the changes' positions among the runs), with the segments bounded by the
    other known changes."""
    raw = np.asarray(values, dtype=float)
    kept = np.flatnonzero(np.isfinite(raw))
    pos = {int(i): j for j, i in enumerate(kept)}
    if index not in pos or pos[index] == 0:
        return None
    k = pos[index]
    cps = sorted({pos[int(c)] for c in changes if int(c) in pos} - {0} | {k})
    x = raw[kept]
    i = cps.index(k)
    lo = cps[i - 1] if i > 0 else 0
    hi = cps[i + 1] if i + 1 < len(cps) else len(x)
    return x, k, lo, hi, noise_sigma(x, cps), cps
