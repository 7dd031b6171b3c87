"""Stage 5: level shifts in series that wander.

The search and pruning (stages 1-3) test levels against noise that is stationary around
them, and correct for autocorrelation by the AR(1) long-run variance factor, capped at
MAX_RHO. Where the noise wanders like a random walk (an economic series, a part heating up
over weeks, a cumulative counter), that cap is always hit, the factor is 9, and no step is
significant however abrupt it is: the series has no level for a step to leave.

Such a series is better described by its increments, x[t] - x[t-1]: there the wander is
ordinary noise and a level shift is one increment (or a few consecutive ones, same sign)
far outside the spread of the increments around it, after which the series does not
return. That is this stage's test, run only on series that wander (`wanders`); a
stationary perf history, with or without its changes, does not reach it.

- Spread: the median and 1.4826 x MAD of the increments within WINDOW on either side,
  the increment itself and its neighbours left out (a jump spread over two runs must not
  widen its own yardstick). The median is the local trend.
- Significance: the increment's deviation from the local trend in those units, Gaussian
  two-sided p times the number of increments (Bonferroni), at most strict_alpha. Consecutive
  significant increments of the same sign are one jump.
- It must leave a level and hold the new one: at least min_segment runs since the
  previous significant increment (else it is the return of a spike), and over the
  LOCAL_RUNS runs after it (up to the next jump, min_segment at least) the median of the
  series with the local trend removed stays at least half the jump away from the run
  before it, on the jump's side. A spike that reverts, or a payday that decays, is not a
  new level.
- It must not be seasonal: where the increments repeat with a period (their
  autocorrelation at some lag between 2 and 24 exceeds SEASONAL_ACF), a jump whose like
  (same sign, at least half the size) is seen one period earlier or later is the season.
- The relative floor applies to the jump's size; the noise-units floor is the test itself.
- Series whose increments are mostly exactly zero (quantised or held values) are left to
  stages 1-4: the MAD of such increments measures the quantisation, not the noise.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from pipelines.changepoint.model import LOCAL_RUNS, DetectorParams
from pipelines.changepoint.noise import MAD_TO_SIGMA

# A series wanders when the robust spread of its increments is below this fraction of
# the robust noise around its levels. Stationary noise with lag-1 autocorrelation rho
# gives sqrt(2 (1 - rho)): 1.41 for independent runs, 1 at rho = 0.5; this is rho = 0.7,
# between the perf histories' worst (AR(1) 0.5) and MAX_RHO (0.8), where the AR(1)
# correction stops being a description of the noise.
WANDER_RATIO = float(np.sqrt(2 * (1 - 0.95)))
# Increments either side that set a jump's local trend and spread.
WINDOW = 2 * LOCAL_RUNS
# Increments repeat with a period when their autocorrelation at that lag exceeds this.
SEASONAL_ACF = 0.5
SEASONAL_MAX_LAG = 24
# More than this share of increments exactly zero: quantised or held values.
MAX_ZERO_SHARE = 0.25


def wanders(x: np.ndarray, sigma: float) -> bool:
    """Does the series wander (increments small next to the noise around its levels)?"""
    d = np.diff(x)
    if len(d) < 2 or sigma <= 0:
        return False
    spread = MAD_TO_SIGMA * float(np.median(np.abs(d - np.median(d))))
    return spread < WANDER_RATIO * sigma


def jumps(x: np.ndarray, params: DetectorParams) -> list[tuple[int, float, float]]:
    """Level shifts of a wandering series: (first run at the new level, p-value, level
    just before the jump) for each, by position. See the module docstring."""
    n = len(x)
    d = np.diff(x)
    m = len(d)
    if m < 2 * params.min_segment or np.mean(d == 0) > MAX_ZERO_SHARE:
        return []
    trend, dev, z = _local_deviations(d)
    p = np.minimum(1.0, 2.0 * ndtr(-np.abs(z)) * m)
    flagged = p <= params.strict_alpha
    period = _season(d)
    out = []
    level_since = 0  # first run of the level the next jump leaves
    i = 0
    while i < m:
        if not flagged[i]:
            i += 1
            continue
        j = i  # merge the run of same-sign significant increments i..j
        while j + 1 < m and flagged[j + 1] and np.sign(z[j + 1]) == np.sign(z[i]):
            j += 1
        first, last = i, j
        i = j + 1
        since, level_since = level_since, last + 1
        if first + 1 - since < params.min_segment:  # no level to leave: the end of a spike
            continue
        size = float(dev[first:last + 1].sum())
        later = np.flatnonzero(flagged[last + 1:])
        stop = min(n, last + 1 + LOCAL_RUNS, last + 2 + int(later[0]) if len(later) else n)
        if stop - (last + 1) < params.min_segment:
            continue
        detrended = x - trend[first] * np.arange(n)
        held = float(np.median(detrended[last + 1:stop])) - detrended[first]
        if held * size <= 0 or abs(held) < 0.5 * abs(size):
            continue
        if abs(size) < params.min_rel_change * abs(x[first]):
            continue
        if period and _recurs(dev, first, period, size, float(np.abs(dev[first:last + 1]).max())):
            continue
        out.append((first + 1, float(p[first:last + 1].min()), float(x[first])))
    return out


def _local_deviations(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per increment: the local trend (median of the increments within WINDOW either
    side, itself and its neighbours left out), the deviation from it, and that deviation
    in units of the local robust spread (0 where the spread is 0)."""
    m = len(d)
    trend, z = np.zeros(m), np.zeros(m)
    for i in range(m):
        lo, hi = max(0, i - WINDOW), min(m, i + WINDOW + 1)
        w = np.concatenate([d[lo:max(lo, i - 1)], d[min(hi, i + 2):hi]])
        if len(w) == 0:
            continue
        c = float(np.median(w))
        s = MAD_TO_SIGMA * float(np.median(np.abs(w - c)))
        if s == 0.0:
            s = float(np.mean(np.abs(w - c))) * np.sqrt(np.pi / 2)
        trend[i] = c
        z[i] = (d[i] - c) / s if s > 0 else 0.0
    return trend, d - trend, z


def _season(d: np.ndarray) -> int | None:
    """The lag (2..SEASONAL_MAX_LAG, at most a third of the series) at which the
    increments are most autocorrelated, if above SEASONAL_ACF."""
    c = d - np.median(d)
    best, best_acf = None, SEASONAL_ACF
    for lag in range(2, min(SEASONAL_MAX_LAG + 1, len(d) // 3)):
        a, b = c[lag:], c[:-lag]
        den = float(np.sqrt(np.dot(a, a) * np.dot(b, b)))
        acf = float(np.dot(a, b)) / den if den > 0 else 0.0
        if acf > best_acf:
            best, best_acf = lag, acf
    return best


def _recurs(dev: np.ndarray, i: int, period: int, size: float, largest: float) -> bool:
    """Is a like deviation (same sign, at least half the largest of the jump's) seen one
    period before or after increment i?"""
    return any(0 <= k < len(dev) and dev[k] * size > 0 and abs(dev[k]) >= 0.5 * largest
               for k in (i - period, i + period))
