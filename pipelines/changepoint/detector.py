"""Change points in one series of run-level summaries (e.g. nightly median latency).

The detector answers "did this series step to a new level, where, by how much, and how
sure are we?" for one univariate history. It is built for perf data: heavy tails, two
clock modes, single bad nights and night-to-night autocorrelation must not raise alarms;
a step that matters (a few percent, a few noise widths) must.

How it decides, in four stages:
1. Search: binary segmentation on ranks. In each segment the split with the largest
   standardised Mann-Whitney statistic is a candidate while it is significant after
   correcting for having searched all split positions (Bonferroni). Where the whole
   segment shows no significant split, the same is asked inside seeded sub-intervals
   (halves, quarters, ... overlapping by half; Bonferroni over the intervals too): a
   tent or an alternating sequence of levels has no strong single split overall, but
   each of its steps stands out locally. Ranks make the search blind to outlier size
   and tails. Autocorrelation is not corrected for here: it is a property of the
   noise, and is measured once the level changes are known.
2. Noise: the robust scale (1.4826 x MAD) and the lag-1 autocorrelation of the ranks,
   both from the residuals of the candidate segmentation, for the whole series (and
   again after pruning, see stage 3).
3. Prune: a change stays only if, between its two neighbouring segments, it is still
   significant (p corrected for the autocorrelation, long-run variance factor
   (1+rho)/(1-rho), and for the positions) and its shift clears both effect-size floors
   (relative and in robust noise units), measured between the segment medians and
   between the medians of the 10 runs either side (the drift guard). Between long
   segments, whose medians are precise, the noise-units floor shrinks (to half at most);
   the drift guard and the relative floor do not. The weakest failing change goes
   first, then its neighbours are re-measured (their segments grew), until every change
   passes. If the segmentation that survives shows more noise or autocorrelation than
   the candidates did (a pruned candidate had absorbed a slow wander), pruning starts
   over from the candidates with those estimates; the newest-runs test (stage 4) and
   the reported sigmas use the final ones.
4. Newest runs: the nightly question "did the last m runs (m <= 5) leave the recent
   level?" is asked with the position fixed in advance, so it needs no whole-series
   search correction. A new level of m runs is reported when significant at alpha;
   one that is not (yet) is reported as provisional when each of its runs clears the
   floors (so that the case is rerun and the change confirmed or cleared). Within the
   last `confirm_points` runs that is the only way it can be reported.

The public API is `DetectorParams`, `Change`, `detect`, `bh_adjust` and
`select_significant`, plus `measure_at`, `confirms` and `effect_floor` for following a
change already reported (pipelines.mining.regressions).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import rankdata

# 1.4826 x MAD estimates the standard deviation of normal noise (same constant as the
# Spark noise filter in pipelines.mining.noise, which cannot be imported without pyspark).
MAD_TO_SIGMA = 1.4826
# Autocorrelation estimated on a short segment is noisy; past 0.8 the variance factor
# (9x) would mostly reflect a missed change or a trend, not noise.
MAX_RHO = 0.8
# Exact rank-sum p-values when the shorter side has at most this many runs (and the
# segment at most EXACT_MAX_N): a new level seen for a few nights is exactly that case.
EXACT_MAX_SHORT = 8
EXACT_MAX_N = 400
# A shift must also show between the medians of this many runs either side of the
# change (and the newest runs are compared with this many runs before them), so that a
# slow drift cut into pieces does not read as a staircase of steps.
LOCAL_RUNS = 10
# A single newest run must clear the floors by this factor: one bad night is the most
# common false alarm of all, and a rerun confirms a real step the next night anyway.
LONE_RUN_FACTOR = 2.0
# The newest-runs test looks at the last 1..TAIL_MAX runs (a new level seen for up to
# 5 nights; past that, the whole-series search has the power to find it).
TAIL_MAX = 5
# Pruning starts over at most this many times with the noise re-measured on the
# changes that survived (see _prune).
REFITS = 3
# The noise-units floor (min_sigma) is set for a new level seen for this many runs.
TAIL_REF_RUNS = 4

Direction = Literal["regression", "improvement"]


@dataclass(frozen=True)
class DetectorParams:
    """The detector's knobs; the defaults are meant for every perf series, untuned.

    min_rel_change: smallest relative level shift worth reporting (0.02 = 2 %). Nightly
        medians of a stable GPU kernel wander by well under 1 %, and the promise is to
        catch 3 % steps: a 4-run median misses its level by ~0.6 noise widths, so the
        floor sits about one estimation error below the promise.
    min_sigma: smallest shift in robust noise units (1.4826 x MAD of the residuals from
        the segment medians), across the change (10 runs either side) and among the
        newest runs; between the medians of long segments it shrinks with their standard
        error, to min_sigma / 2 at most. 2.0 rather than 3 for the same reason: a
        promised 3-sigma step measured from 4 runs clears a 3-sigma floor only half the
        time (measured: 2.5 gave 77-86 % recall by the 4th run, 2.0 gave 85-93 %). False
        alarms are held down by alpha, which already accounts for autocorrelation and
        the search.
    alpha: largest p-value (autocorrelation- and search-corrected) of a kept change.
    min_segment: fewest runs in a confirmed segment; shorter bursts are not a level.
    confirm_points: a change starting within the last this-many runs is provisional (so
        is a new level of up to 5 newest runs that is not yet significant, see detect).
    higher_is_worse: True for latency-like metrics (up = regression), False for
        throughput-like ones.
    """

    min_rel_change: float = 0.02
    min_sigma: float = 2.0
    alpha: float = 0.001
    min_segment: int = 3
    confirm_points: int = 2
    higher_is_worse: bool = True

    def __post_init__(self) -> None:
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be >= 2, got {self.min_segment}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.min_rel_change < 0 or self.min_sigma < 0 or self.confirm_points < 0:
            raise ValueError("min_rel_change, min_sigma and confirm_points must be >= 0")


@dataclass(frozen=True)
class Change:
    """One detected level change.

    index: position (in the input, missing values included) of the first run at the new
        level. before/after: medians of the segments either side (for a change among the
        newest runs, before is the median of the 10 or 20 runs preceding it, see
        `_level_before`). rel_change: (after - before) / |before|. sigmas:
        |after - before| in robust noise units.
        p_value: two-sided, corrected for autocorrelation and for the split search.
        provisional: among the newest runs and not (yet) significant: within the last
        confirm_points runs, or a level of up to 5 runs that clears the floors run by
        run without reaching alpha. It asks for a rerun rather than a person.
    """

    index: int
    before: float
    after: float
    rel_change: float
    sigmas: float
    p_value: float
    direction: Direction
    provisional: bool


def detect(values, *, params: DetectorParams = DetectorParams()) -> list[Change]:
    """Return the level changes in `values`, ordered by index.

    `values` is one series in run order; NaN (a missing run) is skipped, and indices in
    the result still refer to positions in `values`. A series too short to hold two
    segments gives no change. Deterministic: same input, same output.
    """
    raw = np.asarray(values, dtype=float)
    if raw.ndim != 1:
        raise ValueError(f"detect expects one series (1-D), got shape {raw.shape}")
    kept = np.flatnonzero(np.isfinite(raw))
    x = raw[kept]
    n = len(x)
    if n < params.min_segment + 1:
        return []
    candidates = _search(x, params)
    cps, sigma, rho = _prune(x, candidates, params)
    bounds = [0, *cps, n]
    changes = []
    for i, cp in enumerate(cps):
        left, right = x[bounds[i]:cp], x[cp:bounds[i + 2]]
        changes.append(_describe(int(kept[cp]), float(np.median(left)), right, sigma,
                                 _fixed_split_pvalue(left, right, rho), cp >= n - params.confirm_points, params))
    tail = _tail_change(x, cps, sigma, params)
    if tail is not None:
        cp, p, level, provisional = tail
        changes.append(_describe(int(kept[cp]), level, x[cp:], sigma, p, provisional, params))
    return changes


# --- stage 1: search ---------------------------------------------------------------

def _split_z(seg: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardised Mann-Whitney z of seg[:k] vs seg[k:] for each k in ks (tie-corrected),
    and the within-segment ranks."""
    n = len(seg)
    r = rankdata(seg)
    _, counts = np.unique(seg, return_counts=True)
    tie = float(np.sum(counts**3 - counts)) / (n * (n - 1))
    var = ks * (n - ks) / 12.0 * ((n + 1) - tie)
    s = np.cumsum(r)[ks - 1] - ks * (n + 1) / 2.0
    return s / np.sqrt(np.maximum(var, 1e-12)), r  # var is 0 only if all tie (s = 0)


def _rho(r: np.ndarray, k: int) -> float:
    """Lag-1 autocorrelation of the ranks once the two segment means are removed,
    clipped to [0, MAX_RHO] (negative autocorrelation is not used to sharpen tests)."""
    e = r.astype(float).copy()
    e[:k] -= e[:k].mean()
    e[k:] -= e[k:].mean()
    den = float(np.dot(e, e))
    return float(np.clip(np.dot(e[1:], e[:-1]) / den, 0.0, MAX_RHO)) if den > 0 else 0.0


def _corrected_p(p_raw: float, rho: float, n_tests: int) -> float:
    """Two-sided p after the AR(1) variance factor (applied to the p's normal
    equivalent z), times the number of split positions searched (Bonferroni:
    conservative, since neighbouring splits are strongly correlated)."""
    # -ndtri(p/2), not ndtri(1 - p/2): below p ~ 1e-16, 1 - p/2 rounds to 1, z becomes
    # infinite and the correction would be skipped for exactly the strongest splits.
    z = float(-ndtri(max(p_raw, 1e-300) / 2.0)) if p_raw < 1.0 else 0.0
    z_eff = z / np.sqrt((1 + rho) / (1 - rho))
    return float(min(1.0, 2.0 * ndtr(-z_eff) * max(n_tests, 1)))


@lru_cache(maxsize=256)
def _rank_sum_counts(n: int, m: int) -> np.ndarray:
    """Number of m-subsets of the ranks 1..n with each rank sum (index = sum), as floats."""
    top = m * n
    counts = np.zeros((m + 1, top + 1))
    counts[0, 0] = 1.0
    for r in range(1, n + 1):  # add rank r to every (j-1)-subset: polynomial DP
        counts[1:, r:] = counts[1:, r:] + counts[:-1, :top + 1 - r]
    return counts[m]


def _split_raw_p(seg: np.ndarray, k: int, z: float) -> float:
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


def _best_split(seg: np.ndarray, min_segment: int) -> tuple[int, float] | None:
    """The most significant split of seg (index into seg, p corrected for the search
    over positions but not for autocorrelation), or None.

    Not for autocorrelation, because estimated here, from one split of a segment that
    may hold several changes, it mostly measures those other changes: their residuals
    stay on one side for long stretches. Corrected that way, a series with many steps
    (TCPD's well_log) was never split below its first level."""
    n = len(seg)
    if n < 2 * min_segment:
        return None
    ks = np.arange(min_segment, n - min_segment + 1)
    z, _ = _split_z(seg, ks)
    i = int(np.argmax(np.abs(z)))
    if z[i] == 0.0:
        return None
    k = int(ks[i])
    return k, _corrected_p(_split_raw_p(seg, k, float(z[i])), 0.0, len(ks))


def _seeded_intervals(n: int, shortest: int) -> list[tuple[int, int]]:
    """Seeded intervals (Kovacs et al., "Seeded binary segmentation", 2023) inside
    [0, n): at each scale, intervals of half the previous length, overlapping by half,
    down to `shortest` runs; the whole range itself is left out."""
    out = []
    length = n / 2.0
    while length >= shortest:
        count = int(np.ceil(2 * n / length)) - 1
        step = (n - length) / max(count - 1, 1)
        for i in range(count):
            lo = int(np.floor(i * step))
            out.append((lo, min(n, int(np.ceil(lo + length)))))
        length /= 2.0
    return sorted(set(out))


def _best_seeded_split(seg: np.ndarray, min_segment: int) -> tuple[int, float] | None:
    """The most significant split found inside any seeded sub-interval of seg (index
    into seg, p corrected for the positions searched in that interval and for the number
    of intervals), or None."""
    intervals = _seeded_intervals(len(seg), 4 * min_segment)
    best = None
    for lo, hi in intervals:
        found = _best_split(seg[lo:hi], min_segment)
        if found is not None and (best is None or found[1] < best[1]):
            best = (lo + found[0], found[1])
    if best is None:
        return None
    return best[0], min(1.0, best[1] * len(intervals))


def _search(x: np.ndarray, params: DetectorParams) -> list[int]:
    """Candidate changes: binary segmentation by significance alone (autocorrelation,
    the floors and the final alpha are applied in _prune). A segment without a
    significant split overall is searched once more in its seeded sub-intervals."""
    cps: list[int] = []
    stack = [(0, len(x))]
    while stack:
        a, b = stack.pop()
        found = _best_split(x[a:b], params.min_segment)
        if found is None or found[1] > params.alpha:
            found = _best_seeded_split(x[a:b], params.min_segment)
        if found is None or found[1] > params.alpha:
            continue
        cp = a + found[0]
        cps.append(cp)
        stack += [(a, cp), (cp, b)]
    return sorted(cps)


# --- stage 2: noise scale and pruning ------------------------------------------------

def _noise_sigma(x: np.ndarray, cps: list[int]) -> float:
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


def _noise_rho(x: np.ndarray, cps: list[int]) -> float:
    """Lag-1 autocorrelation of the noise: of each segment's ranks about their mean,
    pooled over the segments (pairs across a change left out), clipped to [0, MAX_RHO].
    Ranks, as in the tests, so that one wild run does not decide it."""
    bounds = [0, *cps, len(x)]
    lagged = total = 0.0
    for a, b in zip(bounds[:-1], bounds[1:]):
        e = rankdata(x[a:b])
        e -= e.mean()
        lagged += float(np.dot(e[1:], e[:-1]))
        total += float(np.dot(e, e))
    return float(np.clip(lagged / total, 0.0, MAX_RHO)) if total > 0 else 0.0


def _fixed_split_pvalue(left: np.ndarray, right: np.ndarray, rho: float | None = None) -> float:
    """Corrected p of the split between two adjacent segments, counting every position
    in their union as searched (the position was chosen from the data). rho: the
    noise's autocorrelation; None estimates it from these two segments."""
    seg = np.concatenate([left, right])
    k = len(left)
    z, r = _split_z(seg, np.array([k]))
    n_tests = max(len(seg) - 1, 1)
    return _corrected_p(_split_raw_p(seg, k, float(z[0])), _rho(r, k) if rho is None else rho, n_tests)


def _floor_ratio(left: np.ndarray, right: np.ndarray, sigma: float, params: DetectorParams) -> float:
    """How far the shift clears the stricter of the two floors (>= 1 passes).

    The shift is measured twice, between the two segments' medians and between the
    medians of the LOCAL_RUNS runs either side of the change, and the smaller ratio
    counts: a level change happens at its index, whereas a slow drift cut into pieces
    shows a large shift between segments but a small one across each cut (the drift
    guard). The drift guard is held to the full floors. Between the segment medians the
    floor in noise units shrinks as those medians grow precise (`_sigma_floor_scale`, at
    most to min_sigma / 2): a step seen for 100 runs either side is measured far more
    exactly than one seen for 4. The relative floor never shrinks.
    """
    before = float(np.median(left))
    pairs = ((left, right, _sigma_floor_scale(len(left), len(right))),
             (left[-LOCAL_RUNS:], right[:LOCAL_RUNS], 1.0))
    ratios = []
    for a, b, scale in pairs:
        shift = abs(float(np.median(b)) - float(np.median(a)))
        floors = (params.min_rel_change * abs(before), params.min_sigma * sigma * scale)
        ratios.append(min(shift / f if f > 0 else np.inf for f in floors) if shift > 0 else 0.0)
    return float(min(ratios))


def _sigma_floor_scale(n_before: int, n_after: int) -> float:
    """Scale of the noise-units floor between medians of n_before and n_after runs: the
    standard error of their difference relative to the nightly case min_sigma is set
    for (TAIL_REF_RUNS new runs against LOCAL_RUNS before), clipped to [0.5, 1]."""
    ref = 1.0 / TAIL_REF_RUNS + 1.0 / LOCAL_RUNS
    return float(np.clip(np.sqrt((1.0 / n_before + 1.0 / n_after) / ref), 0.5, 1.0))


def _prune(x: np.ndarray, candidates: list[int], params: DetectorParams) -> tuple[list[int], float, float]:
    """The candidates that survive pruning, with the noise scale and autocorrelation
    their tests used.

    Both are first measured on the candidate segmentation. Where pruning removes
    candidates that had cut a slow (autocorrelated) wander into levels, the surviving
    segmentation shows more noise, or more autocorrelation, than that: then pruning
    starts over from the candidates with the larger figures (REFITS times at most; they
    only grow, so the estimate errs towards fewer changes).
    """
    sigma, rho = _noise_sigma(x, candidates), _noise_rho(x, candidates)
    for _ in range(REFITS):
        cps = _prune_at(x, candidates, sigma, rho, params)
        sigma_refit, rho_refit = _noise_sigma(x, cps), _noise_rho(x, cps)
        if sigma_refit <= sigma and rho_refit <= rho:
            break
        sigma, rho = max(sigma, sigma_refit), max(rho, rho_refit)
    else:
        cps = _prune_at(x, candidates, sigma, rho, params)
    return cps, sigma, rho


def _prune_at(x: np.ndarray, cps: list[int], sigma: float, rho: float, params: DetectorParams) -> list[int]:
    """Drop changes, weakest first, until each passes both floors and alpha (p corrected
    for autocorrelation rho)."""
    cps = list(cps)
    while cps:
        bounds = [0, *cps, len(x)]
        worst, worst_score = None, np.inf
        for i, cp in enumerate(cps):
            left, right = x[bounds[i]:cp], x[cp:bounds[i + 2]]
            ratio = _floor_ratio(left, right, sigma, params)
            failing = ratio < 1.0 or _fixed_split_pvalue(left, right, rho) > params.alpha
            if failing and ratio < worst_score:
                worst, worst_score = i, ratio
        if worst is None:
            break
        del cps[worst]
    return cps


# --- stage 3: the newest runs ----------------------------------------------------------

def _tail_change(x: np.ndarray, cps: list[int], sigma: float,
                 params: DetectorParams) -> tuple[int, float, float, bool] | None:
    """A new level among the newest runs: (start index, p-value, level before,
    provisional), or None.

    This answers the nightly question "did the last m runs leave the recent level?" for
    m = 1..TAIL_MAX. The position is fixed in advance, so the rank test is corrected for
    the TAIL_MAX choices of m only, not for a search over the whole series.
    - The level before is the median of the (up to LOCAL_RUNS) runs preceding the m
      runs, within the last segment, so that slow drift does not read as a step; or of
      up to 2 x LOCAL_RUNS runs, whichever is nearer the new runs (`_level_before`).
    - Every m needs the median of its m runs to clear both floors (a lone run:
      LONE_RUN_FACTOR times the floors). For m > confirm_points the noise-units floor
      uses the noise with the m runs as a level of their own (`_noise_sigma`): a new
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
        level = _level_before(x[start:n - m], float(np.median(new)))
        scale = _noise_sigma(x, [*cps, n - m]) if m > params.confirm_points else sigma
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
        z, r = _split_z(seg, np.array([k]))
        p = _corrected_p(_split_raw_p(seg, k, float(z[0])), _rho(r, k), TAIL_MAX)
        if m <= params.confirm_points:
            return n - m, p, level, True
        if p <= params.alpha:
            return n - m, p, level, False
        if run_by_run and (not_yet_significant is None or p < not_yet_significant[1]):
            not_yet_significant = (n - m, p, level, True)
    return not_yet_significant


def _level_before(before: np.ndarray, new_median: float) -> float:
    """The level the newest runs are measured from: the median of the last LOCAL_RUNS
    runs of `before`, or of its last 2 x LOCAL_RUNS, whichever is nearer `new_median`.

    The short window is the drift guard (under a slow drift it lags least, so it is the
    nearer one); the long one is the more precise level where there is no drift, so a
    pair of noisy runs has to stand out from both."""
    recent = float(np.median(before[-LOCAL_RUNS:]))
    longer = float(np.median(before[-2 * LOCAL_RUNS:]))
    return recent if abs(new_median - recent) <= abs(new_median - longer) else longer


def _describe(index: int, before: float, right: np.ndarray, sigma: float, p: float,
              provisional: bool, params: DetectorParams) -> Change:
    after = float(np.median(right))
    shift = after - before
    rel = shift / abs(before) if before != 0 else float(np.sign(shift) * np.inf)
    worse = (shift > 0) == params.higher_is_worse
    return Change(index=index, before=before, after=after, rel_change=rel,
                  sigmas=abs(shift) / sigma if sigma > 0 else float("inf"), p_value=p,
                  direction="regression" if worse else "improvement", provisional=provisional)


def effect_floor(level: float, sigma: float, params: DetectorParams) -> float:
    """Smallest shift from `level` worth reporting: the stricter of the relative floor
    and the floor in robust noise units."""
    return max(params.min_rel_change * abs(level), params.min_sigma * sigma)


# --- a change known from an earlier look ---------------------------------------------

def measure_at(values, index: int, *, changes=(), params: DetectorParams = DetectorParams()) -> Change | None:
    """Re-measure a level change already known to start at position `index` of `values`.

    For tracking a reported change night after night, when the data grew since it was
    found. `changes` are the positions of the series' other known changes (they bound
    the segments). Positions and NaN handling are as in `detect`. before: median of up
    to LOCAL_RUNS runs before `index`, back to the previous change (the last good
    level); after: median of the runs from `index` to the next change; sigmas: in the
    robust noise of the series cut at every change; p_value: the split test between the
    two neighbouring segments, every position in them counted as searched. None when
    `index` is not a finite run or has no run before it.
    """
    known = _known_split(values, index, changes)
    if known is None:
        return None
    x, k, lo, hi, sigma = known
    left, right = x[lo:k], x[k:hi]
    return _describe(index, float(np.median(left[-LOCAL_RUNS:])), right, sigma, _fixed_split_pvalue(left, right),
                     k >= len(x) - params.confirm_points, params)


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
    return x, k, lo, hi, _noise_sigma(x, cps)


# --- many series at once -------------------------------------------------------------

def bh_adjust(pvalues) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order.

    q_i = min over j with p_j >= p_i of p_j * m / rank_j, capped at 1; rejecting every
    q <= q* controls the false discovery rate at q* for independent (or positively
    dependent) tests.
    """
    p = np.asarray(pvalues, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"bh_adjust expects a 1-D sequence of p-values, got shape {p.shape}")
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise ValueError("bh_adjust: every p-value must be a finite number in [0, 1]")
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    q = np.empty(m)
    q[order] = q_sorted
    return q


def select_significant(changes_by_series, q: float = 0.05) -> dict:
    """Keep, across a family of series, the changes whose BH q-value is <= q.

    `changes_by_series` maps a series key to the list of Change that `detect` returned
    for it; the result maps the same keys to the changes kept (possibly empty lists).
    Every change of every series is one test of the family.
    """
    keys = list(changes_by_series)
    flat = [(k, c) for k in keys for c in changes_by_series[k]]
    kept: dict = {k: [] for k in keys}
    if not flat:
        return kept
    qvals = bh_adjust([c.p_value for _, c in flat])
    for (k, c), qv in zip(flat, qvals):
        if qv <= q:
            kept[k].append(c)
    return kept
