"""Least squares under AR(1) noise: a level step tested by generalised least squares
(prewhitening), the efficient test where night-to-night noise is autocorrelated.

Why not the difference of means with the long-run variance factor (1 + rho) / (1 - rho)
alone (`ranks`): under AR(1) noise most of a step's evidence is in the night it happens.
Each run is predicted from the one before, x_t - rho x_(t-1), and the step is the one
prediction error that is d where every other is noise of sd sigma sqrt(1 - rho^2); the
later runs add d (1 - rho) each. The long-run factor keeps only the later runs'
evidence. Simulated (known rho, alpha 0.005 after the search over positions, 300 draws
per cell): a 2-sigma step in the middle of 60 runs of rho 0.8 noise is found 0.58 of
the time by least squares on the prewhitened runs, 0.40 by the difference of means; at
rho 0.5 the two are level.

An estimated rho that reads low makes this test too eager (the prediction errors keep
some autocorrelation); one that reads high only costs power. So callers pass the larger
estimate where they have two, whiten with rho 1 (the differences) where the estimate
reached the cap on rho (`ranks.MAX_RHO`: past it the noise may be a random walk;
`whitening_rho`), never let it go below the rank test's p for independent runs, and read
its t on the fit's degrees of freedom (a quiet 38-run AR(1) history: p 5e-7 on the
normal tail, 6e-5 on the t).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import t as student


def _whiten(v: np.ndarray, rho: float) -> np.ndarray:
    """Prediction errors of a stationary AR(1) series (Prais-Winsten: the first run
    scaled by sqrt(1 - rho^2)), each with the innovation's variance."""
    return np.concatenate([np.sqrt(1.0 - rho * rho) * v[:1], v[1:] - rho * v[:-1]])


def last_coef_t(y: np.ndarray, design: np.ndarray, rho: float) -> tuple[float, float, int]:
    """(coefficient, t statistic, degrees of freedom) of the last column of `design`,
    fitted to y by least squares on the prewhitened runs and columns. rho 0 is
    ordinary least squares."""
    w = _whiten(y, rho)
    dw = np.column_stack([_whiten(design[:, j], rho) for j in range(design.shape[1])])
    coef, *_ = np.linalg.lstsq(dw, w, rcond=None)
    resid = w - dw @ coef
    df = max(len(y) - design.shape[1], 1)
    s = float(np.sqrt(resid @ resid / df))
    # pinv: at rho 1 the level column whitens to zeros (a random walk has no level)
    se = s * float(np.sqrt(np.linalg.pinv(dw.T @ dw)[-1, -1]))
    step = float(coef[-1])
    t = abs(step) / se if se > 0 else (np.inf if step != 0 else 0.0)
    return step, t, df


def step_p(left: np.ndarray, right: np.ndarray, rho: float, sigma: float) -> float:
    """Two-sided p of a level step between `left` and `right` (a level, and a step at
    the split) under AR(1) noise of autocorrelation rho, each run clipped to 4 sigma of
    its side's median (heavy tails, a second mode); not corrected for positions."""
    n = len(left) + len(right)
    if n < 4 or sigma <= 0:
        return 1.0
    y = np.concatenate([clip_to(left, sigma), clip_to(right, sigma)])
    design = np.column_stack([np.ones(n), np.arange(n) >= len(left)]).astype(float)
    _, t, df = last_coef_t(y, design, rho)
    return float(min(1.0, 2.0 * student.sf(t, df)))


def clip_to(v: np.ndarray, sigma: float) -> np.ndarray:
    """v with each run clipped to 4 sigma of v's median."""
    m = float(np.median(v))
    return np.clip(v, m - 4 * sigma, m + 4 * sigma)


def whitening_rho(rho: float, cap: float) -> float:
    """The rho to whiten with: the estimate below the cap; 1 (differences) at it, where
    the noise may be a random walk. Whitening with a rho above the true one only costs
    power (the later runs' share, d (1 - rho) each), whereas the cap itself, taken for the
    truth, under-corrects a random walk (a 300-run walk got a 1.4-sigma 'step')."""
    return rho if rho < cap else 1.0
