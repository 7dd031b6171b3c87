"""Change points in one series of run-level summaries (e.g. nightly median latency).

The detector answers "did this series step to a new level, where, by how much, and how
sure are we?" for one univariate history. It is built for perf data: heavy tails, two
clock modes, single bad nights and night-to-night autocorrelation must not raise alarms;
a step that matters (a few percent, a few noise widths) must.

How it decides, in five stages:
1. Search: binary segmentation on ranks. In each segment the split with the largest
   standardised Mann-Whitney statistic is a candidate while it is significant after
   correcting for having searched all split positions (Siegmund's approximation for
   the largest of the correlated split statistics, `ranks.searched_p`; on independent
   series of 30, 60 and 200 runs a corrected p of 0.01 was reached by 0.95 %, 0.86 %
   and 1.03 % of them, where Bonferroni over positions overstated the search's cost
   3-10 fold). Where the whole segment shows no significant split, the same is asked
   inside seeded sub-intervals (halves, quarters, ... overlapping by half; Bonferroni
   over the intervals too): a tent or an alternating sequence of levels has no strong
   single split overall, but each of its steps stands out locally. Ranks make the search blind to outlier size
   and tails; a candidate is then moved to the split where cutting the 10 runs either
   side gains most in absolute deviation (ranks say that a change is there, magnitudes
   place it; `search.refine`).
   Autocorrelation is not corrected for here: it is a property of the noise, and is
   measured once the level changes are known.
2. Noise: the robust scale (1.4826 x MAD) and the lag-1 autocorrelation of the ranks
   (corrected for the bias of short segments), both from the residuals of the
   candidate segmentation, for the whole series (and again after pruning, see stage 3).
3. Prune: a change stays only if, between its two neighbouring segments, it is still
   significant (p corrected for the autocorrelation, long-run variance factor
   (1+rho)/(1-rho), and for the positions; where that correction holds back ranks that
   are wholly apart, the shift of the medians in standard errors may stand in for
   them, never beyond the ranks' p for independent runs, and so may the step by least
   squares on the prewhitened runs, which weighs the night of the step as AR(1) noise
   says it should (`ar1`): `fixed_split_pvalue`; not in a series that wanders) and its
   shift clears both effect-size floors
   (relative and in robust noise units), measured between the segment medians and
   between the medians of the 10 runs either side (the drift guard). Between long
   segments, whose medians are precise, the noise-units floor shrinks (to half at most);
   the drift guard and the relative floor do not. A change that fails the floors but
   is significant at alpha is kept on the measured floors (0.2 %, 1 robust sigma) where
   both its segments hold 10 runs or more and its step, net of a slope fitted across
   it, is significant by itself (`_measured_step`: a level change, not a drift cut in
   two; not in a series that wanders). A change kept only when that step is not
   asked to be significant is reported as gradual (`_gradual_changes`, a pruning of
   its own): the level moved, but the runs cannot tell a step at this run from a drift
   across the runs either side. The weakest failing change goes
   first, then its neighbours are re-measured (their segments grew), until every change
   passes. If the segmentation that survives shows more noise or autocorrelation than
   the candidates did (a pruned candidate had absorbed a slow wander), pruning starts
   over from the candidates with those estimates; the newest-runs test (stage 4) and
   the reported sigmas use the final ones.
4. Newest runs: the nightly question "did the last m runs (m <= 5) leave the recent
   level?" is asked with the position fixed in advance, so it needs no whole-series
   search correction. A new level of m runs is reported when significant at
   strict_alpha (0.001: these runs are asked again every night);
   one that is not (yet) is reported as provisional when each of its runs clears the
   floors (a level of 4-5 runs may spare one: a slow night or an outlier), so that the
   case is rerun and the change confirmed or cleared. Within the last `confirm_points`
   runs that is the only way it can be reported (unless they end a longer young level
   whose spared run is explained by the history's slow side, see `tail_change`). A
   level of 6-10 runs that the search has not confirmed yet stays reported, provisional.

Between stages 3 and 4, a history with a second mode (slow nights, all on one side:
`modes.second_mode_runs`) is searched and pruned once more on its main mode's runs
alone; a change found there in the body, more than LOCAL_RUNS runs from every change
already kept, is reported with the main mode's levels and p-value. The slow nights take
the top ranks on both sides of a small step and dilute the rank tests; without them a
2-sigma step of the main mode was found in 19 of 30 histories instead of 4.

This module holds stage 3 and the follow-up of a known change; stage 1 is in
`search`, the rank tests in `ranks`, the noise estimates in `noise`, stage 4 in `newest`, stage 5 in
`jumps`, the parameters and result type in `model`, a change already reported followed
as its history grows in `known`, and family-wide FDR control in `fdr`. The public API (from
`pipelines.changepoint`) is `DetectorParams`, `Change`, `detect`, `bh_adjust` and
`select_significant`, plus `measure_at`, `confirms` and `effect_floor` for following a
change already reported (pipelines.mining.regressions).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from pipelines.changepoint import ar1
from pipelines.changepoint.jumps import jumps, wanders
from pipelines.changepoint.model import LOCAL_RUNS, Change, DetectorParams, describe
from pipelines.changepoint.modes import second_mode_runs
from pipelines.changepoint.newest import TAIL_MAX, tail_change
from pipelines.changepoint.noise import noise_rho, noise_sigma
from pipelines.changepoint.ranks import MAX_RHO, fixed_split_pvalue
from pipelines.changepoint.search import search

# Pruning starts over at most this many times with the noise re-measured on the
# changes that survived (see _prune).
REFITS = 3
# A candidate whose shift clears the floors this many times over stays in the noise's
# segmentation when pruning starts over (`_strong_candidates`).
STRONG_RATIO = 3.0
# The noise-units floor (min_sigma) is set for a new level seen for this many runs.
TAIL_REF_RUNS = 4
# A change under the default floors may be kept on the measured floors
# (`_measured_step`) only between segments of at least this many runs each ...
MEASURED_RUNS = 10
# ... when its step net of a common local slope, fitted to up to STEP_RUNS runs either
# side, is at least STEP_Z standard errors (autocorrelation-corrected) and half the
# measured floor: a level change, not a slow drift cut in two. The changes kept when
# that z is not asked of them (only the half floor) are reported as gradual.
STEP_RUNS = 60
STEP_Z = 3.0


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
    candidates = search(x, params)
    # A series that wanders is left to stage 5's increments; the shift test of stage 3
    # assumes noise with a level to wander about (AR(1), rho <= MAX_RHO).
    # It wanders when it does about the changes kept on the default floors and about
    # those kept on the measured floors too: an unreported 1 % step in 0.1 % noise
    # inflates the first noise estimate (and reads as a wander), while the measured
    # path's pruning, re-measuring the noise in another order, can inflate the second
    # (TCPD's brent_spot lost its three changes to stage 5).
    # The question is asked about the changes kept at strict_alpha: a random walk has
    # splits at p 0.001-0.005, and one more cut kept at alpha shrank its noise estimate
    # until it no longer read as a wander (a walk with one 25-sigma jump got a second,
    # false change).
    strict = replace(params, alpha=params.strict_alpha)
    sigma = _prune(x, candidates, strict)[1]
    by_shift = not wanders(x, sigma) or not wanders(x, _prune(x, candidates, strict, measured=False)[1])
    if by_shift:
        cps, sigma, rho = _prune(x, candidates, params)
        gradual, g_sigma = _gradual_changes(x, candidates, cps, params)
    else:  # no measured steps either: they assume a level to wander about
        cps, sigma, rho = _prune(x, candidates, params, by_shift=False, measured=False)
        gradual, g_sigma = {}, sigma
    found = _wandering_jumps(x, cps, sigma, params)
    main = _main_mode_changes(x, cps, params) if by_shift else {}
    bounds = [0, *sorted([*cps, *found, *main]), n]
    tail = tail_change(x, bounds[1:-1], sigma, params, prewhitened=by_shift)
    if tail is not None:
        earlier = _before_young_level(x, bounds[-2], tail[0], params)
        if earlier:
            bounds = sorted([*bounds, *earlier])
            tail = tail_change(x, bounds[1:-1], sigma, params, prewhitened=by_shift) or tail
    changes = []
    for i, cp in enumerate(bounds[1:-1]):
        left, right = x[bounds[i]:cp], x[cp:bounds[i + 2]]
        if cp in found:
            p, before = found[cp]
            changes.append(describe(int(kept[cp]), before, right, sigma, p, False, params))
            continue
        if cp in main:
            p, before, after = main[cp]
            changes.append(describe(int(kept[cp]), before, after, sigma, p, False, params))
            continue
        changes.append(describe(int(kept[cp]), float(np.median(left)), right, sigma,
                                 fixed_split_pvalue(left, right, rho, sigma if by_shift else None),
                                 cp >= n - params.confirm_points, params))
    if tail is not None:
        cp, p, level, provisional = tail
        changes.append(describe(int(kept[cp]), level, x[cp:], sigma, p, provisional, params))
    for cp, (p, before, after) in gradual.items():
        if all(abs(cp - b) > LOCAL_RUNS // 2 for b in bounds[1:-1]):
            changes.append(describe(int(kept[cp]), before, after, g_sigma, p, False, params, gradual=True))
    return sorted(changes, key=lambda c: c.index)


def _before_young_level(x: np.ndarray, start: int, young: int, params: DetectorParams) -> list[int]:
    """Changes between the last kept change (or the first run), `start`, and a young
    level among the newest runs starting at `young`: searched and pruned (stages 1-3)
    on those runs alone.

    A large new level among the last few runs sits at the end of the last segment, and
    with it the segment has no clean split: a 5-sigma step 17 runs before a 15-sigma
    one 4 runs from the end was never a candidate (ranks either side of any split were
    mixed by the young level). The young level's runs are not part of the question."""
    if young - start < 2 * params.min_segment + 1:
        return []
    seg = x[start:young]
    cps, _, _ = _prune(seg, search(seg, params), params)
    return [start + c for c in cps]


def _main_mode_changes(x: np.ndarray, cps: list[int],
                       params: DetectorParams) -> dict[int, tuple[float, float, np.ndarray]]:
    """Stages 1-3 once more, on the runs at the main mode of a history that has a second
    mode (`modes.second_mode_runs`): position -> (p-value, level before, runs after, all
    at the main mode) of each change found there in the history's body (before the
    newest TAIL_MAX runs, which stage 4 asks about) and more than LOCAL_RUNS runs from
    every change kept on all runs (a large step moves the running median late, and its
    first runs read as the second mode: it must not be found twice)."""
    slow = second_mode_runs(x, cps)
    if slow is None:
        return {}
    at_main = np.flatnonzero(~slow)
    xm = x[at_main]
    if len(xm) < 2 * params.min_segment + 1:
        return {}
    found, sigma, rho = _prune(xm, search(xm, params), params)
    bounds = [0, *found, len(xm)]
    out = {}
    for i, c in enumerate(found):
        cp = int(at_main[c])
        if cp >= len(x) - TAIL_MAX or any(abs(cp - k) <= LOCAL_RUNS for k in cps):
            continue
        left, right = xm[bounds[i]:c], xm[c:bounds[i + 2]]
        out[cp] = (fixed_split_pvalue(left, right, rho, sigma), float(np.median(left)), right)
    return out


def _gradual_changes(x: np.ndarray, candidates: list[int], cps: list[int],
                     params: DetectorParams) -> tuple[dict[int, tuple[float, float, np.ndarray]], float]:
    """Level changes that the runs cannot tell from a drift (Change.gradual): position ->
    (p-value, level before, runs after), and the noise sigma they were measured in.

    They are the changes that pruning keeps on the measured floors when the step net of
    a local slope is not asked to be significant (`_measured_step` without its
    drift_guard, only at least half the floor), more than LOCAL_RUNS / 2 runs from every
    change `cps` kept with it. A separate pruning, so that they change nothing about the
    steps: kept among them, they cut a wandering level into a staircase whose treads then
    passed as steps (a sine of 1.5-4 noise widths: 6.9 steps per 1,000 nights, against
    1.6). Neighbours in that pruning that move the same way with no step between them
    are one gradual change, from the first one's level before to the last one's level
    after (a straight drift of 10 noise widths over 200 runs was six of them); its
    p-value is the smallest of theirs.

    None where the noise's autocorrelation about that pruning's segments reached
    MAX_RHO: such noise may be a random walk, whose level drifts all the time (a
    300-run walk had a gradual change of 5 noise widths). About the steps alone the
    figure is no guide: a straight drift, not cut, reads as autocorrelation too."""
    if set(candidates) <= set(cps):  # every candidate is a step already
        return {}, 0.0
    relaxed, sigma, rho = _prune(x, candidates, params, drift_guard=False)
    if rho >= MAX_RHO:
        return {}, sigma
    bounds = [0, *relaxed, len(x)]
    out: dict[int, tuple[float, float, np.ndarray]] = {}
    start = None  # first position of the gradual change being extended
    for i, g in enumerate(relaxed):
        left, right = x[bounds[i]:g], x[g:bounds[i + 2]]
        if (any(abs(g - c) <= LOCAL_RUNS // 2 for c in cps)
                or _floor_ratio(left, right, sigma, params) >= 1.0):  # a step, not a drift-guard matter
            start = None
            continue
        p = fixed_split_pvalue(left, right, rho, sigma)
        before = float(np.median(left))
        up = np.median(right) > before
        if (start is not None and (np.median(out[start][2]) > out[start][1]) == up
                and not any(relaxed[i - 1] < c < g for c in cps)):
            p0, level, _ = out[start]
            out[start] = (min(p0, p), level, right)
        else:
            start = g
            out[g] = (p, before, right)
    return out, sigma


def _wandering_jumps(x: np.ndarray, cps: list[int], sigma: float,
                     params: DetectorParams) -> dict[int, tuple[float, float]]:
    """Stage 5 (`jumps`), for a series that wanders: position -> (p-value, level
    before) of each jump not within LOCAL_RUNS / 2 runs of a change stages 1-3 kept."""
    if not wanders(x, sigma):
        return {}
    return {cp: (p, before) for cp, p, before in jumps(x, params)
            if all(abs(cp - c) > LOCAL_RUNS // 2 for c in cps)}


# --- stage 3: pruning (stage 2, the noise, is measured in pipelines.changepoint.noise) -

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


def _prune(x: np.ndarray, candidates: list[int], params: DetectorParams,
           by_shift: bool = True, measured: bool = True, drift_guard: bool = True) -> tuple[list[int], float, float]:
    """The candidates that survive pruning, with the noise scale and autocorrelation
    of the series (what the newest-runs test and the reported sigmas use).

    Both are first measured on the candidate segmentation. Where pruning removes
    candidates that had cut a slow (autocorrelated) wander into levels, the surviving
    segmentation shows more noise, or more autocorrelation, than that: then pruning
    starts over from the candidates (REFITS times at most), each candidate tested
    against the noise of the surviving segmentation with that candidate put back in
    (never below the first figures; they only grow, so the estimate errs towards
    fewer changes). Put back, because the test of a change is a two-segment test: left
    out, its own step read as noise (a 1.75-sigma, 0.5 % step between 179 and 72 runs,
    AR(1) 0.4, was dropped at sigma 0.0038 and rho 0.67; about the step they are 0.0028
    and 0.52). Candidates far past the floors stay in the segmentation those figures
    are measured on (`_strong_candidates`).
    """
    sigma, rho = noise_sigma(x, candidates), noise_rho(x, candidates)
    strong = _strong_candidates(x, candidates, sigma, params)
    noise_for = _noise_with(x, None, sigma, rho)
    for _ in range(REFITS):
        cps = _prune_at(x, candidates, noise_for, params, by_shift, measured, drift_guard)
        kept = sorted({*cps, *strong})
        sigma_refit, rho_refit = noise_sigma(x, kept), noise_rho(x, kept)
        if sigma_refit <= sigma and rho_refit <= rho:
            break
        noise_for = _noise_with(x, kept, sigma, rho)
        sigma, rho = max(sigma, sigma_refit), max(rho, rho_refit)
    else:
        cps = _prune_at(x, candidates, noise_for, params, by_shift, measured, drift_guard)
    return cps, sigma, rho


def _noise_with(x: np.ndarray, kept: list[int] | None, sigma: float, rho: float):
    """cp -> (sigma, rho) to test cp with: the given figures, or with `kept`, those of
    the segmentation `kept` with cp added, each at least the given figures. Cached per
    cp: pruning asks again for every candidate after each drop."""
    @lru_cache(maxsize=None)
    def noise(cp: int) -> tuple[float, float]:
        if kept is None:
            return sigma, rho
        cuts = sorted({*kept, cp})
        return max(sigma, noise_sigma(x, cuts)), max(rho, noise_rho(x, cuts))
    return noise


def _strong_candidates(x: np.ndarray, candidates: list[int], sigma: float, params: DetectorParams) -> list[int]:
    """Candidates whose shift clears the floors STRONG_RATIO times over, between their
    neighbouring candidates and across the 10 runs either side: whether or not they
    are reported, they stay in the segmentation the noise is re-measured on.

    A step that large is not a slow wander cut into levels, which is what the re-measure
    is for. Left out, its shift became "noise": a 15-sigma level of the last 4 runs,
    dropped because 4 runs cannot be significant among 20 after the search correction,
    raised sigma 5x, and with it every other change of the history was dropped too."""
    bounds = [0, *candidates, len(x)]
    return [cp for i, cp in enumerate(candidates)
            if _floor_ratio(x[bounds[i]:cp], x[cp:bounds[i + 2]], sigma, params) >= STRONG_RATIO]


def _prune_at(x: np.ndarray, cps: list[int], noise_for, params: DetectorParams,
              by_shift: bool = True, measured: bool = True, drift_guard: bool = True) -> list[int]:
    """Drop changes, weakest first, until each passes both floors and alpha (p corrected
    for autocorrelation; by_shift: the shift of medians may stand in for ranks where the
    autocorrelation correction, not the separation, holds them back, see
    `fixed_split_pvalue`; strict_alpha for a level of the newest TAIL_MAX runs, as in
    stage 4). noise_for(cp) gives the (sigma, rho) that cp is tested with."""
    cps = list(cps)
    while cps:
        bounds = [0, *cps, len(x)]
        worst, worst_score = None, np.inf
        for i, cp in enumerate(cps):
            sigma, rho = noise_for(cp)
            left, right = x[bounds[i]:cp], x[cp:bounds[i + 2]]
            ratio = _floor_ratio(left, right, sigma, params)
            p = fixed_split_pvalue(left, right, rho, sigma if by_shift else None)
            # a level of the newest TAIL_MAX runs is asked about every night: strict_alpha
            level = params.strict_alpha if cp >= len(x) - TAIL_MAX else params.alpha
            failing = p > level or (
                ratio < 1.0 and not (measured and _measured_step(left, right, sigma, rho, params, drift_guard)))
            if failing and ratio < worst_score:
                worst, worst_score = i, ratio
        if worst is None:
            break
        del cps[worst]
    return cps


def _measured_step(left: np.ndarray, right: np.ndarray, sigma: float, rho: float,
                   params: DetectorParams, drift_guard: bool = True) -> bool:
    """May a change under the default floors (but significant at alpha) be kept on the
    measured floors? Both segments hold MEASURED_RUNS runs or more, the shift of their
    medians clears min_rel_change_measured and min_sigma_measured, and the step net of
    a common local slope (`step_net_of_slope`, up to STEP_RUNS runs either side) is
    STEP_Z standard errors or more and at least half that floor (without the
    drift_guard, only the half floor: `_gradual_changes`).

    The default floors ask a 2 % and 2-sigma shift of every change, also across the 10
    runs either side (the drift guard): right for a level seen for a few runs, but it
    drops a 1.5-sigma or 1 % step seen for 50 runs either side, which a rank test puts
    at p 1e-8. The drift guard is what keeps a slow wander from being cut into steps;
    here that question is asked directly: with a slope fitted across the cut, a linear
    drift leaves no step, a level change does (a flat-either-side test, tried instead,
    let a 0.02 sigma-per-run drift through: 3-4 alarms per 1,000 nights)."""
    if min(len(left), len(right)) < MEASURED_RUNS or sigma <= 0:
        return False
    if params.min_rel_change_measured <= 0 and params.min_sigma_measured <= 0:
        return False
    before = float(np.median(left))
    floor = max(params.min_rel_change_measured * abs(before), params.min_sigma_measured * sigma)
    if abs(float(np.median(right)) - before) < floor:
        return False
    step, z = step_net_of_slope(left[-STEP_RUNS:], right[:STEP_RUNS], sigma, rho)
    return abs(step) >= floor / 2 and (z >= STEP_Z or not drift_guard)


def step_net_of_slope(before: np.ndarray, after: np.ndarray, sigma: float, rho: float) -> tuple[float, float]:
    """(step, its z): least squares of level + slope + step at the cut over `before`
    and `after`, each run clipped to 4 sigma of its side's median (heavy tails, a second
    mode), the step's standard error from the residuals, inflated by the AR(1)
    long-run factor sqrt((1 + rho) / (1 - rho)), rho the larger of the noise's and that
    of the residuals on either side (a random walk, taken for stationary noise with rho
    0.6, showed 0.9 about the local fit: its 'steps' passed at the noise's rho).

    Under autocorrelated noise z is the larger of that and the step's t from the same
    fit on the prewhitened runs (`ar1`), which weighs the night of the step: steps of
    1-3 noise widths under autocorrelation 0.5-0.8 were refused here by the long-run
    factor alone. Where rho reached MAX_RHO the noise may be a random walk (rho 1),
    which prewhitening at MAX_RHO under-corrects (a 300-run walk got a 1.4 sigma
    'step'): there the fit is whitened by the differences (`ar1.whitening_rho`), which
    only costs power if the noise is stationary. The larger of the two, because the
    prewhitened t relies on the night of the cut and drops where the cut is one run off
    the step (3 of 30 steps of 2.5 sigma under rho 0.6 were lost with it alone)."""
    y = np.concatenate([ar1.clip_to(before, sigma), ar1.clip_to(after, sigma)])
    t = np.arange(-len(before), len(after), dtype=float)
    design = np.column_stack([np.ones_like(t), t, (t >= 0).astype(float)])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    s = float(np.sqrt(resid @ resid / max(len(y) - 3, 1)))
    rho = max(rho, _lag1(resid[:len(before)]), _lag1(resid[len(before):]))
    se = s * float(np.sqrt(np.linalg.inv(design.T @ design)[2, 2] * (1 + rho) / (1 - rho)))
    step = float(coef[2])
    z = abs(step) / se if se > 0 else (np.inf if step != 0 else 0.0)
    if rho > 0:
        z = max(z, ar1.last_coef_t(y, design, ar1.whitening_rho(rho, MAX_RHO))[1])
    return step, z


def _lag1(e: np.ndarray) -> float:
    """Lag-1 autocorrelation of residuals e about their mean, clipped to [0, MAX_RHO]."""
    e = e - e.mean()
    den = float(e @ e)
    return float(np.clip(e[1:] @ e[:-1] / den, 0.0, MAX_RHO)) if den > 0 and len(e) > 2 else 0.0
