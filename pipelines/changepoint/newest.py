"""The nightly question: did the newest runs (up to 5) leave the recent level?

The position is fixed in advance (the last m runs), so the test needs no correction for
a search over the whole series; a new level too young to be significant is reported as
provisional so that the orchestration reruns the case and confirms or clears it.
"""

from __future__ import annotations

import numpy as np

from pipelines.changepoint.model import LOCAL_RUNS, DetectorParams, effect_floor
from pipelines.changepoint.noise import noise_sigma
from pipelines.changepoint.ranks import corrected_p, split_raw_p, split_rho, split_z

# A single newest run must clear the floors by this factor: one bad night is the most
# common false alarm of all, and a rerun confirms a real step the next night anyway.
LONE_RUN_FACTOR = 2.0
# The newest-runs test looks at the last 1..TAIL_MAX runs (a new level seen for up to
# 5 nights; past that, the whole-series search has the power to find it).
TAIL_MAX = 5


def tail_change(x: np.ndarray, cps: list[int], sigma: float,
                 params: DetectorParams) -> tuple[int, float, float, bool] | None:
    """A new level among the newest runs: (start index, p-value, level before,
    provisional), or None.

    This answers the nightly question "did the last m runs leave the recent level?" for
    m = 1..TAIL_MAX. The position is fixed in advance, so the rank test is corrected for
    the TAIL_MAX choices of m only, not for a search over the whole series.
    - The level before is the median of the (up to LOCAL_RUNS) runs preceding the m
      runs, within the last segment, so that slow drift does not read as a step; or of
      up to 2 x LOCAL_RUNS runs, whichever is nearer the new runs (`level_before`).
    - Every m needs the median of its m runs to clear both floors (a lone run:
      LONE_RUN_FACTOR times the floors). For m > confirm_points the noise-units floor
      uses the noise with the m runs as a level of their own (`noise_sigma`): a new
      level of 3-5 runs left inside the last segment inflates its own yardstick.
    - "Run by run": every one of the m runs clears half the floor on the same side, and
      the run just before them does not clear the floor on that side (else the new
      level began earlier, and reporting its last m runs would put the change at the
      wrong run).
    - m <= confirm_points has no test to lean on: it is reported, provisional, when it
      passes run by run.
    - A longer m is reported when significant at alpha (not provisional; the longest
      such m wins). Failing that, a level of 3-5 runs that passes run by run is
      reported as provisional (where several do, the one with the smallest p, i.e. the
      best-placed start): a level seen for a few runs is often not yet significant in
      a short or noisy history, and flagging it is what gets the case rerun.
    """
    start = cps[-1] if cps else 0
    n = len(x)
    not_yet_significant = None
    for m in range(TAIL_MAX, 0, -1):
        if n - m - start < params.min_segment:
            continue
        new = x[n - m:]
        level = level_before(x[start:n - m], float(np.median(new)))
        scale = noise_sigma(x, [*cps, n - m]) if m > params.confirm_points else sigma
        base_floor = effect_floor(level, scale, params)
        floor = base_floor * (LONE_RUN_FACTOR if m == 1 else 1.0)
        shift = new - level
        if floor == 0 or abs(float(np.median(shift))) < floor:
            continue
        side = np.sign(np.median(shift))
        run_by_run = bool(np.all(side * shift >= floor / 2)) and side * (x[n - m - 1] - level) < base_floor
        if m <= params.confirm_points and not run_by_run:
            continue
        seg = x[start:]
        k = n - m - start
        z, r = split_z(seg, np.array([k]))
        p = corrected_p(split_raw_p(seg, k, float(z[0])), split_rho(r, k), TAIL_MAX)
        if m <= params.confirm_points:
            return n - m, p, level, True
        if p <= params.alpha:
            return n - m, p, level, False
        if run_by_run and (not_yet_significant is None or p < not_yet_significant[1]):
            not_yet_significant = (n - m, p, level, True)
    return not_yet_significant


def level_before(before: np.ndarray, new_median: float) -> float:
    """The level the newest runs are measured from: the median of the last LOCAL_RUNS
    runs of `before`, or of its last 2 x LOCAL_RUNS, whichever is nearer `new_median`.

    The short window is the drift guard (under a slow drift it lags least, so it is the
    nearer one); the long one is the more precise level where there is no drift, so a
    pair of noisy runs has to stand out from both."""
    recent = float(np.median(before[-LOCAL_RUNS:]))
    longer = float(np.median(before[-2 * LOCAL_RUNS:]))
    return recent if abs(new_median - recent) <= abs(new_median - longer) else longer
