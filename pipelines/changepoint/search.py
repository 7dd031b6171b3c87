"""Stage 1 of the change detector: candidate level changes by binary segmentation on
ranks (`search`), and where to place each (`refine`). See `detector` for the stages.

Candidates are chosen by significance alone (the search's cost over positions
corrected, `ranks.searched_p`); autocorrelation, the effect floors and the final
alpha are applied when they are pruned (`prune`)."""

from __future__ import annotations

import numpy as np

from pipelines.changepoint.model import LOCAL_RUNS, DetectorParams
from pipelines.changepoint.noise import MAD_TO_SIGMA
from pipelines.changepoint.ranks import searched_p, split_raw_p, split_z

# A candidate is placed within NEAR_RUNS of the rank statistic's split unless a split
# farther away gains MOVE_Z noise widths x sqrt(LOCAL_RUNS) more (`refine`).
NEAR_RUNS = 3
MOVE_Z = 2.0


def best_split(seg: np.ndarray, min_segment: int) -> tuple[int, float] | None:
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
    z, _ = split_z(seg, ks)
    i = int(np.argmax(np.abs(z)))
    if z[i] == 0.0:
        return None
    k = int(ks[i])
    return k, searched_p(split_raw_p(seg, k, float(z[i])), 0.0, n, min_segment, n - min_segment)


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


def _best_seeded_split(seg: np.ndarray, min_segment: int) -> tuple[int, float, int, int] | None:
    """The most significant split found inside any seeded sub-interval of seg (index
    into seg, p corrected for the positions searched in that interval and for the number
    of intervals, and the interval [lo, hi) it was found in), or None."""
    intervals = _seeded_intervals(len(seg), 4 * min_segment)
    best = None
    for lo, hi in intervals:
        found = best_split(seg[lo:hi], min_segment)
        if found is not None and (best is None or found[1] < best[1]):
            best = (lo + found[0], found[1], lo, hi)
    if best is None:
        return None
    return best[0], min(1.0, best[1] * len(intervals)), best[2], best[3]


def refine(seg: np.ndarray, k: int, min_segment: int) -> int:
    """Where to place a candidate the rank statistic found at split k of seg: the split
    where cutting the LOCAL_RUNS runs either side in two lowers their absolute deviation
    from their median(s) the most, taken within NEAR_RUNS of k unless a split farther
    away gains clearly more (by MOVE_Z noise widths times sqrt(LOCAL_RUNS): the
    spread of that gain over pure noise).

    The rank statistic finds that a change is there, but it is blind to magnitude and
    can misplace it: where the last runs before a step happen to be the highest of the
    old level, moving them to the new side improves the ranks' separation (a 20-sigma
    step at 40 was split at 38). Once the two sides are wholly apart, the standardised
    statistic grows towards the middle of the segment however far that is from the
    step, and under autocorrelated noise the wander inside a long new level can outrank
    the step itself (a 36-sigma step 10 runs into a 67-run segment had its largest
    statistic at run 30). A misplaced split leaves old runs in the new segment, which
    read as autocorrelation, and pruning dropped the change. The gain is local because
    a segment may hold more than one change: with the whole segment's medians, every
    split outside a 28-run burst in a 97-run segment costs the same. Absolute
    deviations weigh magnitudes but not single outliers.

    Why a far move must win clearly: for a small step (under 2 noise widths) the local
    gain at the step is no larger than the noise's best elsewhere in a long segment, so
    the best gain anywhere moved a 1.7-sigma step at run 201 of 254 (rank p 4e-12 there)
    to run 213, and it was lost. Large steps, and TCPD's trends, still move."""
    def dev(v: np.ndarray) -> float:
        return float(np.abs(v - np.median(v)).sum())

    def gain(j: int) -> float:
        left, right = seg[max(0, j - LOCAL_RUNS):j], seg[j:j + LOCAL_RUNS]
        return dev(np.concatenate([left, right])) - dev(left) - dev(right)

    splits = range(min_segment, len(seg) - min_segment + 1)
    gains = {j: gain(j) for j in splits}
    def best(js):
        return max(js, key=lambda j: (gains[j], -abs(j - k)))

    anywhere = best(splits)
    near = [j for j in splits if abs(j - k) <= NEAR_RUNS]
    if not near:
        return anywhere
    here = best(near)
    # noise width from run-to-run differences: a step or a trend barely moves it
    width = MAD_TO_SIGMA * float(np.median(np.abs(np.diff(seg)))) / np.sqrt(2)
    return anywhere if gains[anywhere] - gains[here] > MOVE_Z * width * np.sqrt(LOCAL_RUNS) else here


def search(x: np.ndarray, params: DetectorParams) -> list[int]:
    """Candidate changes: binary segmentation by significance alone (autocorrelation,
    the floors and the final alpha are applied in _prune). A segment without a
    significant split overall is searched once more in its seeded sub-intervals."""
    cps: list[int] = []
    stack = [(0, len(x))]
    while stack:
        a, b = stack.pop()
        found = best_split(x[a:b], params.min_segment)
        lo, hi = a, b  # where the split was found, and is placed (refine)
        if found is None or found[1] > params.alpha:
            seeded = _best_seeded_split(x[a:b], params.min_segment)
            if seeded is not None:
                found, lo, hi = (seeded[0] - seeded[2], seeded[1]), a + seeded[2], a + seeded[3]
        if found is None or found[1] > params.alpha:
            continue
        cp = lo + refine(x[lo:hi], found[0], params.min_segment)
        cps.append(cp)
        stack += [(a, cp), (cp, b)]
    return sorted(cps)
