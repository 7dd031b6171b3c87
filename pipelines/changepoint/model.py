"""What the change detector takes and returns: its parameters, one detected change, and
the effect-size floor both the search and the follow-up of a known change apply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

# A shift must also show between the medians of this many runs either side of the
# change (and the newest runs are compared with this many runs before them), so that a
# slow drift cut into pieces does not read as a staircase of steps.
LOCAL_RUNS = 10

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
    alpha: largest p-value (autocorrelation- and search-corrected) of a change kept in
        the history's body (stages 1-3). 0.005 spends a part of the false-alarm budget
        (0.5 confirmed false alarms per 1,000 change-free nights, counted over whole
        histories; at 0.005 about 0.04 were measured): each history of a few hundred
        runs is one look at its body. Where many series are mined each night, the
        family's FDR (pipelines.mining.regressions) stands on top of it.
    alpha_strict: the level of the two tests that see the same runs again and again or
        that a wander fools most easily: the newest-runs test (asked every night of the
        last 1-5 runs) and the jump test of a series that wanders (stage 5). The smaller
        of it and alpha is used (`strict_alpha`).
    min_segment: fewest runs in a confirmed segment; shorter bursts are not a level.
    confirm_points: a change starting within the last this-many runs is provisional (so
        is a new level of up to 5 newest runs that is not yet significant, see detect).
    higher_is_worse: True for latency-like metrics (up = regression), False for
        throughput-like ones.
    min_rel_change_measured, min_sigma_measured: the floors for a well-measured change
        (0.2 %, 1 robust sigma). A change between two segments of MEASURED_RUNS runs or
        more that is significant at alpha, whose shift clears these floors and whose
        step, net of a common local slope, is at least half of them (a straight drift
        cut in two leaves none: `detector._measured_step`), is kept although it is
        under min_rel_change or min_sigma; as gradual where that step is not itself
        significant (Change.gradual).
        0 for both turns the measured path off (min_rel_change_measured=
        min_rel_change and min_sigma_measured=min_sigma give the floors of before).
        The relative floor was 0.5 % until 2026-11-26: for a series whose noise is
        under 0.5 % of its level it bound before the 1-sigma floor, so the same step in
        noise units was found in noisy series and dropped in quiet ones (a 2-sigma step
        of 0.4 % between 40-run segments, median p 3e-9: confirmed in 3 of 30 draws,
        27 at 0.2 %; tests/test_changepoint_steps.py). At 0.2 % the floors act in
        noise units down to 0.2 % noise (the drift checks, run at 0.5-2 % noise,
        measure exactly that behaviour), and a shift under 0.2 % of the level is still
        not reported.
    min_rel_change_newest: the relative floor of a young level of up to 5 newest runs
        that fails min_rel_change (`newest.tail_change`; its noise-units floor stays
        min_sigma): reported confirmed where significant at strict_alpha, flagged where
        it clears 1.5 times this floor. 0.5 %: 3-5 runs measure the noise and the level
        before far less well than 10+ runs either side, and with the measured step's
        0.2 % here a simulated copy kernel in 0.2 % noise had 4 runs 0.4 % up (p 0.06)
        flagged for a rerun (tests/test_regressions.py).
    """

    min_rel_change: float = 0.02
    min_sigma: float = 2.0
    alpha: float = 0.005
    alpha_strict: float = 0.001
    min_segment: int = 3
    confirm_points: int = 2
    higher_is_worse: bool = True
    min_rel_change_measured: float = 0.002
    min_sigma_measured: float = 1.0
    min_rel_change_newest: float = 0.005

    def __post_init__(self) -> None:
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be >= 2, got {self.min_segment}")
        if not 0 < self.alpha < 1 or not 0 < self.alpha_strict < 1:
            raise ValueError(f"alpha and alpha_strict must be in (0, 1), got {self.alpha}, {self.alpha_strict}")
        if self.min_rel_change < 0 or self.min_sigma < 0 or self.confirm_points < 0:
            raise ValueError("min_rel_change, min_sigma and confirm_points must be >= 0")
        if not 0 <= self.min_rel_change_measured <= self.min_rel_change or \
                not 0 <= self.min_sigma_measured <= self.min_sigma:
            raise ValueError("the measured floors must be >= 0 and at most min_rel_change / min_sigma")
        if not 0 <= self.min_rel_change_newest <= self.min_rel_change:
            raise ValueError("min_rel_change_newest must be >= 0 and at most min_rel_change")

    @property
    def strict_alpha(self) -> float:
        """The level of the newest-runs and wander-jump tests: min(alpha, alpha_strict)."""
        return min(self.alpha, self.alpha_strict)


@dataclass(frozen=True)
class Change:
    """One detected level change.

    index: position (in the input, missing values included) of the first run at the new
        level. before/after: medians of the segments either side (for a change among the
        newest runs, before is the median of the 10 or 20 runs preceding it, see
        `level_before`; for a jump in a series that wanders, the run just before it).
        rel_change: (after - before) / |before|. sigmas: |after - before| in robust
        noise units.
        p_value: two-sided, corrected for autocorrelation and for the split search.
        provisional: among the newest runs and not (yet) significant: within the last
        confirm_points runs, or a level of up to 5 runs that clears the floors run by
        run without reaching strict_alpha. It asks for a rerun rather than a person.
        gradual: a change in the history's body, significant and past the measured
        floors, whose step net of a local slope is not itself significant
        (`detector._gradual`): the level moved between the segments either side, but a
        slow drift across them fits the runs as well as a step at `index`, so the cause
        may lie in any of those runs, not only in this one.
    """

    index: int
    before: float
    after: float
    rel_change: float
    sigmas: float
    p_value: float
    direction: Direction
    provisional: bool
    gradual: bool = False


def describe(index: int, before: float, right: np.ndarray, sigma: float, p: float,
              provisional: bool, params: DetectorParams, gradual: bool = False) -> Change:
    after = float(np.median(right))
    shift = after - before
    rel = shift / abs(before) if before != 0 else float(np.sign(shift) * np.inf)
    worse = (shift > 0) == params.higher_is_worse
    return Change(index=index, before=before, after=after, rel_change=rel,
                  sigmas=abs(shift) / sigma if sigma > 0 else float("inf"), p_value=p,
                  direction="regression" if worse else "improvement", provisional=provisional,
                  gradual=gradual)


def effect_floor(level: float, sigma: float, params: DetectorParams) -> float:
    """Smallest shift from `level` worth reporting: the stricter of the relative floor
    and the floor in robust noise units."""
    return max(params.min_rel_change * abs(level), params.min_sigma * sigma)
