"""The regression lifecycle replayed night by night, as the nightly mine runs it
(pipelines.mining.regressions._series_changes on every prefix of a history, each night's
rows carried into the next): confirmed false alarms on change-free histories and lasting
steps kept, with and without the fading rule (pipelines.changepoint.known.faded).

changepoint_nightly replays the detector alone. The mine does more: a provisional change
is confirmed as soon as the next run agrees (`confirms`), and a confirmed change was then
kept for good. Two slow nights of a two-mode series were enough for a false alarm that
stayed listed (found on the demo's simulated history). Per noise family, at 1 % noise
(robust sigma) and 60 nights (replayed from night 20):

- quiet: false alarms per 1,000 replayed nights, counted once each: ever confirmed (what
  an owner was told) and still confirmed on the last night (what `perflake regressions`
  lists);
- steps of 3 % and 5 % that last from night 35 on: the share confirmed on the last night.

    .venv/bin/python benchmarks/changepoint_lifecycle.py [--series 40] [--seed 7]

The figures are in NOTES-changepoint.md ("The lifecycle, replayed").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's pipelines first
sys.path.insert(0, str(Path(__file__).resolve().parent))

from changepoint_nightly import FIRST_ONLINE_NIGHT, NIGHTS, NOISE_KINDS, _unit_noise  # noqa: E402
from pipelines.changepoint import DetectorParams  # noqa: E402
from pipelines.mining import regressions  # noqa: E402

SIGMA = 0.01
STEP_NIGHT = 35
STEPS = (0.03, 0.05)
NOW = pd.Timestamp("2026-11-30", tz="UTC")


def replay(latency: np.ndarray) -> tuple[set[str], set[str]]:
    """(change runs ever confirmed, change runs confirmed on the last night) of one
    history mined night by night."""
    nights = pd.date_range("2026-01-01", periods=len(latency), freq="D", tz="UTC")
    points = pd.DataFrame({"run_id": [f"r{i:03d}" for i in range(len(latency))], "started_at": nights,
                           "dt": nights.strftime("%Y-%m-%d"), "value": latency, "median_ns": latency,
                           "metric": "latency", "series_key": "k", **{c: "x" for c in regressions._DESCRIBE}})
    known = pd.DataFrame(columns=regressions._candidate_schema().names)
    ever: set[str] = set()
    for night in range(FIRST_ONLINE_NIGHT, len(latency) + 1):
        known = regressions._series_changes(points.iloc[:night], known, now=NOW, params=DetectorParams())
        ever |= set(known.loc[known["status"] == "confirmed", "change_run_id"])
    return ever, set(known.loc[known["status"] == "confirmed", "change_run_id"])


def run(series: int, seed: int, fade: bool) -> dict:
    real_faded = regressions.faded
    if not fade:
        regressions.faded = lambda *a, **k: False
    try:
        out = {}
        for k, kind in enumerate(NOISE_KINDS):
            rng = np.random.default_rng([seed, k])
            quiet = 1000.0 * (1 + SIGMA * _unit_noise(kind, rng, (series, NIGHTS)))
            ever = last = 0
            for x in quiet:
                e, l_ = replay(x)
                ever, last = ever + len(e), last + len(l_)
            replayed = series * (NIGHTS - FIRST_ONLINE_NIGHT + 1)
            kept = {}
            for step in STEPS:
                hist = 1000.0 * (1 + SIGMA * _unit_noise(kind, rng, (series, NIGHTS)))
                hist[:, STEP_NIGHT:] *= 1 + step
                found = 0
                for x in hist:
                    _, l_ = replay(x)
                    found += any(abs(int(r[1:]) - STEP_NIGHT) <= 3 for r in l_)
                kept[step] = found / series
            out[kind] = {"ever": 1000 * ever / replayed, "last": 1000 * last / replayed, "kept": kept}
        return out
    finally:
        regressions.faded = real_faded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=40, help="histories per family and kind (default 40)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    t0 = time.monotonic()
    off, on = run(args.series, args.seed, fade=False), run(args.series, args.seed, fade=True)
    print(f"{args.series} histories per family and kind, {NIGHTS} nights at {SIGMA:.0%} noise, replayed from "
          f"night {FIRST_ONLINE_NIGHT}; false alarms per 1,000 replayed nights (fade off -> on)")
    print(f"{'family':<12} {'ever confirmed':>18} {'listed at the end':>20} "
          + " ".join(f"{f'{s:.0%} step kept':>18}" for s in STEPS))
    for kind in NOISE_KINDS:
        a, b = off[kind], on[kind]
        print(f"{kind:<12} {a['ever']:>8.2f} -> {b['ever']:<7.2f} {a['last']:>10.2f} -> {b['last']:<7.2f} "
              + " ".join(f"{a['kept'][s]:>8.2f} -> {b['kept'][s]:<7.2f}" for s in STEPS))
    print(f"({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
