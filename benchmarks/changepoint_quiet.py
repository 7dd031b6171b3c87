"""Confirmed false alarms of the change detector on many change-free wide histories:
the quiet half of `changepoint_eval`'s wide draws at a larger scale, where a rate of
0.05-0.1 per 1,000 nights needs hundreds of thousands of nights to be told apart.

Per family: histories of 30-400 nights (log-uniform) of `changepoint_wide.wide_noise`
at 1 % of the level, no step; the detector run once on each whole history.

    .venv/bin/python benchmarks/changepoint_quiet.py [--ar1 2000] [--seed 99]   # about 4-7 min

The others get a quarter as many histories as AR(1), where the alarms are.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.changepoint_wide import WIDE_FAMILIES, wide_noise  # noqa: E402
from pipelines.changepoint import detect  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ar1", type=int, default=2000, help="AR(1) histories (others: a quarter)")
    ap.add_argument("--seed", type=int, default=99)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.time()
    print(f"{'family':10} {'histories':>9} {'nights':>8} {'alarms':>6} {'per 1,000':>9}")
    for family in ("ar1", *[f for f in WIDE_FAMILIES if f != "ar1"]):
        count = args.ar1 if family == "ar1" else args.ar1 // 4
        alarms = nights = 0
        for _ in range(count):
            n = int(np.exp(rng.uniform(np.log(30), np.log(401))))
            unit, _ = wide_noise(family, n, rng)
            alarms += sum(not c.provisional for c in detect(1.0 + 0.01 * unit))
            nights += n
        print(f"{family:10} {count:9d} {nights:8d} {alarms:6d} {1000 * alarms / nights:9.3f}", flush=True)
    print(f"\nwall time {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
