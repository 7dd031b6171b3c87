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
# compare()'s defaults, named so that a batched comparison (pipelines.query.ab) uses the same.
CONFIDENCE, N_BOOT, SEED = 0.99, 2000, 0


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


def compare(a, b, *, alpha: float = 0.01, tolerance: float = 0.02, confidence: float = CONFIDENCE,
            n_boot: int = N_BOOT, seed: int = SEED) -> Comparison:
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
    return Comparison(verdict=verdict_of(p, lo, hi, alpha=alpha, tolerance=tolerance), ratio=ratio, ci_low=lo,
                      ci_high=hi, p_value=p, test=TEST_NAME, n_a=len(xa), n_b=len(xb))


def verdict_of(p: float, lo: float, hi: float, *, alpha: float, tolerance: float) -> Verdict:
    """The verdict for a rank-test p-value and a CI [lo, hi] of median(B)/median(A)."""
    upper, lower = 1 + tolerance, 1 / (1 + tolerance)
    if p < alpha and lo > upper:
        return "slower"
    if p < alpha and hi < lower:
        return "faster"
    if lo >= lower and hi <= upper:
        return "same"
    return "ambiguous"


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
    ma, mb = bootstrap_medians(xa, n_boot, rng), bootstrap_medians(xb, n_boot, rng)
    ratios = mb / np.where(ma > 0, ma, np.nan)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.nanpercentile(ratios, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_medians(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of n_boot bootstrap resamples of x, drawn without building them.

    A resample of n values is x_sorted[floor(n * U_i)] for n uniforms U_i, so its j-th
    smallest value is x_sorted[floor(n * U_(j))]. The k-th smallest of n uniforms is
    Beta(k, n + 1 - k), and the next one above it is U_(k) + (1 - U_(k)) Beta(1, n - k).
    The medians so drawn have exactly the distribution of resampled medians, in O(n_boot)
    instead of O(n_boot x n) time and memory (2,000 resamples of 100,000 rerun samples
    were 1.5 GiB).
    """
    xs = np.sort(np.asarray(x, dtype=float))
    lower, upper = bootstrap_median_ranks(len(xs), n_boot, rng)
    if upper is None:
        return xs[lower]
    return (xs[lower] + xs[upper]) / 2


def bootstrap_median_ranks(n: int, n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """bootstrap_medians as positions in the sorted samples: resample i's median is
    x_sorted[lower[i]] for odd n, the mean of x_sorted[lower[i]] and x_sorted[upper[i]]
    for even n (upper is None for odd n). The draws depend on n alone, so sample sets of
    one size can share them."""
    k = (n + 1) // 2  # rank (1-based) of the median, or of the lower middle for even n
    u = rng.beta(k, n + 1 - k, n_boot)
    lower = np.minimum((u * n).astype(np.int64), n - 1)
    if n % 2 == 1:
        return lower, None
    u_next = u + (1 - u) * rng.beta(1, n - k, n_boot)
    return lower, np.minimum((u_next * n).astype(np.int64), n - 1)
