"""Planning a sweep into shards, and running one shard on a worker: lease a device,
run the harness in a child process, land its files atomically."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from math import ceil
from pathlib import Path

from pipelines.config.lake import Lake, safe_date, safe_name
from kernels_bench.runner import STOPPED_EXIT, measured_cases, run_harness
from pipelines.landing.files import land_shard
from pipelines.sweep.leasing import lease_device
from pipelines.config.pools import pool as get_pool

MIN_CASES_PER_SHARD = 4
REPO_ROOT = Path(__file__).resolve().parents[2]  # pipelines/sweep/ -> the checkout, where kernels_bench is


def plan_shards(*, run_id: str, dt: str, pool: str, suites: list[str], reason: str,
                kernel: str | None = None, stopping: dict | None = None, inject: list | None = None,
                case_ids: list[str] | None = None, max_shards: int | None = None) -> list[dict]:
    """One dict per shard (JSON-serialisable, for Airflow's dynamic task mapping)."""
    from kernels_bench.suite import load_suite

    p = get_pool(pool)
    safe_name(run_id, "run id")
    safe_date(dt)
    shards = []
    for suite_name in suites:
        suite = load_suite(suite_name).filter(kernel, case_ids)
        if not suite.cases:
            continue
        n = max(1, min(max_shards or p.slots, ceil(len(suite.cases) / MIN_CASES_PER_SHARD)))
        for i in range(n):
            shards.append({"run_id": run_id, "dt": dt, "pool": pool, "suite": suite.name, "kernel": kernel,
                           "shard": i, "num_shards": n, "reason": reason, "stopping": stopping,
                           "inject": inject, "cases": case_ids})
    # Shard numbers are unique within the run so that each lands in its own file.
    for global_index, s in enumerate(shards):
        s["landing_shard"] = global_index
    return shards


def shard_label(shard: dict) -> str:
    return f"{shard['pool']}/{shard['suite']}#{shard['shard']}of{shard['num_shards']}"


def run_shard(shard: dict, lake: Lake, *, attempt: int = 1, dag_run_id: str = "cli",
              timeout_s: float | None = None) -> dict:
    """Measure and land one shard; returns a summary. The harness runs in a child
    process with only the leased device visible."""
    p = get_pool(shard["pool"])
    with lease_device(p.name, p.slots) as index:
        env = dict(os.environ)
        device = p.device(index)
        if p.device_kind == "gpu":
            env["CUDA_VISIBLE_DEVICES"] = str(index)
            device = "cuda:0"
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
        tmp = Path(tempfile.mkdtemp(prefix="shard-", dir=_tmp_root(lake)))
        try:
            cmd = [sys.executable, "-m", "kernels_bench", "run", "--suite", shard["suite"], "--device", device,
                   "--shard", f"{shard['shard']}/{shard['num_shards']}", "--out", str(tmp),
                   "--record-shard", str(shard["landing_shard"]),
                   "--run-id", shard["run_id"], "--pool", shard["pool"], "--reason", shard["reason"],
                   "--dag-run-id", dag_run_id, "--attempt", str(attempt), "--date", shard["dt"]]
            if shard.get("kernel"):
                cmd += ["--kernel", shard["kernel"]]
            if shard.get("cases"):
                cmd += ["--cases", ",".join(shard["cases"])]
            if shard.get("stopping"):
                cmd += ["--stopping", json.dumps(shard["stopping"])]
            if shard.get("inject"):
                cmd += ["--inject", json.dumps(shard["inject"])]
            where = dict(dt=shard["dt"], pool=shard["pool"], run_id=shard["run_id"], shard=shard["landing_shard"])
            try:
                proc = run_harness(cmd, env=env, timeout_s=timeout_s)
            except BaseException:  # the task itself timed out or was terminated: keep what was measured
                try:
                    _land_stopped(tmp, lake, where)
                except Exception as e:  # never in place of the task's own exception
                    print(f"stopped shard {where['shard']} of run {where['run_id']}: not landed: {e}",
                          file=sys.stderr)
                raise
            sys.stderr.write(proc.stderr[-20000:])
            # Stopped at the deadline: unless it finished whole during the grace (exit 0).
            if proc.returncode == STOPPED_EXIT or (proc.stopped and proc.returncode != 0):
                landed = _land_stopped(tmp, lake, where)
                raise RuntimeError(f"harness stopped for shard {shard_label(shard)} ({proc.stopped or 'by a signal'}): "
                                   + (f"landed the {landed['measured']} of {landed['planned']} cases it measured"
                                      if landed else "nothing of it landed") + "; a retry measures the shard again")
            if proc.returncode != 0:
                raise RuntimeError(f"harness failed for shard {shard_label(shard)} (exit {proc.returncode}): "
                                   f"{proc.stderr.strip()[-2000:]}")
            landed = land_shard(tmp, lake, **where)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"shard": shard_label(shard), "attempt": attempt, **landed}


def _land_stopped(staging: Path, lake: Lake, where: dict) -> dict | None:
    """Land the part a stopped harness wrote (its run row is written last: without it
    there is nothing whole to land), unless the copy landed there before measured as many
    cases or more: a retry stopped sooner must not replace more measurements with fewer.
    Returns {"measured", "planned"} cases, or None if nothing landed."""
    staged = measured_cases(staging / "case_results.parquet") if (staging / "run.parquet").exists() else None
    if staged is None:
        return None
    landed = lake.landing_file("case_results", where["dt"], where["pool"], where["run_id"], where["shard"])
    before = measured_cases(landed) if landed.exists() else None
    if before is not None and before[0] >= staged[0]:
        print(f"stopped shard {where['shard']} of run {where['run_id']}: not landed, the copy landed before "
              f"measured {before[0]} cases, at least its {staged[0]}", file=sys.stderr)
        return None
    try:
        land_shard(staging, lake, **where)
    except Exception as e:  # refused or unreadable: the caller reports the stop itself
        print(f"stopped shard {where['shard']} of run {where['run_id']}: not landed: {e}", file=sys.stderr)
        return None
    return {"measured": staged[0], "planned": staged[1]}


def _tmp_root(lake: Lake) -> Path:
    # Staging sits on the lake's file system so that landing is a rename, not a copy.
    p = lake.root / "tmp"
    p.mkdir(parents=True, exist_ok=True)
    return p
