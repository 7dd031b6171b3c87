"""Score pipelines.changepoint.detect on labelled series and on simulated nightly histories.

Three evaluations, all with the detector's default parameters (no per-series tuning):

1. TCPD: every series that annotations.json lists in the TCPD directory (`tcpd_dir`:
   $PERFLAKE_TCPD_DIR, else the checkout's sibling `shared/eval/tcpd`, i.e.
   ../shared/eval/tcpd from the repository root); TCPDBench's F1 (margin 5) and
   segmentation covering, averaged over series, side by side with the "zero" baseline
   (no change) and Apache Otava 0.8 (defaults: window 50, p 0.001).
   Missing values (TCPD's nulls) are dropped before detection and the reported indices
   are mapped back to the original positions, for every method alike.
2. Wide histories (the default run; `wide_histories`): noise family (Gaussian,
   Student-t with 2.5-6 degrees of freedom, bimodal with a second mode 3-6 sigma slow on
   10-35 % of nights, AR(1) with lag-1 autocorrelation 0.3-0.85), noise 0.2-3 % of the
   level, 30-400 nights, 0-2 steps of 1-30 robust sigma anywhere from night 10 to the
   last night (one in five in the last 5 nights), all drawn per history. Detector and
   Otava run once on each whole history; a true change is found when a report lies
   within 3 nights of it (one report per change). Recall by family and by size; false
   alarms are confirmed reports matching no change, per 1,000 nights of change-free
   histories (and of all histories). Two seeds: a development seed, and a held-out seed
   (HELDOUT_SEED) that no choice of the detector was tuned on. The generator and the
   scoring live in `changepoint_wide.py` (the 60-night histories of evaluation 3 in
   `changepoint_nightly.py`, the Otava runner in `changepoint_otava.py`). Both methods
   swept over their own levels and compared at matched false-alarm rates:
   `changepoint_matched.py`; what an oracle finds on the same draws (the true
   neighbours, noise and autocorrelation known): `changepoint_oracle.py`.
   With --stress, the harder draws of `changepoint_stress.py` instead (heavier tails,
   near-even two-mode noise, autocorrelation to 0.92, drift, variance changes, steps 4-12
   nights apart, wild nights and bursts), scored the same way, with its own development
   and held-out seeds.
3. With --nightly: the earlier simulated evaluation, histories of 60 nights with
   Gaussian, Student-t(3), bimodal and AR(1, phi=0.5) noise, each scaled to robust sigma
   1 (1.4826 x MAD of the population):
   (i) change-free histories, false alarms per 1,000 series-nights, whole-history
   (detector run once on 60 nights) and nightly (run on every prefix from night 20, an
   alarm counted once per index, as confirmed if it is ever reported confirmed); (ii) a
   step of 3/5/10 % at 3/4/6 sigma at a random night c in [20, 56], recall when run on
   the nights up to c+j, j = 0..3.

Otava runs in its own virtual environment as a subprocess so the project environment
stays clean: $PERFLAKE_OTAVA_PYTHON, else otava-venv/bin/python in the system's temporary
directory, made with

    python3.11 -m venv "${TMPDIR:-/tmp}/otava-venv"
    "${TMPDIR:-/tmp}/otava-venv/bin/pip" install "apache-otava==0.8.*"

If that interpreter is missing, Otava's columns read "n/a".

    .venv/bin/python benchmarks/changepoint_eval.py [--series 600] [--seed N] [--sets dev|heldout|both]
    .venv/bin/python benchmarks/changepoint_eval.py --stress --no-tcpd [--series 200] [--sets dev]
    .venv/bin/python benchmarks/changepoint_eval.py --nightly [--series 2000] [--online 1000]

With --sensitivity it runs only the TCPD scores with each constant of the detector's
stage 5 (jumps in series that wander) moved off its default, one at a time.

With --wander it runs only the alarms on long step-free histories whose level wanders
smoothly (a sine, a bend, a sine under AR(1) noise): `changepoint_nightly.wander_alarms`.

With --hold it runs only the check that a step, once found, stays reported on each of
its first 16 nights (defaults for it: --series 600 --seed 99).

With --oracle it runs only the power of an oracle test on bimodal noise (the law, level
and change run known), an upper bound for recall at c+3 at a given false-alarm rate.

With --drift it runs only the drifting-history check instead (section 00 of
NOTES-changepoint.md): change-free histories whose level drifts by 0.05 or 0.10 robust
sigma per run, Gaussian and t3 noise, every history replayed nightly, alarms per 1,000
series-nights counted as in (i) above (defaults for it: --series 120 --seed 5).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# Run as a script, this file would import `pipelines` through the virtualenv's editable
# install, i.e. from whichever checkout that install points at (in a git worktree: the
# main checkout, not the code under test). Put this checkout first.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # = REPO

from pipelines.changepoint import DetectorParams, covering, detect, f1_score  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its helper modules, run as a script or imported
from changepoint_nightly import (  # noqa: E402
    CHANGE_FREE_SIGMAS, DRIFT_KINDS, DRIFTS, FIRST_ONLINE_NIGHT, HOLD_NIGHTS, NIGHTS, NOISE_KINDS, SIGMA_MULTIPLES,
    STEPS, WANDER_KINDS, drift_alarms, false_alarms, hold, oracle_power, recall, wander_alarms, wander_histories,
)
from changepoint_otava import run_otava  # noqa: E402
from changepoint_stress import STRESS_DEV_SEED, STRESS_HELDOUT_SEED, stress_histories  # noqa: E402
from changepoint_wide import (  # noqa: E402,F401 (score_wide and the seeds are read by tests/test_benchmarks.py)
    DEV_SEED, HELDOUT_SEED, MATCH_NIGHTS, false_alarm_interval, format_span, recall_intervals, score_wide,
    wide_histories,
)

REPO = Path(__file__).resolve().parents[1]


def tcpd_dir() -> Path:
    """Where the TCPD series are: $PERFLAKE_TCPD_DIR, else shared/eval/tcpd beside the
    checkout (the repository root's parent holds `shared/`)."""
    env = os.environ.get("PERFLAKE_TCPD_DIR")
    return Path(env) if env else REPO.parent / "shared" / "eval" / "tcpd"


TCPD_DIR = tcpd_dir()
# --- TCPD ----------------------------------------------------------------------------

def load_tcpd(root: Path = TCPD_DIR) -> list[tuple[str, np.ndarray, dict]]:
    """(name, values with NaN for missing, annotations) for every annotated series present."""
    annotations = json.loads((root / "annotations.json").read_text())
    out = []
    for name in sorted(annotations):
        path = root / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        if data["n_dim"] != 1:
            continue
        raw = [np.nan if v is None else float(v) for v in data["series"][0]["raw"]]
        out.append((name, np.asarray(raw), annotations[name]))
    return out


def evaluate_tcpd() -> dict:
    """Per-method mean F1 and cover over the TCPD series, plus per-series rows."""
    data = load_tcpd()
    kept = [np.flatnonzero(np.isfinite(x)) for _, x, _ in data]
    ours = [[c.index for c in detect(x)] for _, x, _ in data]
    methods = {"perflake detect (defaults)": ours, "zero (no change)": [[] for _ in data]}
    otava = run_otava([x[k] for (_, x, _), k in zip(data, kept)])
    if otava is not None:
        methods["otava 0.8 (defaults)"] = [[int(k[i]) for i in cps] for cps, k in zip(otava, kept)]
    table = {}
    for method, preds in methods.items():
        f1s = [f1_score(ann, p) for (_, _, ann), p in zip(data, preds)]
        covs = [covering(ann, p, len(x)) for (_, x, ann), p in zip(data, preds)]
        table[method] = {"f1": float(np.mean(f1s)), "cover": float(np.mean(covs)),
                         "per_series": {name: (f, c, p) for (name, _, _), f, c, p in zip(data, f1s, covs, preds)}}
    return {"n_series": len(data), "methods": table}


def stage5_sensitivity(n_series: int | None = None) -> list[tuple[str, float, float, float]]:
    """TCPD F1 and cover with each constant of stage 5 (pipelines.changepoint.jumps)
    moved off its default, one at a time: (constant, value, F1, cover). Those constants
    were chosen with these series in view (there is no held-out set), so this is how much
    of the score hangs on the choice. `n_series`: the n shortest series only (a smoke
    run; the notes' figures are over all of them)."""
    from pipelines.changepoint import jumps as stage5

    data = sorted(load_tcpd(), key=lambda d: len(d[1]))[:n_series]
    defaults = {k: getattr(stage5, k) for k in ("WINDOW", "WANDER_RATIO", "SEASONAL_ACF", "MAX_ZERO_SHARE")}
    grid = {"WINDOW": (10, 15, 20, 30, 40),
            "WANDER_RATIO": tuple(float(np.sqrt(2 * (1 - r))) for r in (0.7, 0.8, 0.9, 0.95, 0.98)),
            "SEASONAL_ACF": (0.3, 0.4, 0.5, 0.6, 0.7, 1.0),
            "MAX_ZERO_SHARE": (0.1, 0.25, 0.5, 1.0)}
    rows = []
    try:
        for name, values in grid.items():
            for v in values:
                setattr(stage5, name, v)
                preds = [[c.index for c in detect(x)] for _, x, _ in data]
                rows.append((name, v, float(np.mean([f1_score(a, p) for (_, _, a), p in zip(data, preds)])),
                             float(np.mean([covering(a, p, len(x)) for (_, x, a), p in zip(data, preds)]))))
            setattr(stage5, name, defaults[name])
    finally:
        for k, v in defaults.items():
            setattr(stage5, k, v)
    return rows


def evaluate_wide(histories: list[dict]) -> dict:
    """Detector and Otava on the same labelled histories: method -> score_wide."""
    found = [detect(h["x"]) for h in histories]
    ours = [[(c.index, not c.provisional) for c in f] for f in found]
    out = {"perflake detect": score_wide(histories, ours)}
    steps_only = score_wide(histories, [[(c.index, not c.provisional) for c in f if not c.gradual] for f in found])
    out["perflake detect"]["gradual"] = (sum(c.gradual for f in found for c in f), sum(map(len, found)),
                                         steps_only["fa_quiet"], steps_only["fa_all"])
    otava = run_otava([h["x"] for h in histories])
    if otava is not None:
        out["otava 0.8 (defaults)"] = score_wide(histories, [[(i, True) for i in cps] for cps in otava])
    return out


def _report_wide(title: str, histories: list[dict]) -> None:
    def cell(v):
        return "  n/a" if v[1] == 0 else f"{v[0]:5.3f}"

    scores = evaluate_wide(histories)
    ours = scores["perflake detect"]
    print(f"\n{title} ({len(histories)} histories, found within {MATCH_NIGHTS} nights)")
    head = ["all", "3%&3sig", *ours["family"], *(f"{k}sig" for k in ours["sigma"]), "last5"]
    print(f"{'method':22s} " + " ".join(f"{h[:9]:>9s}" for h in head) + f" {'FA/1000q':>9s} {'FA/1000':>8s}")
    for method, sc in scores.items():
        vals = [sc["all"], sc["headline"], *sc["family"].values(), *sc["sigma"].values(), sc["tail"]["last 5 nights"]]
        print(f"{method:22s} " + " ".join(f"{cell(v):>9s}" for v in vals)
              + f" {sc['fa_quiet']:9.3f} {sc['fa_all']:8.3f}")
    print("  changes per column: " + " ".join(str(v[1]) for v in
          [ours["all"], ours["headline"], *ours["family"].values(), *ours["sigma"].values(),
           ours["tail"]["last 5 nights"]]))
    print("  perflake 3%&3sig by family: " + ", ".join(f"{f} {cell(v)} ({v[1]})" for f, v in ours["family_headline"].items())
          + f"; confirmed recall (all) {ours['confirmed_all']:.3f}; provisional or confirmed reports matching no "
          f"change {ours['unmatched_any_all']:.2f} per 1,000 nights; reported gradual: {ours['gradual'][0]} of "
          f"{ours['gradual'][1]} reports; FA/1000q / FA/1000 without them {ours['gradual'][2]:.3f} / "
          f"{ours['gradual'][3]:.3f}")
    for method, sc in scores.items():
        print(f"  {method} FA/1000q by family: "
              + ", ".join(f"{f} {v:.2f}" for f, v in sc["fa_quiet_family"].items()))
    # sampling error: the detector's recall, and its difference from each other method on the same histories
    print("  perflake detect recall, 95 % interval (bootstrap over the histories, 2,000 draws): "
          + ", ".join(format_span(k, v) for k, v in recall_intervals(ours).items()))
    print("  FA/1000q, 95 % interval (bootstrap over the change-free histories): "
          + ", ".join(format_span(m, false_alarm_interval(sc)) for m, sc in scores.items()))
    for method in [m for m in scores if m != "perflake detect"]:
        print(f"  perflake - {method}, recall, 95 % interval (paired bootstrap over the histories): "
              + ", ".join(format_span(k, v, signed=True) for k, v in recall_intervals(ours, scores[method]).items()))
    floors = DetectorParams()
    print(f"  steps above the detector's floors (>= {floors.min_rel_change:.0%} and >= {floors.min_sigma:g} sigma): "
          + ", ".join(f"{m} {cell(sc['above_floors'])}" for m, sc in scores.items())
          + f" ({ours['above_floors'][1]} of {ours['all'][1]} changes)")
    print(f"  ceiling over all steps for any method that reports nothing under the floors: "
          f"{ours['ceiling_floors']:.3f} (both floors), {ours['ceiling_rel_floor']:.3f} "
          f"(the {floors.min_rel_change:.0%} floor alone)")


# --- report ----------------------------------------------------------------------------

def _fmt(v, spec: str = ".3f") -> str:
    return "n/a" if v is None else format(v, spec)


def _report_drift(n_series: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"Drifting 60-night histories without a step, {n_series} per noise kind and drift, all replayed "
          f"nightly, seed {seed}\nalarms per 1,000 series-nights "
          f"(noise sigma {', '.join(f'{s:.1%}' for s in CHANGE_FREE_SIGMAS)} of the level)")
    print("confirmed reports split into steps and gradual changes (a level change not told from a drift)")
    print(f"{'noise':12s} {'drift/run':>9s} {'steps':>9s} {'gradual':>8s} {'provis.':>8s} {'nightly conf':>12s} "
          f"{'of them steps':>13s} {'nightly prov':>12s}")
    for kind in DRIFT_KINDS:
        for drift in DRIFTS:
            fa = drift_alarms(kind, drift, n_series, rng)
            print(f"{kind:12s} {drift:9.2f} {fa['steps']:9.3f} {fa['gradual']:8.3f} {fa['provisional']:8.3f} "
                  f"{fa['online_confirmed']:12.3f} {fa['online_steps']:13.3f} {fa['online_provisional']:12.3f}")


def _report_wander(n_series: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"Step-free 150-400-run histories whose level wanders smoothly by 1.5-4 sigma, {n_series} per kind, "
          f"seed {seed}\nalarms per 1,000 nights, whole histories")
    print(f"{'wander':12s} {'steps':>9s} {'gradual':>8s} {'provis.':>8s} {'otava':>7s}")
    for kind in WANDER_KINDS:
        fa = wander_alarms(wander_histories(kind, n_series, rng))
        print(f"{kind:12s} {fa['steps']:9.3f} {fa['gradual']:8.3f} {fa['provisional']:8.3f} "
              f"{_fmt(fa['otava'], '7.3f')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--series", type=int, default=None,
                    help="simulated histories per noise kind and test (default 600 wide histories per family; "
                         "2000 with --nightly, 120 with --drift, 600 with --hold)")
    ap.add_argument("--sets", choices=("dev", "heldout", "both"), default="both",
                    help=f"wide histories: the development seed ({DEV_SEED}, or --seed), the held-out seed "
                         f"({HELDOUT_SEED}), or both")
    ap.add_argument("--stress", action="store_true",
                    help=f"draw the harder stress histories (changepoint_stress; seeds {STRESS_DEV_SEED} and "
                         f"{STRESS_HELDOUT_SEED}) instead of the wide ones")
    ap.add_argument("--no-tcpd", action="store_true", help="skip the TCPD scores")
    ap.add_argument("--nightly", action="store_true",
                    help="run the 60-night evaluation replayed night by night (sections before 2026-11-24)")
    ap.add_argument("--online", type=int, default=1000, help="change-free histories replayed night by night")
    ap.add_argument("--seed", type=int, default=None, help="default 20260101; 5 with --drift, 99 with --hold")
    ap.add_argument("--per-series", action="store_true", help="print TCPD scores per series")
    ap.add_argument("--drift", action="store_true", help="run only the drifting-history check")
    ap.add_argument("--wander", action="store_true",
                    help="run only the check on long histories whose level wanders smoothly (no step)")
    ap.add_argument("--hold", action="store_true",
                    help="run only the check that a step stays reported on each of its first 16 nights")
    ap.add_argument("--oracle", action="store_true",
                    help="run only the oracle's power on bimodal noise (an upper bound at c+3)")
    ap.add_argument("--sensitivity", action="store_true",
                    help="run only the TCPD scores with stage 5's constants moved one at a time")
    args = ap.parse_args()
    t0 = time.perf_counter()

    print(f"detector under test: {detect.__code__.co_filename}")
    if args.drift:
        _report_drift(args.series or 120, 5 if args.seed is None else args.seed)
        print(f"\nwall time {time.perf_counter() - t0:.0f} s")
        return
    if args.wander:
        _report_wander(args.series or 150, 3 if args.seed is None else args.seed)
        print(f"\nwall time {time.perf_counter() - t0:.0f} s")
        return
    if args.hold:
        n, seed = args.series or 600, 99 if args.seed is None else args.seed
        rng = np.random.default_rng(seed)
        print(f"Steps still reported on night c+j ({n} histories per noise kind, seed {seed}; step night c in "
              f"[{FIRST_ONLINE_NIGHT}, {NIGHTS - HOLD_NIGHTS}])")
        print(f"{'noise':12s} " + " ".join(f"{f'c+{j}':>5s}" for j in range(HOLD_NIGHTS)))
        for kind in NOISE_KINDS:
            print(f"{kind:12s} " + " ".join(f"{v:5.2f}" for v in hold(kind, n, rng)))
        print(f"\nwall time {time.perf_counter() - t0:.0f} s")
        return
    if args.oracle:
        print("Oracle on bimodal noise (knows the noise law, the level before and the change run; 4 runs c..c+3)")
        for rate, step, power in oracle_power():
            print(f"  false alarms per test {rate:.3f}  step {step:g} sigma  power {power:.3f}")
        print(f"\nwall time {time.perf_counter() - t0:.0f} s")
        return
    if args.sensitivity:
        print("TCPD F1 / cover with one constant of stage 5 (jumps in wandering series) moved"
              + (f" (the {args.series} shortest series only)" if args.series else ""))
        for name, v, f1, cover in stage5_sensitivity(args.series):
            print(f"  {name:15s} {v:6.3f}  F1 {f1:.3f}  cover {cover:.3f}")
        print(f"\nwall time {time.perf_counter() - t0:.0f} s")
        return
    if not args.no_tcpd:
        _report_tcpd(args.per_series)
    if not args.nightly:
        n = args.series or 600
        if args.stress:
            draw, seeds, what = stress_histories, {"dev": STRESS_DEV_SEED, "heldout": STRESS_HELDOUT_SEED}, "Stress"
        else:
            draw, seeds, what = wide_histories, {"dev": DEV_SEED, "heldout": HELDOUT_SEED}, "Wide"
        if args.seed is not None:
            seeds["dev"] = args.seed
        names = {"dev": "development", "heldout": "held-out"}
        for key in (("dev", "heldout") if args.sets == "both" else (args.sets,)):
            _report_wide(f"{what} histories, {names[key]} seed {seeds[key]}: {n} per family", draw(n, seeds[key]))
        print(f"\nwall time {time.perf_counter() - t0:.0f} s")
        return
    _report_nightly(args.series or 2000, 20260101 if args.seed is None else args.seed, args.online)
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")


def _report_tcpd(per_series: bool) -> None:
    tcpd = evaluate_tcpd()
    print(f"TCPD: {tcpd['n_series']} annotated series (margin 5)")
    print(f"{'method':32s} {'F1':>6s} {'cover':>6s}")
    for method, row in tcpd["methods"].items():
        print(f"{method:32s} {row['f1']:6.3f} {row['cover']:6.3f}")
    print(f"{'targets (TCPD paper, binseg)':32s} {0.744:6.3f} {0.706:6.3f}")
    if per_series:
        ours = tcpd["methods"]["perflake detect (defaults)"]["per_series"]
        zero = tcpd["methods"]["zero (no change)"]["per_series"]
        for name, (f, c, p) in ours.items():
            print(f"  {name:20s} F1 {f:.3f} (zero {zero[name][0]:.3f})  cover {c:.3f} (zero {zero[name][1]:.3f})  cps {p}")


def _report_nightly(n_series: int, seed: int, n_online: int) -> None:
    rng = np.random.default_rng(seed)
    print(f"\nSimulated 60-night histories, {n_series} per noise kind and test, seed {seed}")
    print("(i) change-free, false alarms per 1,000 series-nights "
          f"(noise sigma {', '.join(f'{s:.1%}' for s in CHANGE_FREE_SIGMAS)} of the level)")
    print("(confirmed counts gradual changes too; 'of them steps' leaves them out)")
    print(f"{'noise':12s} {'confirmed':>9s} {'gradual':>8s} {'provis.':>8s} {'nightly conf':>12s} {'of them steps':>13s} "
          f"{'nightly prov':>12s} {'otava':>7s}")
    for kind in NOISE_KINDS:
        fa = false_alarms(kind, n_series, n_online, rng)
        print(f"{kind:12s} {fa['confirmed']:9.3f} {fa['gradual']:8.3f} {fa['provisional']:8.3f} "
              f"{fa['online_confirmed']:12.3f} {fa['online_steps']:13.3f} {fa['online_provisional']:12.3f} "
              f"{_fmt(fa['otava'], '7.3f')}")
    print(f"(ii) injected step of {'/'.join(f'{s:.0%}' for s in STEPS)} at "
          f"{'/'.join(f'{m:g}' for m in SIGMA_MULTIPLES)} sigma, recall (change found within +-1 night)")
    print(f"{'noise':12s} {'c+0':>6s} {'c+1':>6s} {'c+2':>6s} {'c+3':>6s} {'conf c+3':>8s} "
          f"{'worst cell (c+3)':>22s} {'otava c+3':>9s}")
    for kind in NOISE_KINDS:
        rc = recall(kind, n_series, rng)
        (ws, wm), wv = min(rc["cells"].items(), key=lambda kv: kv[1])
        by = " ".join(f"{v:6.3f}" for v in rc["by_run"])
        print(f"{kind:12s} {by} {rc['confirmed_by3']:8.3f} {f'{ws:.0%} @ {wm:g} sigma: {wv:.3f}':>22s} "
              f"{_fmt(rc['otava_by3'], '9.3f')}")


if __name__ == "__main__":
    main()
