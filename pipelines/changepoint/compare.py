"""Is run B of a case faster, slower or the same as run A? (two sets of samples)

In the spirit of nvbench's compare and Google benchmark's U test: a rank test says
whether the two sample sets differ at all, the ratio of medians with a bootstrap
confidence interval says by how much, and a relative tolerance says what is too small
to matter. Samples are time-like: larger = slower.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import mannwhitneyu

Verdict = Literal["faster", "slower", "same", "ambiguous"]
TEST_NAME = "mann-whitney-u (two-sided)"


@dataclass(frozen=True)
class Comparison:
    """B relative to A.

    verdict: "slower"/"faster" when the difference is significant at alpha and the whole
        CI of the median ratio lies beyond the tolerance; "same" when the whole CI lies
        within the tolerance; otherwise "ambiguous" (too few or too noisy samples).
    ratio: median(B) / median(A); ci_low/ci_high: its bootstrap percentile interval.
    """

    verdict: Verdict
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    n_a: int
    n_b: int


def compare(a, b, *, alpha: float = 0.01, tolerance: float = 0.02, confidence: float = 0.99,
            n_boot: int = 2000, seed: int = 0) -> Comparison:
    """Compare samples b against samples a (positive values, larger = slower).

    tolerance: relative change treated as no change (0.02 = ratios within [1/1.02, 1.02]).
    Deterministic for a given seed. Non-finite samples are dropped; each side needs at
    least 2 finite samples.
    """
    xa = _finite(a, "a")
    xb = _finite(b, "b")
    if np.median(xa) <= 0:
        raise ValueError("compare: median of a must be > 0 to form a ratio")
    p = float(mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    ratio = float(np.median(xb) / np.median(xa))
    lo, hi = _bootstrap_ratio_ci(xa, xb, confidence, n_boot, seed)
    upper, lower = 1 + tolerance, 1 / (1 + tolerance)
    if p < alpha and lo > upper:
        verdict: Verdict = "slower"
    elif p < alpha and hi < lower:
        verdict = "faster"
    elif lo >= lower and hi <= upper:
        verdict = "same"
    else:
        verdict = "ambiguous"
    return Comparison(verdict=verdict, ratio=ratio, ci_low=lo, ci_high=hi, p_value=p,
                      test=TEST_NAME, n_a=len(xa), n_b=len(xb))


def _finite(values, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if len(x) < 2:
        raise ValueError(f"compare: sample set {name} needs >= 2 finite values, got {len(x)}")
    return x


def _bootstrap_ratio_ci(xa: np.ndarray, xb: np.ndarray, confidence: float, n_boot: int,
                        seed: int) -> tuple[float, float]:
    """Percentile bootstrap CI of median(B)/median(A), resampling each side separately."""
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(xa, size=(n_boot, len(xa))), axis=1)
    mb = np.median(rng.choice(xb, size=(n_boot, len(xb))), axis=1)
    ratios = mb / np.where(ma > 0, ma, np.nan)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.nanpercentile(ratios, [tail, 100 - tail])
    return float(lo), float(hi)
