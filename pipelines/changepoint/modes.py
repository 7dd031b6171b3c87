"""A second mode in a history: the runs that sit at it (slow clocks, another placement on
some nights), so that level changes can also be searched among the main mode's runs.

Ranks are blind to how far a slow night is, but not to its being slow: a slow mode on
10-35 % of the nights takes the top ranks on both sides of a step, and a 1-3-sigma step
of the main mode moves only the ranks below them. With those nights left out, the same
rank tests see the step at full strength (development draws: bimodal recall 0.779 ->
0.796, no other family changed; NOTES-changepoint.md).
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import median_filter

from pipelines.changepoint.model import LOCAL_RUNS
from pipelines.changepoint.noise import MAD_TO_SIGMA

# A run this many robust sigmas from the running median of its segment is far out ...
FAR_SIGMAS = 3.0
# ... and the history has a second mode when at least this share of its runs, and
# MIN_RUNS, are far out on one side, and at most a quarter as many on the other (heavy
# tails are far out on both sides; Gaussian noise puts 0.13 % of its runs past 3 sigma
# on each). With 3 runs, 60-night Gaussian histories replayed nightly were read as two
# modes now and then (confirmed false alarms 0.12 -> 0.37 per 1,000 nights).
MIN_SHARE = 0.05
MIN_RUNS = 5
# The running median and the scale are measured again without the far runs this many times.
ROUNDS = 3


def second_mode_runs(x: np.ndarray, cps: list[int]) -> np.ndarray | None:
    """Mask of the runs at a second mode of `x` (segments bounded by `cps`), or None
    where there is none.

    Each run is measured from the running median of the 2 x LOCAL_RUNS + 1 runs about it
    within its segment (so that a known change, or a slow wander, is not a mode), in
    units of the robust scale of those residuals. Both are first pulled towards the
    second mode by its own runs (a quarter of the nights 5 sigma slow lifted the scale
    by a third, and 13 of 41 slow nights were found), so they are measured again on the
    runs not found far out, ROUNDS times."""
    far = np.zeros(len(x), dtype=bool)
    for _ in range(ROUNDS):
        resid = _residuals(x, cps, ~far)
        scale = MAD_TO_SIGMA * float(np.median(np.abs(resid[~far])))
        if scale <= 0:
            return None
        found = _one_sided(resid, scale)
        if found is None:
            return None
        if np.array_equal(found, far):
            break
        far = found
    return far


def _residuals(x: np.ndarray, cps: list[int], use: np.ndarray) -> np.ndarray:
    """x less the running median (2 x LOCAL_RUNS + 1 runs) of the runs in `use`, within
    each segment, interpolated across the runs left out."""
    bounds = [0, *cps, len(x)]
    out = np.empty(len(x))
    for a, b in zip(bounds[:-1], bounds[1:]):
        seg, keep = x[a:b], use[a:b]
        if keep.sum() == 0:
            keep = np.ones(b - a, dtype=bool)
        pos = np.flatnonzero(keep)
        level = median_filter(seg[pos], size=2 * LOCAL_RUNS + 1, mode="nearest")
        out[a:b] = seg - np.interp(np.arange(b - a), pos, level)
    return out


def _one_sided(resid: np.ndarray, scale: float) -> np.ndarray | None:
    """The runs far out on the one side that has a second mode (see MIN_SHARE), or None."""
    above, below = resid > FAR_SIGMAS * scale, resid < -FAR_SIGMAS * scale
    need = max(MIN_RUNS, MIN_SHARE * len(resid))
    for far, other in ((above, below), (below, above)):
        if far.sum() >= need and 4 * other.sum() <= far.sum():
            return far
    return None
