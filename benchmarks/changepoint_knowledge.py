"""Where the detector's recall goes: the detector run on the wide histories once as it
is and then told, one piece at a time, what only the generator knows (issue #21).

Steps, each added to the one before:

- **as is**: `pipelines.changepoint.detect` with its defaults.
- **true noise**: the noise's scale and autocorrelation (`noise.noise_sigma`,
  `noise.noise_rho`) measured about the true changes instead of the detector's
  segmentation of the whole history.
- **true candidates**: the search (stage 1) returns exactly the true changes of the
  history's body (more than 5 nights from the end; the newest runs are stage 4's);
  no candidate is missed, none is spurious, each is at its night.
- **no drift guard**: a change under the default floors is kept on the measured floors
  without asking its step net of a local slope to be significant (STEP_Z 0).
- **no measured floors**: the measured floors (0.2 %, 1 noise width) at almost 0.

What is left after the last step is what the pruning's tests, the newest-runs test and
the default floors for young levels cost against an oracle (`changepoint_oracle`).
The knowledge is given by replacing the detector's functions for the history being
scored (only the whole history's calls: stage 4's and the second mode's own searches
are the detector's); nothing of the detector is changed for other callers, and each
step runs in a process of its own.

    .venv/bin/python benchmarks/changepoint_knowledge.py [--seed 20261127] [--series 600]
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from changepoint_wide import DEV_SEED, format_span, recall_intervals, wide_histories, score_wide  # noqa: E402

STEPS = ("as is", "true noise", "true candidates", "no drift guard", "no measured floors")
YOUNG_NIGHTS = 5  # changes this close to the end are left to stage 4, as in the generator's "last 5 nights"


def run_step(step: str, seed: int, series: int) -> dict:
    """score_wide of the detector told everything up to `step` (one of STEPS). It
    replaces functions of `pipelines.changepoint.detector` for good: call it in a
    process of its own."""
    from pipelines.changepoint import DetectorParams, detect
    from pipelines.changepoint import detector

    level = STEPS.index(step)
    histories = wide_histories(series, seed)
    current: dict = {}

    def whole(x) -> bool:  # the history being scored, not a sub-series of it
        return len(x) == len(current["x"])

    if level >= 1:
        sigma, rho = detector.noise_sigma, detector.noise_rho
        detector.noise_sigma = lambda x, cps: sigma(x, current["truth"] if whole(x) else cps)
        detector.noise_rho = lambda x, cps: rho(x, current["truth"] if whole(x) else cps)
    if level >= 2:
        search = detector.search
        detector.search = lambda x, params: list(current["body"]) if whole(x) else search(x, params)
    if level >= 3:
        detector.STEP_Z = 0.0
    params = DetectorParams()
    if level >= 4:
        params = DetectorParams(min_rel_change_measured=1e-9, min_sigma_measured=1e-9)
    reports = []
    for h in histories:
        truth = [c for c, _, _ in h["changes"]]
        current.update(x=h["x"], truth=truth, body=[c for c in truth if c < len(h["x"]) - YOUNG_NIGHTS])
        reports.append([(c.index, not c.provisional) for c in detect(h["x"], params=params)])
    return score_wide(histories, reports)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEV_SEED)
    ap.add_argument("--series", type=int, default=300, help="histories per family")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    t0 = time.time()
    # one fresh process per step: a step's replacements must not outlive it
    with ProcessPoolExecutor(args.workers, max_tasks_per_child=1) as pool:
        scores = list(pool.map(run_step, STEPS, [args.seed] * len(STEPS), [args.series] * len(STEPS)))
    families = list(scores[0]["family"])
    print(f"Detector recall told what the generator knows, seed {args.seed}, {args.series} per family")
    print(f"{'told (cumulative)':20s} {'all':>6s} " + " ".join(f"{f:>9s}" for f in families)
          + f" {'body':>6s} {'last5':>6s} {'FA/1000q':>8s}  all - as is [95 % interval, paired bootstrap]")
    for step, s in zip(STEPS, scores):
        gain = recall_intervals(s, scores[0])["all"]
        print(f"{step:20s} {s['all'][0]:6.3f} " + " ".join(f"{s['family'][f][0]:9.3f}" for f in families)
              + f" {s['tail']['earlier'][0]:6.3f} {s['tail']['last 5 nights'][0]:6.3f} {s['fa_quiet']:8.3f}"
              + "  " + format_span("", gain, signed=True))
    print(f"\nwall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
