"""What the wide histories allow: recall of oracle tests that know where the true
changes are, the noise's scale and its AR(1) coefficient (issue #21's ceiling).

For each true step of `changepoint_wide.wide_histories`, between its true neighbours:

- **means**: the difference of the two segments' means, its variance from the known
  noise with the AR(1) long-run factor (1 + phi) / (1 - phi), at the true position, its
  p times the positions of the true segment (Bonferroni). The oracle of section
  000000000000000 of NOTES-changepoint.md (which used Siegmund's search correction).
- **prewhitened**: the step by least squares on the prewhitened runs (`x_t - phi
  x_(t-1)`, the efficient test under AR(1) noise: most of a step's evidence is the night
  it happens), known innovation variance, at the true position, p times the positions.
- **prewhitened, placed**: the same statistic searched over every position of the true
  segment; the step counts where the largest is significant and lies within
  MATCH_NIGHTS of the truth, as a detector's report must.

With phi = 0 (Gaussian, Student-t, bimodal) the prewhitened test is the difference of
means. The tests weigh runs by their values with the robust sigma as the noise's
scale: right for Gaussian and AR(1) noise, flattering for Student-t and bimodal noise,
whose variance is larger than their robust sigma says (there the rows are no bound).

    .venv/bin/python benchmarks/changepoint_oracle.py [--seed 20261127] [--series 600] [--families ar1]
    .venv/bin/python benchmarks/changepoint_oracle.py --null      # what Bonferroni over positions costs

Bonferroni over positions is conservative; `--null` measures by how much: the share of
change-free AR(1) segments whose largest prewhitened |z| passes the Bonferroni threshold
of each alpha (at phi 0.5-0.8 the statistic is rough over positions and the two are
close; see NOTES-changepoint.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import ndtr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from changepoint_wide import DEV_SEED, MATCH_NIGHTS, WIDE_FAMILIES, wide_histories  # noqa: E402

ALPHAS = (0.005, 0.01, 0.05)


def _whiten(v: np.ndarray, phi: float) -> np.ndarray:
    """Prais-Winsten prediction errors, as `pipelines.changepoint.ar1` whitens; written
    again here so that the yardstick shares no code with the detector it measures."""
    return np.concatenate([np.sqrt(1.0 - phi * phi) * v[:1], v[1:] - phi * v[:-1]])


def prewhitened_z(seg: np.ndarray, phi: float) -> np.ndarray:
    """|z| of a level step at each split k = 1..len(seg)-1 of seg (noise of marginal
    sd 1, AR(1) coefficient phi), by least squares on the prewhitened runs with the
    innovation variance known."""
    n = len(seg)
    innov = np.sqrt(1.0 - phi * phi)
    y = _whiten(seg, phi) / innov
    one = _whiten(np.ones(n), phi) / innov
    y_res = y - one * (one @ y) / (one @ one)
    out = np.empty(n - 1)
    for k in range(1, n):
        s = _whiten((np.arange(n) >= k).astype(float), phi) / innov
        s_res = s - one * (one @ s) / (one @ one)
        out[k - 1] = abs(s_res @ y_res) / np.sqrt(s_res @ s_res)
    return out


def means_z(seg: np.ndarray, k: int, phi: float) -> float:
    left, right = seg[:k], seg[k:]
    return abs(right.mean() - left.mean()) / np.sqrt((1 / len(left) + 1 / len(right)) * (1 + phi) / (1 - phi))


def oracle_rows(histories: list[dict]) -> list[tuple[str, float, float, float, int]]:
    """Per true step: (family, p of means, p of prewhitened at the truth, p of the
    searched maximum, its distance from the truth)."""
    rows = []
    for h in histories:
        x, n = h["x"], len(h["x"])
        phi = float(h["label"].split()[1]) if h["family"] == "ar1" else 0.0
        truth = [c for c, _, _ in h["changes"]]
        bounds = [0, *truth, n]
        for j, (c, rel, sig) in enumerate(h["changes"]):
            noise = abs(rel) / sig  # the history's noise scale (robust sigma 1 in wide_noise)
            seg = (x[bounds[j]:bounds[j + 2]] - 1.0) / noise
            k, m = c - bounds[j], len(seg)
            z = prewhitened_z(seg, phi)
            best = int(np.argmax(z))
            rows.append((h["family"], min(1.0, 2 * ndtr(-means_z(seg, k, phi)) * m),
                         min(1.0, 2 * ndtr(-z[k - 1]) * m), min(1.0, 2 * ndtr(-z[best]) * m), abs(best + 1 - k)))
    return rows


def null_sizes(draws: int = 4000, seed: int = 0) -> list[tuple[int, float, float, float]]:
    """(segment length, phi, alpha, share of change-free segments whose largest
    prewhitened |z| passes the two-sided Bonferroni threshold of alpha over the
    segment's positions)."""
    from scipy.special import ndtri

    rng = np.random.default_rng(seed)
    out = []
    for n in (40, 100, 200):
        for phi in (0.0, 0.3, 0.5, 0.8):
            largest = np.empty(draws)
            for d in range(draws):
                e = rng.standard_normal(n)
                x = np.empty(n)
                x[0] = e[0]
                for t in range(1, n):
                    x[t] = phi * x[t - 1] + np.sqrt(1 - phi * phi) * e[t]
                largest[d] = prewhitened_z(x, phi).max()
            for a in ALPHAS:
                out.append((n, phi, a, float(np.mean(largest > -ndtri(a / (2 * (n - 1)))))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEV_SEED)
    ap.add_argument("--series", type=int, default=300, help="histories per family")
    ap.add_argument("--families", nargs="+", default=list(WIDE_FAMILIES), choices=WIDE_FAMILIES)
    ap.add_argument("--null", action="store_true", help="measure the size of Bonferroni over positions instead")
    args = ap.parse_args()
    t0 = time.time()
    if args.null:
        print("Change-free AR(1) segments: share past the Bonferroni threshold of alpha (4,000 draws each)")
        print(f"{'runs':>5s} {'phi':>5s} {'alpha':>6s} {'actual':>7s}")
        for n, phi, a, share in null_sizes():
            print(f"{n:5d} {phi:5.1f} {a:6.3f} {share:7.4f}")
        print(f"\nwall time {time.time() - t0:.0f} s")
        return
    histories = [h for h in wide_histories(args.series, args.seed) if h["family"] in args.families]
    rows = oracle_rows(histories)
    print(f"Oracle recall on the wide histories, seed {args.seed}, {args.series} per family "
          f"(placed: within {MATCH_NIGHTS} nights)")
    print(f"{'family':10s} {'steps':>6s} {'alpha':>6s} {'means':>7s} {'prewhit.':>9s} {'placed':>7s}")
    for fam in args.families:
        sel = [r for r in rows if r[0] == fam]
        for a in ALPHAS:
            means = np.mean([r[1] <= a for r in sel])
            pre = np.mean([r[2] <= a for r in sel])
            placed = np.mean([r[3] <= a and r[4] <= MATCH_NIGHTS for r in sel])
            print(f"{fam:10s} {len(sel):6d} {a:6.3f} {means:7.3f} {pre:9.3f} {placed:7.3f}")
    print(f"\nwall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
