"""Harder labelled histories than `changepoint_wide`: what a nightly perf history does
that the wide draws leave out.

Seven families, each a way that noise can pose as a step or hide one:
- heavy: Student-t with 1.2-2.5 degrees of freedom (wild nights far more often than t3);
- bimodal: a second mode 2-8 sigma slow on 5-45 % of nights (a near-even split included);
- ar1: lag-1 autocorrelation 0.3-0.92, up to where a level wanders for weeks;
- drift: Gaussian or t5 noise on a level that drifts 0.005-0.05 sigma per night for the
  whole history (not a change to report; the steps on top of it are);
- variance: Gaussian noise whose scale grows or shrinks 2-4x at one or two nights (not a
  change to report);
- close: 2-4 steps, 4-12 nights apart (the wide draws keep steps 10 apart);
- outliers: Gaussian noise with 2-5 % wild nights (8-40 sigma, slow) and a burst of 2-3
  slow nights now and then.

Per history: 20-400 nights (log-uniform), noise 0.2-3 % of the level (log-uniform), 0
(30 %), 1 (40 %) or 2 (30 %) steps of 1-30 robust sigma (log-uniform; "close" draws 2-4),
up or down, at a night from 8 to the last (one in five within the last 5 nights). A
step's size in sigma is measured against the noise at the step (for "variance": the
larger scale of the two sides). Same record as `wide_histories`, scored by `score_wide`.
Pure: no detector, no I/O.
"""

from __future__ import annotations

import numpy as np

STRESS_FAMILIES = ("heavy", "bimodal", "ar1", "drift", "variance", "close", "outliers")
STRESS_DEV_SEED = 7
STRESS_HELDOUT_SEED = 20261125  # never tuned on: run it to report, not to choose
FIRST_STEP_NIGHT = 8


def _scaled(x: np.ndarray) -> np.ndarray:
    """x moved and scaled to sample median 0 and sample robust sigma 1 (1.4826 x MAD),
    so that a step's size in sigma means what the detector measures."""
    med = float(np.median(x))
    mad = 1.4826 * float(np.median(np.abs(x - med)))
    return (x - med) / mad if mad > 0 else x - med


def stress_noise(family: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    """(noise with robust sigma about 1, the local noise scale per night, a label)."""
    scale = np.ones(n)
    if family == "heavy":
        df = float(rng.uniform(1.2, 2.5))
        return _scaled(rng.standard_t(df, n)), scale, f"t{df:.1f}"
    if family == "bimodal":
        share, gap = float(rng.uniform(0.05, 0.45)), float(rng.uniform(2.0, 8.0))
        x = rng.standard_normal(n) + gap * (rng.random(n) < share)
        return _scaled(x), scale, f"bimodal {share:.2f}@{gap:.1f}"
    if family == "ar1":
        phi = float(rng.uniform(0.3, 0.92))
        eps = rng.standard_normal(n) * np.sqrt(1 - phi**2)
        x = np.empty(n)
        x[0] = rng.standard_normal()
        for t in range(1, n):
            x[t] = phi * x[t - 1] + eps[t]
        return x, scale, f"ar1 {phi:.2f}"
    if family == "drift":
        rate = float(rng.choice([-1.0, 1.0]) * np.exp(rng.uniform(np.log(0.005), np.log(0.05))))
        base = rng.standard_normal(n) if rng.random() < 0.5 else _scaled(rng.standard_t(5, n))
        return base + rate * np.arange(n), scale, f"drift {rate:+.3f}/night"
    if family == "variance":
        for _ in range(int(rng.integers(1, 3))):
            at = int(rng.integers(5, max(6, n - 5)))
            factor = float(np.exp(rng.uniform(np.log(2.0), np.log(4.0))))
            scale[at:] *= factor if rng.random() < 0.5 else 1.0 / factor
        scale /= float(np.median(scale))
        return rng.standard_normal(n) * scale, scale, "variance x2-4"
    if family == "close":
        return (rng.standard_normal(n) if rng.random() < 0.5 else _scaled(rng.standard_t(5, n))), scale, "close"
    if family == "outliers":
        x = rng.standard_normal(n)
        wild = rng.random(n) < rng.uniform(0.02, 0.05)
        x[wild] += np.exp(rng.uniform(np.log(8.0), np.log(40.0), int(wild.sum())))
        for _ in range(int(rng.poisson(n / 100))):
            at, width = int(rng.integers(0, n)), int(rng.integers(2, 4))
            x[at:at + width] += float(rng.uniform(3.0, 8.0))
        return x, scale, "outliers"
    raise ValueError(f"unknown stress family {family!r}")


def _positions(family: str, n: int, k: int, rng: np.random.Generator) -> list[int]:
    """k step nights, FIRST_STEP_NIGHT or later, one in five in the last 5 nights; 10
    nights apart at least, or 4-12 nights apart for "close" (as many as fit)."""
    if family == "close":
        first = int(rng.integers(FIRST_STEP_NIGHT, max(FIRST_STEP_NIGHT + 1, n - 12 * (k - 1) - 1)))
        nights = [first]
        for _ in range(k - 1):
            nxt = nights[-1] + int(rng.integers(4, 13))
            if nxt >= n:
                break
            nights.append(nxt)
        return nights
    nights: list[int] = []
    for _ in range(50):
        if len(nights) == k:
            break
        c = (int(rng.integers(max(FIRST_STEP_NIGHT, n - 5), n)) if rng.random() < 0.2
             else int(rng.integers(FIRST_STEP_NIGHT, n)))
        if all(abs(c - o) >= 10 for o in nights):
            nights.append(c)
    return sorted(nights)


def stress_histories(n_per_family: int, seed: int) -> list[dict]:
    """Labelled histories, n_per_family per family of STRESS_FAMILIES (see the module
    docstring). Each: {"family", "label", "x", "changes": [(night, rel size, sigmas)]}."""
    rng = np.random.default_rng(seed)
    out = []
    for family in STRESS_FAMILIES:
        for _ in range(n_per_family):
            n = int(np.exp(rng.uniform(np.log(20), np.log(401))))
            noise = float(np.exp(rng.uniform(np.log(0.002), np.log(0.03))))
            unit, scale, label = stress_noise(family, n, rng)
            x = 1.0 + noise * unit
            k = int(rng.integers(2, 5)) if family == "close" else int(rng.choice([0, 1, 2], p=[0.30, 0.40, 0.30]))
            changes = []
            for c in _positions(family, n, k, rng):
                sig = float(np.exp(rng.uniform(np.log(1.0), np.log(30.0))))
                local = max(float(scale[c - 1]), float(scale[c]))
                rel = float(rng.choice([-1.0, 1.0])) * sig * noise * local
                x[c:] += rel
                changes.append((c, rel, sig))
            out.append({"family": family, "label": label, "x": x, "changes": changes})
    return out
