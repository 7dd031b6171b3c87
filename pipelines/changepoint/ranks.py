"""Rank tests for a level change at a split of one series: the standardised
Mann-Whitney statistic at every split position, exact rank-sum p-values for short
sides, and the corrections for autocorrelated noise and for searching positions.

Ranks make the tests blind to outlier size and heavy tails; the autocorrelation
correction inflates the variance by the AR(1) long-run factor (1 + rho) / (1 - rho).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import rankdata

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
    # -ndtri(p/2), not ndtri(1 - p/2): below p ~ 1e-16, 1 - p/2 rounds to 1, z becomes
    # infinite and the correction would be skipped for exactly the strongest splits.
    z = float(-ndtri(max(p_raw, 1e-300) / 2.0)) if p_raw < 1.0 else 0.0
    z_eff = z / np.sqrt((1 + rho) / (1 - rho))
    return float(min(1.0, 2.0 * ndtr(-z_eff) * max(n_tests, 1)))


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


def fixed_split_pvalue(left: np.ndarray, right: np.ndarray, rho: float | None = None) -> float:
    """Corrected p of the split between two adjacent segments, counting every position
    in their union as searched (the position was chosen from the data). rho: the
    noise's autocorrelation; None estimates it from these two segments."""
    seg = np.concatenate([left, right])
    k = len(left)
    z, r = split_z(seg, np.array([k]))
    n_tests = max(len(seg) - 1, 1)
    return corrected_p(split_raw_p(seg, k, float(z[0])), split_rho(r, k) if rho is None else rho, n_tests)
