"""The noise a level change must stand out from, measured on the residuals of a
segmentation: its robust scale and its lag-1 autocorrelation."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from pipelines.changepoint.ranks import MAX_RHO

# 1.4826 x MAD estimates the standard deviation of normal noise. The one definition: the
# Spark outlier filter (pipelines.mining.outliers) imports it from here.
MAD_TO_SIGMA = 1.4826


def noise_sigma(x: np.ndarray, cps: list[int]) -> float:
    """Robust noise scale: 1.4826 x MAD of the residuals from each segment's median.

    Using the searched segmentation keeps real level shifts out of the noise estimate;
    the residuals keep the marginal (not the innovation) spread of autocorrelated noise,
    which is the spread a shift must stand out from.
    """
    bounds = [0, *cps, len(x)]
    resid = np.concatenate([x[a:b] - np.median(x[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(resid)))
    if sigma == 0.0:  # quantised data with most residuals exactly 0: fall back to the mean
        sigma = float(np.mean(np.abs(resid))) * np.sqrt(np.pi / 2)
    return sigma


def noise_rho(x: np.ndarray, cps: list[int]) -> float:
    """Lag-1 autocorrelation of the noise: of each segment's ranks about their mean,
    pooled over the segments (pairs across a change left out), corrected for its bias,
    clipped to [0, MAX_RHO]. Ranks, as in the tests, so that one wild run does not
    decide it.

    The lag-1 autocorrelation of n runs about their own mean reads low by about
    (1 + 3 rho) / n (Marriott & Pope 1954); pooled over k segments of N runs in all, by
    k (1 + 3 rho) / N, which `_unbiased` takes back. Uncorrected, Gaussian AR(1) noise
    of 0.7 (rank autocorrelation 0.68) read as 0.55 on 30 runs (0.61 on 60): a long-run
    variance factor of 3.4 instead of 5.3, under which a short history's wander could
    pass for steps."""
    bounds = [0, *cps, len(x)]
    lagged = total = 0.0
    for a, b in zip(bounds[:-1], bounds[1:]):
        e = rankdata(x[a:b])
        e -= e.mean()
        lagged += float(np.dot(e[1:], e[:-1]))
        total += float(np.dot(e, e))
    if total <= 0:
        return 0.0
    return float(np.clip(_unbiased(lagged / total, len(bounds) - 1, len(x)), 0.0, MAX_RHO))


def _unbiased(r: float, segments: int, runs: int) -> float:
    """r + bias, bias = segments (1 + 3 rho) / runs solved for rho; r itself where the
    segments are too short for the first-order correction (under 8 runs on average)."""
    share = segments / runs
    return r if share > 1 / 8 else (r + share) / (1 - 3 * share)
