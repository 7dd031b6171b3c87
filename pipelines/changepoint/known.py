"""A level change known from an earlier look, followed as the history grows: its size
and significance re-measured at its run (`measure_at`), whether the runs after it
agree that a new level starts there (`confirms`), and whether the level has since
faded back (`faded`). pipelines.mining.regressions asks these of every known change,
every night, whether or not `detect` reports it again."""
from __future__ import annotations

import numpy as np

from pipelines.changepoint.model import LOCAL_RUNS, Change, DetectorParams, describe, effect_floor
from pipelines.changepoint.noise import noise_sigma
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
    x, k, lo, hi, sigma = known
    left, right = x[lo:k], x[k:hi]
    return describe(index, float(np.median(left[-LOCAL_RUNS:])), right, sigma,
                    fixed_split_pvalue(left, right, sigma=sigma), k >= len(x) - params.confirm_points, params)


def confirms(values, index: int, *, changes=(), params: DetectorParams = DetectorParams()) -> bool | None:
    """Do the runs from `index` agree that a new level starts there?

    The first max(confirm_points, 2) runs from `index` (the change run and at least one
    later run, e.g. a confirmation rerun) must each leave the last good level (as in
    `measure_at`) by half the effect floor or more on the same side, and their median by
    the whole floor. None while there are not yet that many runs.
    """
    known = _known_split(values, index, changes)
    if known is None:
        return None
    x, k, lo, hi, sigma = known
    need = max(params.confirm_points, 2)
    if hi - k < need:
        return None
    level = float(np.median(x[lo:k][-LOCAL_RUNS:]))
    shift = x[k:k + need] - level
    floor = effect_floor(level, sigma, params)
    return bool(floor > 0 and abs(float(np.median(shift))) >= floor
                and (np.all(shift >= floor / 2) or np.all(shift <= -floor / 2)))


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
    x, k, lo, hi, sigma = known
    if hi - k < FADE_RUNS:
        return False
    level = float(np.median(x[lo:k][-LOCAL_RUNS:]))
    floor = max(params.min_rel_change_measured * abs(level), params.min_sigma_measured * sigma)
    return bool(abs(float(np.median(x[k:hi])) - level) < floor)


def _known_split(values, index: int, changes) -> tuple[np.ndarray, int, int, int, float] | None:
    """(finite runs, position of `index` among them, segment start, segment end, noise
    sigma), with the segments bounded by the other known changes."""
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
    return x, k, lo, hi, noise_sigma(x, cps)
