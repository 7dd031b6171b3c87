"""Wide labelled histories for the change detector, and how a method's reports on them
are scored: the generator the issue #21 evaluation draws from (`wide_histories`), the
matching of reports to true changes, recall by family, size and position, false alarms,
and the ceiling that the detector's effect floors put on recall (`floor_ceiling`).

Pure: no detector, no Otava, no I/O; `changepoint_eval` and `changepoint_stress` run the
methods and print.
"""

from __future__ import annotations

import numpy as np

from pipelines.changepoint import DetectorParams

WIDE_FAMILIES = ("gaussian", "student_t", "bimodal", "ar1")
DEV_SEED = 1
HELDOUT_SEED = 20261124  # never tuned on: run it to report, not to choose
MATCH_NIGHTS = 3  # a report within this many nights of a change finds it
SIGMA_CLASSES = ((1, 2), (2, 3), (3, 5), (5, 10), (10, 31))
HEADLINE = (0.03, 3.0)  # the promise: steps of >= 3 % and >= 3 robust sigma


def _robust_scale(cdf, lo: float = -50.0, hi: float = 50.0) -> tuple[float, float]:
    """(median, 1.4826 x MAD) of a continuous law given by its CDF."""
    from scipy.optimize import brentq

    med = brentq(lambda v: cdf(v) - 0.5, lo, hi)
    mad = brentq(lambda d: cdf(med + d) - cdf(med - d) - 0.5, 1e-9, hi)
    return med, 1.4826 * mad


def wide_noise(family: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """n nights of noise of `family` with robust sigma 1 (population 1.4826 x MAD about
    the median, median 0), its parameters drawn, and a label of those parameters."""
    from scipy.stats import norm, t as student

    if family == "gaussian":
        return rng.standard_normal(n), "gaussian"
    if family == "student_t":
        df = float(rng.uniform(2.5, 6.0))
        return rng.standard_t(df, n) / (1.4826 * student.ppf(0.75, df)), f"t{df:.1f}"
    if family == "bimodal":  # a slow second mode (clocks, placement) on some nights
        share, gap = float(rng.uniform(0.10, 0.35)), float(rng.uniform(3.0, 6.0))
        med, scale = _robust_scale(lambda v: (1 - share) * norm.cdf(v) + share * norm.cdf(v - gap))
        x = rng.standard_normal(n) + gap * (rng.random(n) < share)
        return (x - med) / scale, f"bimodal {share:.2f}@{gap:.1f}"
    if family == "ar1":
        phi = float(rng.uniform(0.3, 0.85))
        eps = rng.standard_normal(n) * np.sqrt(1 - phi**2)
        x = np.empty(n)
        x[0] = rng.standard_normal()
        for t in range(1, n):
            x[t] = phi * x[t - 1] + eps[t]
        return x, f"ar1 {phi:.2f}"
    raise ValueError(f"unknown noise family {family!r}")


def wide_histories(n_per_family: int, seed: int) -> list[dict]:
    """Labelled histories: per family, n_per_family draws of length (30-400 nights,
    log-uniform), noise (0.2-3 % of the level, log-uniform) and 0 (30 %), 1 (45 %) or
    2 (25 %) steps, each 1-30 robust sigma (log-uniform), up or down, at a night from 10
    to the last (one in five within the last 5 nights), 10 nights apart at least.
    Each: {"family", "label", "x", "changes": [(night, rel size, sigmas)]}."""
    rng = np.random.default_rng(seed)
    out = []
    for family in WIDE_FAMILIES:
        for _ in range(n_per_family):
            n = int(np.exp(rng.uniform(np.log(30), np.log(401))))
            noise = float(np.exp(rng.uniform(np.log(0.002), np.log(0.03))))
            unit, label = wide_noise(family, n, rng)
            x = 1.0 + noise * unit
            k = int(rng.choice([0, 1, 2], p=[0.30, 0.45, 0.25]))
            nights: list[int] = []
            for _ in range(50):  # draw positions until k fit 10 nights apart
                if len(nights) == k:
                    break
                c = int(rng.integers(max(10, n - 5), n)) if rng.random() < 0.2 else int(rng.integers(10, n))
                if all(abs(c - o) >= 10 for o in nights):
                    nights.append(c)
            changes = []
            for c in sorted(nights):
                sig = float(np.exp(rng.uniform(np.log(1.0), np.log(30.0))))
                rel = float(rng.choice([-1.0, 1.0])) * sig * noise
                x[c:] += rel
                changes.append((c, rel, sig))
            out.append({"family": family, "label": label, "x": x, "changes": changes})
    return out


def _match(truth: list[int], reported: list[int]) -> tuple[set[int], int]:
    """(true changes found, reports left over): each report finds at most one change
    within MATCH_NIGHTS, nearest first."""
    unused, found = sorted(reported), set()
    for c in truth:
        near = [r for r in unused if abs(r - c) <= MATCH_NIGHTS]
        if near:
            unused.remove(min(near, key=lambda r: abs(r - c)))
            found.add(c)
    return found, len(unused)


def score_wide(histories: list[dict], reports: list[list[tuple[int, bool]]]) -> dict:
    """Recall (overall, headline class, by family, by sigma class, by position) and false
    alarms of one method. reports: per history, (index, confirmed) of each report.
    Families are those of the histories, in order of first appearance. ceiling_floors /
    ceiling_rel_floor: the share of steps at or above both default floors / the
    relative floor, i.e. the recall over all steps of a method that found every step
    above them and none below."""
    families = list(dict.fromkeys(h["family"] for h in histories))
    rows = []  # per true change: family, rel, sigmas, from the end, found, found confirmed, history
    fa_quiet = fa_all = prov_all = nights_quiet = nights_all = 0
    quiet_by_family = {f: [0, 0] for f in families}  # confirmed reports, nights
    quiet = []  # per change-free history: confirmed reports, nights
    for i_h, (h, rep) in enumerate(zip(histories, reports)):
        truth = [c for c, _, _ in h["changes"]]
        found, _ = _match(truth, [i for i, _ in rep])
        found_conf, left_conf = _match(truth, [i for i, conf in rep if conf])
        _, left_any = _match(truth, [i for i, _ in rep])
        n = len(h["x"])
        nights_all += n
        fa_all += left_conf
        prov_all += left_any
        if not truth:
            nights_quiet += n
            fa_quiet += left_conf
            quiet.append((left_conf, n))
            quiet_by_family[h["family"]][0] += left_conf
            quiet_by_family[h["family"]][1] += n
        for c, rel, sig in h["changes"]:
            rows.append((h["family"], abs(rel), sig, n - c, c in found, c in found_conf, i_h))
    fam = np.array([r[0] for r in rows])
    rel = np.array([r[1] for r in rows])
    sig = np.array([r[2] for r in rows])
    tail = np.array([r[3] for r in rows])
    hit = np.array([r[4] for r in rows])
    hit_conf = np.array([r[5] for r in rows])

    def share(sel):
        return (float(hit[sel].mean()), int(sel.sum())) if sel.any() else (float("nan"), 0)

    head = (rel >= HEADLINE[0] - 1e-12) & (sig >= HEADLINE[1])
    floors = DetectorParams()  # the defaults' effect floors: smaller steps are not reported by design
    above = (rel >= floors.min_rel_change) & (sig >= floors.min_sigma)
    above_rel = rel >= floors.min_rel_change
    return {
        "all": share(np.ones(len(rows), bool)), "headline": share(head), "above_floors": share(above),
        # the most a method that reports nothing under the floors can reach, over all steps
        "ceiling_floors": float(above.mean()) if len(rows) else float("nan"),
        "ceiling_rel_floor": float(above_rel.mean()) if len(rows) else float("nan"),
        "confirmed_all": float(hit_conf.mean()) if len(rows) else float("nan"),
        "family": {f: share(fam == f) for f in families},
        "family_headline": {f: share((fam == f) & head) for f in families},
        "fa_quiet_family": {f: 1000.0 * c / n if n else float("nan") for f, (c, n) in quiet_by_family.items()},
        "sigma": {f"{lo}-{hi if hi < 31 else 30}": share((sig >= lo) & (sig < hi)) for lo, hi in SIGMA_CLASSES},
        "tail": {"last 5 nights": share(tail <= 5), "earlier": share(tail > 5)},
        "fa_quiet": 1000.0 * fa_quiet / max(nights_quiet, 1), "fa_all": 1000.0 * fa_all / max(nights_all, 1),
        "quiet_histories": quiet,  # (confirmed reports, nights) per change-free history (`false_alarm_interval`)
        "unmatched_any_all": 1000.0 * prov_all / max(nights_all, 1),
        # each true change: its history, and whether it was found (`recall_intervals`)
        "steps": {"history": [r[6] for r in rows], "family": fam.tolist(), "headline": head.tolist(),
                  "found": hit.tolist(), "histories": len(histories)},
        "misses": [i for i, h in enumerate(histories) for c, _, _ in h["changes"]
                   if c not in _match([c2 for c2, _, _ in h["changes"]], [r for r, _ in reports[i]])[0]],
    }


def recall_intervals(score: dict, other: dict | None = None, draws: int = 2000, seed: int = 0,
                     level: float = 0.95) -> dict[str, tuple[float, float, float]]:
    """Sampling error of recall: for all steps, the headline class and each family,
    (recall, low, high) of `score` (a `score_wide`), or with `other` (the same histories
    scored for another method) (recall of score - recall of other, low, high), the
    interval a percentile bootstrap over histories at `level`.

    Histories, not steps, are drawn: two steps of one history share its noise and its
    length, and the two methods are paired on the same draws, so a difference is judged
    against the spread of differences, not of two independent recalls (which overstates
    it: the steps every method finds or misses are most of them)."""
    steps = score["steps"]
    hist = np.asarray(steps["history"], dtype=int)
    fam = np.asarray(steps["family"])
    classes = {"all": np.ones(len(hist), bool), "headline": np.asarray(steps["headline"], dtype=bool)}
    classes.update({f: fam == f for f in dict.fromkeys(steps["family"])})
    found = np.asarray(steps["found"], dtype=float)
    if other is not None:
        if other["steps"]["history"] != steps["history"]:
            raise ValueError("recall_intervals: the two scores are of different histories")
        found_other = np.asarray(other["steps"]["found"], dtype=float)
    n_hist = steps["histories"]
    counts = _resampled(n_hist, draws, seed)

    def recall(f: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, float]:
        """(recall in each draw, recall itself): a draw weighs each history by how often it was drawn."""
        hits = np.bincount(hist[sel], weights=f[sel], minlength=n_hist)
        n_steps = np.bincount(hist[sel], minlength=n_hist)
        return (counts @ hits) / np.maximum(counts @ n_steps, 1), float(hits.sum() / n_steps.sum())

    out = {}
    for name, sel in classes.items():
        if not sel.any():
            continue
        draws_a, est = recall(found, sel)
        if other is not None:
            draws_b, est_b = recall(found_other, sel)
            draws_a, est = draws_a - draws_b, est - est_b
        out[name] = (est, *_percentiles(draws_a, level))
    return out


def false_alarm_interval(score: dict, draws: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(false alarms per 1,000 change-free nights, low, high) of a `score_wide`, the
    interval a percentile bootstrap over its change-free histories: a history that
    wanders may raise several, so they are not counted as independent events."""
    if not score["quiet_histories"]:
        return float("nan"), float("nan"), float("nan")
    alarms, nights = np.asarray(score["quiet_histories"], dtype=float).T
    counts = _resampled(len(nights), draws, seed)
    return (1000.0 * float(alarms.sum() / nights.sum()),
            *_percentiles(1000.0 * (counts @ alarms) / (counts @ nights), level))


def format_span(name: str, span: tuple[float, float, float], signed: bool = False) -> str:
    """'name value [low, high]' ('value [low, high]' without a name), signed (+/-) for a difference."""
    f = "+.3f" if signed else ".3f"
    return (f"{name} " if name else "") + f"{span[0]:{f}} [{span[1]:{f}}, {span[2]:{f}}]"


def _resampled(n: int, draws: int, seed: int) -> np.ndarray:
    """(draws, n): how often each of n histories is drawn in each bootstrap draw of n."""
    return np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=draws)


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
