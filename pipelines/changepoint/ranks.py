"""Rank tests for a level change at a split of one series: the standardised
Mann-Whitney statistic at every split position, exact rank-sum p-values for short
sides, and the corrections for autocorrelated noise and for searching positions.

Ranks make the tests blind to outlier size and heavy tails; the autocorrelation
correction inflates the variance by the AR(1) long-run factor (1 + rho) / (1 - rho).
Two magnitude tests may stand in where that correction holds the ranks back
(`fixed_split_pvalue`): the shift of medians, and the step by least squares on the
prewhitened runs (`ar1`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import rankdata

from pipelines.changepoint import ar1

# Autocorrelation estimated on a short segment is noisy; past 0.8 the variance factor
# (9x) would mostly reflect a missed change or a trend, not noise.
MAX_RHO = 0.8
# Exact rank-sum p-values when the shorter side has at most this many runs (and the
# segment at most EXACT_MAX_N): a new level seen for a few nights is exactly that case.
# At 8 there was a cliff: 9 runs wholly above 29 have exact p 1.2e-8 but normal p 7e-6,
# so a step found on its 8th night was lost on its 9th. A table costs at most 32 ms
# (400 runs, 20 short) and is cached.
EXACT_MAX_SHORT = 20
EXACT_MAX_N = 400


def split_z(seg: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardised Mann-Whitney z of seg[:k] vs seg[k:] for each k in ks (tie-corrected),
    and the within-segment ranks."""
    n = len(seg)
    r = rankdata(seg)
    _, counts = np.unique(seg, return_counts=True)
    tie = float(np.sum(counts**3 - counts)) / (n * (n - 1))
    var = ks * (n - ks) / 12.0 * ((n + 1) - tie)
    s = np.cumsum(r)[ks - 1] - ks * (n + 1) / 2.0
    return s / np.sqrt(np.maximum(var, 1e-12)), r  # var is 0 only if all tie (s = 0)


def split_rho(r: np.ndarray, k: int) -> float:
    """Lag-1 autocorrelation of the ranks once the two segment means are removed,
    clipped to [0, MAX_RHO] (negative autocorrelation is not used to sharpen tests)."""
    e = r.astype(float).copy()
    e[:k] -= e[:k].mean()
    e[k:] -= e[k:].mean()
    den = float(np.dot(e, e))
    return float(np.clip(np.dot(e[1:], e[:-1]) / den, 0.0, MAX_RHO)) if den > 0 else 0.0


def corrected_p(p_raw: float, rho: float, n_tests: int) -> float:
    """Two-sided p after the AR(1) variance factor (applied to the p's normal
    equivalent z), times the number of split positions searched (Bonferroni:
    conservative, since neighbouring splits are strongly correlated)."""
    return float(min(1.0, 2.0 * ndtr(-_z_after_rho(p_raw, rho)) * max(n_tests, 1)))


def _z_after_rho(p_raw: float, rho: float) -> float:
    """The normal equivalent z of a two-sided p, divided by the AR(1) long-run standard
    deviation factor sqrt((1 + rho) / (1 - rho))."""
    # -ndtri(p/2), not ndtri(1 - p/2): below p ~ 1e-16, 1 - p/2 rounds to 1, z becomes
    # infinite and the correction would be skipped for exactly the strongest splits.
    z = float(-ndtri(max(p_raw, 1e-300) / 2.0)) if p_raw < 1.0 else 0.0
    return z / float(np.sqrt((1 + rho) / (1 - rho)))


def searched_p(p_raw: float, rho: float, n: int, k_lo: int, k_hi: int) -> float:
    """Two-sided p of the largest standardised split statistic of a segment of n runs,
    searched over the split positions k_lo..k_hi, given the chosen split's raw p (after
    the AR(1) variance factor, as in `corrected_p`).

    Neighbouring splits share all but one run, so their statistics move together and
    Bonferroni over positions (`corrected_p`) overstates the search's cost by 3-10x
    at p ~ 1e-3 (measured on 40,000 independent 100-run series: 0.0011 of them reach
    |z| 4, Bonferroni says 0.0060). This uses Siegmund's approximation for the maximum
    of the standardised two-sample statistic (Siegmund 1988; James, James & Siegmund
    1987) with its correction for discrete positions:
        P(max |Z_k| > b) ~ 2 b phi(b) sum_k nu(b / sqrt(n t(1-t))) / (2 n t (1-t)),
    t = k / n; it errs high (0.0019 at that point), and is never taken above Bonferroni."""
    if p_raw >= 1.0:
        return 1.0
    k_lo, k_hi = max(k_lo, 1), min(k_hi, n - 1)
    count = max(k_hi - k_lo + 1, 1)
    z = _z_after_rho(p_raw, rho)
    bonferroni = 2.0 * ndtr(-z) * count
    if count < 2:
        return float(min(1.0, bonferroni))
    t = np.arange(k_lo, k_hi + 1) / n
    w = t * (1 - t)
    crossings = float(np.sum(_nu(z / np.sqrt(n * w)) / (2 * n * w)))
    return float(min(1.0, bonferroni, 2.0 * z * _phi(z) * crossings))


def _nu(x: np.ndarray) -> np.ndarray:
    """Siegmund's overshoot correction for a random walk watched at discrete steps
    (Siegmund & Yakir's closed-form approximation); 1 for a continuous path (x = 0)."""
    h = np.maximum(np.asarray(x, dtype=float), 1e-12) / 2
    return (ndtr(h) - 0.5) / h / (h * ndtr(h) + _phi(h))


def _phi(z):
    """The standard normal density."""
    return np.exp(-0.5 * np.square(z)) / np.sqrt(2 * np.pi)


@lru_cache(maxsize=1024)
def _rank_sum_counts(n: int, m: int) -> np.ndarray:
    """Number of m-subsets of the ranks 1..n with each rank sum (index = sum), as floats."""
    top = m * n
    counts = np.zeros((m + 1, top + 1))
    counts[0, 0] = 1.0
    for r in range(1, n + 1):  # add rank r to every (j-1)-subset: polynomial DP
        counts[1:, r:] = counts[1:, r:] + counts[:-1, :top + 1 - r]
    return counts[m]


def split_raw_p(seg: np.ndarray, k: int, z: float) -> float:
    """Two-sided Mann-Whitney p of seg[:k] vs seg[k:], exact when the shorter side is
    short and there are no ties (the normal approximation is far too conservative for
    a handful of extreme runs), else from the tie-corrected normal z."""
    n = len(seg)
    m = min(k, n - k)
    if m <= EXACT_MAX_SHORT and n <= EXACT_MAX_N and len(np.unique(seg)) == n:
        r = rankdata(seg)
        small = r[:k] if k == m else r[k:]
        counts = _rank_sum_counts(n, m)
        centre = m * (n + 1) / 2.0
        sums = np.arange(len(counts))
        extreme = np.abs(sums - centre) >= abs(float(small.sum()) - centre) - 1e-9
        return float(min(1.0, counts[extreme].sum() / counts.sum()))
    return float(min(1.0, 2.0 * ndtr(-abs(z))))


def shift_raw_p(left: np.ndarray, right: np.ndarray, sigma: float) -> float:
    """Two-sided p of the shift between the two segments' medians, in units of the
    standard error of that difference for noise of robust scale sigma (the median of n
    normal runs has standard error sqrt(pi / 2) sigma / sqrt(n)); not yet corrected for
    autocorrelation or positions.

    The magnitude counterpart of the rank test: once the two sides are wholly apart,
    ranks cannot grow more certain however far apart they are, so a 30-sigma step held
    for 17 runs is no more significant to them than a 3-sigma one. Under autocorrelated
    noise (variance factor up to 9) and a search over positions, that ceiling sat above
    alpha for steps of any size on a short side."""
    if sigma <= 0 or len(left) == 0 or len(right) == 0:
        return 1.0
    se = sigma * np.sqrt(np.pi / 2 * (1.0 / len(left) + 1.0 / len(right)))
    return float(min(1.0, 2.0 * ndtr(-abs(float(np.median(right)) - float(np.median(left))) / se)))


def fixed_split_pvalue(left: np.ndarray, right: np.ndarray, rho: float | None = None,
                       sigma: float | None = None) -> float:
    """Corrected p of the split between two adjacent segments, counting every position
    in their union as searched (the position was chosen from the data). rho: the
    noise's autocorrelation; None estimates it from these two segments. sigma: the
    noise's robust scale; given, the median-shift test (`shift_raw_p`, corrected alike)
    or the step by least squares on the prewhitened runs (`ar1.step_p`, which weighs
    the night of the step as AR(1) noise says it should) may win back what the
    autocorrelation correction took from the rank test, but never more: the p is never
    below the rank test's p for independent runs.

    Why that bound: the rank test is exact for independent runs of any law, whereas a
    shift of medians is only as good as its normal approximation, which a history with
    a second mode breaks (a burst of 3-10 slow nights moves a short segment's median by
    the whole mode gap; let through, such bursts were the most common false alarm). A
    step that autocorrelated noise cannot explain is one whose runs the ranks already
    set wholly apart, and whose shift dwarfs the noise: both tests then agree."""
    seg = np.concatenate([left, right])
    k = len(left)
    z, r = split_z(seg, np.array([k]))
    n = len(seg)
    rho = split_rho(r, k) if rho is None else rho
    raw = split_raw_p(seg, k, float(z[0]))
    p = searched_p(raw, rho, n, 1, n - 1)
    if sigma is not None and rho > 0:
        shift = searched_p(shift_raw_p(left, right, sigma), rho, n, 1, n - 1)
        # the step by least squares on the prewhitened runs, Bonferroni over positions
        # (its statistic is far less smooth over positions than a difference of means);
        # whitened by the differences at MAX_RHO, where the noise may be a random walk
        prewhitened = min(1.0, ar1.step_p(left, right, ar1.whitening_rho(rho, MAX_RHO), sigma) * (n - 1))
        p = min(p, max(min(shift, prewhitened), searched_p(raw, 0.0, n, 1, n - 1)))
    return p
