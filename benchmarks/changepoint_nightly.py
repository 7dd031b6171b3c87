"""The 60-night simulated histories of the change detector's evaluation (`changepoint_eval
--nightly`, `--drift`, `--hold`, `--oracle`): Gaussian, Student-t(3), bimodal and
AR(1, phi 0.5) noise scaled to robust sigma 1; false alarms whole-history and replayed
night by night, recall of injected steps by the night after the change, and how long a
found step stays reported. Otava runs beside where it is installed (`changepoint_otava`)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's pipelines first

from pipelines.changepoint import detect  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from changepoint_otava import run_otava  # noqa: E402

NIGHTS = 60
FIRST_ONLINE_NIGHT = 20
# --hold follows each step over its first HOLD_NIGHTS nights (c+0 .. c+HOLD_NIGHTS-1).
HOLD_NIGHTS = 16
STEPS = (0.03, 0.05, 0.10)
SIGMA_MULTIPLES = (3.0, 4.0, 6.0)
NOISE_KINDS = ("gaussian", "student_t3", "bimodal", "ar1_0.5")
CHANGE_FREE_SIGMAS = (0.005, 0.01, 0.02)  # relative noise of change-free histories
DRIFTS = (0.05, 0.10)  # robust sigma per run, for --drift
DRIFT_KINDS = ("gaussian", "student_t3")


def _unit_noise(kind: str, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Noise of the given kind with robust sigma 1 (population 1.4826 x MAD)."""
    if kind == "gaussian":
        return rng.standard_normal(shape)
    if kind == "student_t3":
        return rng.standard_t(3, shape) / (1.4826 * 0.764892)  # MAD of t3 = its 75 % quantile
    if kind == "bimodal":  # a second clock/placement mode 4 sigma slower, 20 % of nights
        x = rng.standard_normal(shape) + 4.0 * (rng.random(shape) < 0.2)
        return x / BIMODAL_ROBUST_SIGMA
    if kind == "ar1_0.5":  # stationary AR(1), marginal sigma 1
        eps = rng.standard_normal(shape) * np.sqrt(1 - 0.25)
        x = np.empty(shape)
        x[:, 0] = rng.standard_normal(shape[0])
        for t in range(1, shape[1]):
            x[:, t] = 0.5 * x[:, t - 1] + eps[:, t]
        return x
    raise ValueError(f"unknown noise kind {kind!r}")


def _robust_sigma_of_bimodal() -> float:
    rng = np.random.default_rng(12345)
    x = rng.standard_normal(2_000_000) + 4.0 * (rng.random(2_000_000) < 0.2)
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


BIMODAL_ROBUST_SIGMA = _robust_sigma_of_bimodal()


def _count_alarms(hist: np.ndarray, n_online: int) -> dict:
    """Alarms on histories without a level change, per 1,000 series-nights: whole-history
    (detector run once on each history) and nightly (the first n_online histories
    replayed, detector run on every prefix from FIRST_ONLINE_NIGHT, an alarm counted
    once, at the index (+-1) it first appears), each split into confirmed and
    provisional, and the confirmed ones into steps and gradual changes (`Change.gradual`:
    a level change the runs cannot tell from a drift, not put on one run's commit). A
    nightly alarm counts as confirmed if it is reported confirmed on any night, even
    when it was first seen as provisional, and as a step if it is ever reported as one."""
    n_series, nights_per = hist.shape
    steps = gradual = prov = 0
    for x in hist:
        for c in detect(x):
            prov += c.provisional
            gradual += not c.provisional and c.gradual
            steps += not c.provisional and not c.gradual
    tally = np.zeros(3, int)  # nightly alarms: provisional only, gradual at most, a step
    nights = 0
    for x in hist[:n_online]:
        alerted: dict[int, int] = {}  # index first reported -> 0 provisional, 1 gradual, 2 step
        for t in range(FIRST_ONLINE_NIGHT, nights_per + 1):
            nights += 1
            for c in detect(x[:t]):
                grade = 0 if c.provisional else 1 if c.gradual else 2
                seen = next((a for a in alerted if abs(c.index - a) <= 1), None)
                if seen is None:
                    alerted[c.index] = grade
                else:
                    alerted[seen] = max(alerted[seen], grade)
        tally += np.bincount(list(alerted.values()), minlength=3)
    per_k = 1000.0 / (n_series * nights_per)
    per_night = 1000.0 / max(nights, 1)
    return {
        "confirmed": (steps + gradual) * per_k, "steps": steps * per_k, "gradual": gradual * per_k,
        "provisional": prov * per_k,
        "online_confirmed": (tally[1] + tally[2]) * per_night, "online_steps": tally[2] * per_night,
        "online_provisional": tally[0] * per_night,
    }


def false_alarms(kind: str, n_series: int, n_online: int, rng: np.random.Generator) -> dict:
    """False alarms on change-free histories, per 1,000 series-nights."""
    sig = rng.choice(CHANGE_FREE_SIGMAS, size=(n_series, 1))
    hist = 1.0 + sig * _unit_noise(kind, rng, (n_series, NIGHTS))
    out = _count_alarms(hist, n_online)
    otava = run_otava(list(hist))
    out["otava"] = None if otava is None else sum(map(len, otava)) * 1000.0 / (n_series * NIGHTS)
    return out


def drift_alarms(kind: str, drift: float, n_series: int, rng: np.random.Generator) -> dict:
    """Alarms on slowly drifting histories without a step (a level moving by `drift`
    robust sigma per run, up or down at random), every history replayed nightly; same
    counting and noise widths as `false_alarms`. Drift is not a level change: the drift
    guards (10 runs either side, the newest runs against the nearer of 10 / 20 runs)
    are there to keep it from reading as one."""
    sig = rng.choice(CHANGE_FREE_SIGMAS, size=(n_series, 1))
    sign = rng.choice([-1.0, 1.0], size=(n_series, 1))
    trend = sign * drift * np.arange(NIGHTS)[None, :]
    hist = 1.0 + sig * (_unit_noise(kind, rng, (n_series, NIGHTS)) + trend)
    return _count_alarms(hist, n_series)


WANDER_KINDS = ("sine", "bend", "ar1+sine")


def wander_histories(kind: str, n_series: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Long step-free histories (150-400 runs, noise 1 % of the level) whose level
    wanders smoothly by 1.5-4 robust sigma: `sine`, one period of 80-400 runs at a
    random phase; `bend`, flat, then a straight drift over 30-120 runs, then flat again;
    `ar1+sine`, the sine under AR(1) noise (phi 0.3-0.7).

    The 60-night drift check (`drift_alarms`) only holds straight drifts no longer than
    60 runs, which a drift test over 60 runs either side of a cut sees whole. A longer
    window for that test found more small steps and nothing there showed its cost;
    here it tripled the alarms (NOTES-changepoint.md, 2026-11-27)."""
    out = []
    for _ in range(n_series):
        n = int(rng.integers(150, 401))
        t = np.arange(n)
        amp = rng.uniform(1.5, 4.0)
        if kind.endswith("sine"):
            level = amp * np.sin(2 * np.pi * t / rng.uniform(80, 400) + rng.uniform(0, 2 * np.pi))
        else:
            start, length = int(rng.integers(20, n - 40)), int(rng.integers(30, 121))
            level = amp * np.clip((t - start) / length, 0, 1)
        if kind.startswith("ar1"):
            phi = rng.uniform(0.3, 0.7)
            e = rng.standard_normal(n) * np.sqrt(1 - phi**2)
            z = np.empty(n)
            z[0] = rng.standard_normal()
            for i in range(1, n):
                z[i] = phi * z[i - 1] + e[i]
        else:
            z = rng.standard_normal(n)
        out.append(1.0 + 0.01 * (z + level))
    return out


def wander_alarms(histories: list[np.ndarray]) -> dict:
    """Reports per 1,000 nights on `wander_histories` (whole histories; every report is
    an alarm, there is no step): confirmed steps, confirmed gradual changes (the level
    did move; `Change.gradual` says it cannot be put on one run), provisional ones, and
    Otava's (None where it is not installed)."""
    nights = sum(len(x) for x in histories)
    found = [c for x in histories for c in detect(x)]
    otava = run_otava(histories)
    return {"steps": 1000.0 * sum(not c.provisional and not c.gradual for c in found) / nights,
            "gradual": 1000.0 * sum(not c.provisional and c.gradual for c in found) / nights,
            "provisional": 1000.0 * sum(c.provisional for c in found) / nights,
            "otava": None if otava is None else 1000.0 * sum(len(c) for c in otava) / nights}


def _step_histories(kind: str, n_series: int, rng: np.random.Generator, change_before: int):
    """Histories with one injected step each: a relative size from STEPS at a multiple of
    the noise from SIGMA_MULTIPLES (so the noise is step / multiple), at a night drawn
    from [FIRST_ONLINE_NIGHT, change_before), up or down. Returns (step, mult, change,
    hist)."""
    step = rng.choice(STEPS, size=n_series)
    mult = rng.choice(SIGMA_MULTIPLES, size=n_series)
    change = rng.integers(FIRST_ONLINE_NIGHT, change_before, size=n_series)
    sign = rng.choice([-1.0, 1.0], size=n_series)
    hist = 1.0 + (step / mult)[:, None] * _unit_noise(kind, rng, (n_series, NIGHTS))
    hist += (np.arange(NIGHTS)[None, :] >= change[:, None]) * (sign * step)[:, None]
    return step, mult, change, hist


def recall(kind: str, n_series: int, rng: np.random.Generator) -> dict:
    """Recall of injected steps within j = 0..3 runs after the change (index within +-1)."""
    step, mult, change, hist = _step_histories(kind, n_series, rng, NIGHTS - 3)
    any_by = np.zeros((n_series, 4), bool)  # any report (provisional included) by run c+j
    confirmed_by3 = np.zeros(n_series, bool)
    for i, x in enumerate(hist):
        c = change[i]
        for j in range(4):
            found = [ch for ch in detect(x[:c + j + 1]) if abs(ch.index - c) <= 1]
            any_by[i, j] = bool(found) or (j > 0 and any_by[i, j - 1])
            if j == 3:
                confirmed_by3[i] = any(not ch.provisional for ch in found)
    otava = run_otava([x[:c + 4] for x, c in zip(hist, change)])
    otava_hit = None if otava is None else np.mean(
        [any(abs(k - c) <= 1 for k in cps) for cps, c in zip(otava, change)])
    cells = {}
    for s in STEPS:
        for m in SIGMA_MULTIPLES:
            sel = (step == s) & (mult == m)
            cells[(s, m)] = float(any_by[sel, 3].mean()) if sel.any() else float("nan")
    return {"by_run": any_by.mean(axis=0).tolist(), "confirmed_by3": float(confirmed_by3.mean()),
            "cells": cells, "otava_by3": None if otava_hit is None else float(otava_hit)}


def hold(kind: str, n_series: int, rng: np.random.Generator, nights_after: int = HOLD_NIGHTS) -> list[float]:
    """Share of injected steps (as in `recall`, at a night c in [20, 44]) that the detector
    reports (index within +-1, provisional or confirmed) when run on the nights up to
    c+j, for each j = 0..nights_after-1: does a step stay reported night after night, in
    particular across the hand-off from the newest-runs test to the whole-series search?"""
    _, _, change, hist = _step_histories(kind, n_series, rng, NIGHTS - nights_after + 1)
    seen = [[any(abs(ch.index - c) <= 1 for ch in detect(x[:c + j + 1])) for j in range(nights_after)]
            for x, c in zip(hist, change)]
    return np.mean(seen, axis=0).tolist()


def oracle_power(n_draws: int = 200_000, seed: int = 1) -> list[tuple[float, float, float]]:
    """Power of an oracle on bimodal noise, as an upper bound for the newest-runs test:
    it knows the noise law, the level before and the change run, and takes the 4 runs
    c..c+3, with the likelihood ratio against "no change" maximised over the step's sign
    (Neyman-Pearson for a known step size). Returns (false-alarm rate per test, step in
    robust sigmas, power) rows; the threshold is the null's (1 - rate) quantile."""
    from scipy.stats import norm

    rng = np.random.default_rng(seed)
    scale = BIMODAL_ROBUST_SIGMA

    def log_density(x):  # of _unit_noise("bimodal"), in its robust-sigma units
        u = x * scale
        return np.log(0.8 * norm.pdf(u) + 0.2 * norm.pdf(u - 4.0))

    def statistic(new, step):
        base = log_density(new)
        return np.maximum((log_density(new - step) - base).sum(1), (log_density(new + step) - base).sum(1))

    rows = []
    for rate in (0.024, 0.005, 0.001):
        for step in SIGMA_MULTIPLES:
            threshold = np.quantile(statistic(_unit_noise("bimodal", rng, (n_draws, 4)), step), 1 - rate)
            sign = rng.choice([-1.0, 1.0], size=(n_draws, 1))
            shifted = _unit_noise("bimodal", rng, (n_draws, 4)) + sign * step
            rows.append((rate, step, float(np.mean(statistic(shifted, step) > threshold))))
    return rows
