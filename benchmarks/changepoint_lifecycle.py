"""The regression lifecycle replayed night by night, as the nightly sweep runs it: each
night one run of the case is mined (pipelines.mining.regressions._series_changes on the
history so far, the rows carried into the next night); where a change is left
provisional (first seen in that run, or still waiting for runs to confirm it), the case
gets a confirmation rerun, a run of its own, mined again the same night (nightly_sweep's
plan_rerun / mine_reruns). Per noise family, at 1 % noise
(robust sigma) and 60 nights (replayed from night 20):

- quiet: false alarms per 1,000 replayed nights, counted once each: ever confirmed (what
  an owner was told, in the digest) and still confirmed on the last night (what
  `perflake regressions` lists); and reruns per 1,000 nights (what flags cost);
- steps of 3 % and 5 % that start on night 35 and last: the share confirmed at the step
  by the end of its first night (after its rerun), of its third night, and on the last
  night (a confirmation within 3 runs of the step counts).

With --peers K the case has K peers on its pool (the same family of noise, quiet, or
with the same step where --common-step), and the mine's group autocorrelation
(`regressions.group_rho` over the case and its peers) is what the detector's
significance must also hold at to confirm a step; without, the case is alone on its
pool, as before.

changepoint_nightly replays the detector alone (`detect` on every prefix); this adds what
the mine makes of its output: when a provisional change is confirmed (`known.confirms`)
or cleared, and when a confirmed one has faded (`known.faded`).

    .venv/bin/python benchmarks/changepoint_lifecycle.py [--series 40] [--seed 7] [--peers 8 [--common-step]]

The figures are in NOTES-changepoint.md ("the lifecycle, replayed").
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
NEAR = 3  # a confirmed change within this many runs of the step's first run finds it


class Replay:
    """One case's history grown night by night from a stream of noise draws (one per run,
    reruns included, so autocorrelation runs through them)."""

    def __init__(self, noise: np.ndarray, step: float = 0.0, peers: np.ndarray | None = None,
                 peers_step: float = 0.0):
        self.noise, self.step = noise, step
        self.peers, self.peers_step = peers, peers_step  # noise draws of the case's peers, one row each
        self.values: list[float] = []
        self.nights: list[int] = []
        self.known = pd.DataFrame(columns=regressions._candidate_schema().names)
        self.ever: set[int] = set()      # runs ever confirmed as a change's first run
        self.confirmed_on: dict[int, int] = {}  # run -> night it was first confirmed
        self.reruns = 0

    def measure(self, night: int) -> int:
        level = 1000.0 * (1 + self.step * (night >= STEP_NIGHT))
        self.values.append(level * (1 + SIGMA * self.noise[len(self.values)]))
        self.nights.append(night)
        return len(self.values) - 1

    def mine(self, night: int) -> None:
        n = len(self.values)
        started = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.arange(n), unit="h")
        points = pd.DataFrame({"run_id": [f"r{i:03d}" for i in range(n)], "started_at": started,
                               "dt": [f"n{d:02d}" for d in self.nights], "value": self.values,
                               "median_ns": self.values, "metric": "latency", "series_key": "k",
                               **{c: "x" for c in regressions._DESCRIBE}})
        if self.peers is not None:
            shift = 1 + self.peers_step * (np.array(self.nights) >= STEP_NIGHT)
            rho = regressions.group_rho([np.asarray(self.values), *(shift + SIGMA * p[:n] for p in self.peers)])
            if rho is not None:
                points["peer_rho"] = rho
        self.known = regressions._series_changes(points, self.known, now=NOW, params=DetectorParams())
        for run in self.known.loc[self.known["status"] == "confirmed", "change_run_id"]:
            i = int(run[1:])
            self.ever.add(i)
            self.confirmed_on.setdefault(i, night)

    def night(self, night: int) -> None:
        self.measure(night)
        self.mine(night)
        if (self.known["status"] == "provisional").any():  # an open flag: rerun (tasks.unstable_cases)
            self.reruns += 1
            self.measure(night)
            self.mine(night)

    def listed(self) -> set[int]:
        return {int(r[1:]) for r in self.known.loc[self.known["status"] == "confirmed", "change_run_id"]}


def replay(noise: np.ndarray, step: float = 0.0, peers: np.ndarray | None = None, common: bool = False) -> Replay:
    r = Replay(noise, step, peers, step if common else 0.0)
    for night in range(FIRST_ONLINE_NIGHT - 1):
        r.measure(night)
    for night in range(FIRST_ONLINE_NIGHT - 1, NIGHTS):
        r.night(night)
    return r


def step_found(r: Replay) -> tuple[float | None, bool]:
    """(the night the step was first confirmed, relative to its first night, or None;
    whether it is listed on the last night)."""
    first = r.nights.index(STEP_NIGHT)
    near = [i for i in r.confirmed_on if abs(i - first) <= NEAR]
    when = min((r.confirmed_on[i] for i in near), default=None)
    return (None if when is None else when - STEP_NIGHT), any(abs(i - first) <= NEAR for i in r.listed())


def run(series: int, seed: int, peers: int = 0, common: bool = False) -> dict:
    out = {}
    nights = NIGHTS - FIRST_ONLINE_NIGHT + 1
    for k, kind in enumerate(NOISE_KINDS):
        rng = np.random.default_rng([seed, k])
        peer_rng = np.random.default_rng([seed, k, 1])  # its own stream: the case's draws as without peers

        def peer_noise():
            return _unit_noise(kind, peer_rng, (peers, 2 * NIGHTS)) if peers else None

        ever = last = reruns = 0
        for noise in _unit_noise(kind, rng, (series, 2 * NIGHTS)):
            r = replay(noise, peers=peer_noise())
            ever, last, reruns = ever + len(r.ever), last + len(r.listed()), reruns + r.reruns
        row = {"ever": 1000 * ever / (series * nights), "last": 1000 * last / (series * nights),
               "reruns": 1000 * reruns / (series * nights)}
        for step in STEPS:
            found = [step_found(replay(noise, step, peer_noise(), common))
                     for noise in _unit_noise(kind, rng, (series, 2 * NIGHTS))]
            row[step] = {"c+0": np.mean([w is not None and w <= 0 for w, _ in found]),
                         "c+2": np.mean([w is not None and w <= 2 for w, _ in found]),
                         "end": np.mean([end for _, end in found])}
        out[kind] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=40, help="histories per family and kind (default 40)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--peers", type=int, default=0, help="peers of each case on its pool (default 0: alone)")
    ap.add_argument("--common-step", action="store_true", help="the peers take each step too")
    args = ap.parse_args()
    t0 = time.monotonic()
    out = run(args.series, args.seed, args.peers, args.common_step)
    print(f"{args.series} histories per family and kind, {NIGHTS} nights at {SIGMA:.0%} noise, replayed from night "
          f"{FIRST_ONLINE_NIGHT} with confirmation reruns, {args.peers} peers"
          f"{' sharing each step' if args.common_step else ''}; per 1,000 replayed nights: false alarms ever "
          "confirmed, listed at the end, reruns; steps: share confirmed by the end of the step's night / its third "
          "night / listed at the end")
    print(f"{'family':<12} {'ever':>6} {'listed':>7} {'reruns':>7} "
          + " ".join(f"{f'{s:.0%} step c+0 / c+2 / end':>28}" for s in STEPS))
    for kind in NOISE_KINDS:
        a = out[kind]
        print(f"{kind:<12} {a['ever']:>6.2f} {a['last']:>7.2f} {a['reruns']:>7.1f} "
              + " ".join(f"{a[s]['c+0']:>14.2f} / {a[s]['c+2']:.2f} / {a[s]['end']:.2f}" for s in STEPS))
    print(f"({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
