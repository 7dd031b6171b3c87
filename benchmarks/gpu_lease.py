"""A lease's GPU night: `gpu_validation.py --night DIR` runs #22's validation and then
every suite through `python -m kernels_bench run --device cuda`, shard by shard, under
DIR, resumably: units already done are skipped, none starts that the call's budget is
not expected to fit (with --fill, the last minutes start one anyway), and nvidia-smi is
sampled every 500 ms beside them. How to run it on a lent machine:
benchmarks/NOTES-harness.md, "How to run the validation and the GPU night"."""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VALIDATION = Path(__file__).with_name("gpu_validation.py")

# --night: validation first (it is #22's proof), then the suites, most used first:
# suite -> (shards, seconds one shard is expected to take). A unit starts only where its
# estimate is left of the budget: a shard stopped midway keeps the cases it finished (the
# rest `stopped`) but is measured again whole by the next call. With --fill, the last
# FILL_MIN_S or more of the budget start a shard anyway: for a lease's last call.
# Measured on the H200: shards of 9-91 s on 2026-11-26 (roofline 66, llm-gemm 91 each,
# memory 40, norm 64, selftest-accuracy 9); on 2026-11-27 an attention shard of 4 was
# killed after 215 s at 28 of 48 cases (its sdpa-math cases take seconds each, one
# sdpa-efficient case hit the 60 s per-case kill), one of 8 took 189 and 199 s, and
# 103-245 s that afternoon; since inputs are drawn on the device (42017c2) one of 8 takes
# 44-58 s on an H200 or an H100 (the fourth lease): the set-up had been most of it.
NIGHT_SUITES = {"roofline": (1, 100), "llm-gemm": (2, 100), "memory": (1, 100), "norm": (1, 100),
                "selftest-accuracy": (1, 100), "attention": (8, 90), "collectives": (1, 100)}
# Few enough samples (262,323 rows, 1.2 MB of Parquet for 187 cases on the H200) that the
# shards travel back from a lent machine in one small file.
NIGHT_STOPPING = {"min_time_s": 0.05, "timeout_s": 1.0, "max_samples": 2000}
NIGHT_VALIDATION_S = 60  # a case or two at least; it resumes where a killed call stopped
FILL_MIN_S = 60.0  # --fill: a shard started with less would hardly finish a case (set-up, warm-up, stop grace)


def validation_complete(path: Path) -> bool:
    """Whether `path` holds a finished validation report."""
    try:
        return bool(json.loads(path.read_text()).get("complete"))
    except (OSError, ValueError):
        return False


def night(out: Path, budget_s: float, pool: str, device: str, smoke: bool = False,
          only: list[str] | None = None, fill: bool = False) -> int:
    """Validation, then every suite shard by shard, under `out`; units already done are
    skipped, and no unit starts that the remaining budget is not expected to fit.
    `smoke`: the smoke validation and the cpu-smoke suite, to check this loop anywhere.
    `only`: the units to run, by name (`validation`, suite names); the others are left.
    `fill`: a unit starts anyway while FILL_MIN_S are left (one at the budget is stopped
    and keeps what it finished; the next call measures it again)."""
    from kernels_bench.runner import run_harness, shard_complete

    deadline = time.monotonic() + budget_s
    out.mkdir(parents=True, exist_ok=True)
    state_file = out / "night.json"
    if not state_file.exists():  # one run id and date for the whole night, across calls
        now = dt.datetime.now(dt.timezone.utc)
        state_file.write_text(json.dumps({"run_id": now.strftime("gpu-%Y%m%dT%H%M"), "dt": now.strftime("%Y-%m-%d"),
                                          "pool": pool, "stopping": NIGHT_STOPPING}))
    state = json.loads(state_file.read_text())
    smi = _sample_nvidia_smi(out)
    validate = [sys.executable, str(VALIDATION), "--device", device, "--out", str(out / "validation.json")]
    units = [("validation", validate + (["--smoke", "--repeats", "1"] if smoke else []),
              lambda: validation_complete(out / "validation.json"), 60 if smoke else NIGHT_VALIDATION_S)]
    k = 0
    for suite, (shards, estimate_s) in ({"cpu-smoke": (1, 100)} if smoke else NIGHT_SUITES).items():
        for i in range(shards):
            shard_dir = out / "shards" / f"{suite}-{i}"
            units.append((f"{suite} {i}/{shards}", [
                sys.executable, "-m", "kernels_bench", "run", "--suite", suite, "--device", device,
                "--shard", f"{i}/{shards}", "--record-shard", str(k), "--run-id", state["run_id"],
                "--date", state["dt"], "--pool", state["pool"], "--out", str(shard_dir),
                *([] if smoke else ["--stopping", json.dumps(state["stopping"])])],
                lambda d=shard_dir: shard_complete(d), estimate_s))
            k += 1
    if only is not None:
        known = {name.split()[0] for name, *_ in units}
        if set(only) - known:
            print(f"error: --only {','.join(sorted(set(only) - known))}: no such unit (units: {', '.join(sorted(known))})",
                  file=sys.stderr)
            return 2
        units = [u for u in units if u[0].split()[0] in only]
    left = []
    try:
        for name, cmd, done, estimate_s in units:
            remaining = deadline - time.monotonic()
            if done():
                continue
            if remaining < estimate_s and not (fill and remaining >= FILL_MIN_S):
                left.append(name)
                continue
            log = out / "logs" / (name.replace(" ", "-").replace("/", "of") + ".log")
            log.parent.mkdir(exist_ok=True)
            print(f"[{time.strftime('%H:%M:%S')}] {name} (budget left {remaining:.0f} s)", flush=True)
            with log.open("a") as f:
                # At the budget the harness is stopped with SIGTERM and writes the cases it
                # measured, the rest `stopped`; such a shard is not complete, and the next
                # call measures it again.
                done_exit = run_harness(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, timeout_s=remaining,
                                        stop_grace_s=20)
                rc = done_exit.returncode if not done_exit.stopped else f"stopped at the budget ({done_exit.returncode})"
            if rc != 0 or not done():
                print(f"  {name}: exit {rc}; see {log}", flush=True)
                left.append(name)
    finally:
        if smi:
            smi.terminate()
    print(("night complete: " if not left else f"to do in the next call: {', '.join(left)}; ") + str(out))
    return 0 if not left else 3


def _sample_nvidia_smi(out: Path):
    """nvidia-smi sampling clocks, power and throttle reasons every 500 ms into `out`
    (for #26's hardware truth), or None where there is no nvidia-smi."""
    query = "timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active"
    try:
        (out / "nvidia-smi-q.txt").write_text(subprocess.run(["nvidia-smi", "-q"], capture_output=True,
                                                             text=True, timeout=30).stdout)
        n = len(list(out.glob("nvidia-smi-*.csv")))
        return subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv", "-lms", "500",
                                 "-f", str(out / f"nvidia-smi-{n}.csv")])
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"no nvidia-smi sampling: {e}", flush=True)
        return None
