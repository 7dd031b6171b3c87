"""The bodies of the DAGs' tasks, as plain functions (the DAG files only wire them).

Each takes what Airflow gives it (params, the run's date and ids) and returns
JSON-serialisable values for XCom."""
from __future__ import annotations

import datetime

from pipelines.config.lake import Lake
from pipelines.sweep.ids import pool_run_id, run_date, sweep_run_id, sweep_run_ids

RERUN_BUDGET = 3  # a confirmation rerun takes this many times the samples and time (within stopping.LIMITS)


# The run parameters of the sweep DAGs (dags/nightly_sweep.py, dags/backfill_hardware.py).
RUN_PARAMS = ("pools", "suites", "kernel", "stopping", "inject", "reason", "inject_failure")
MAX_SUITES = 50


def check_params(params: dict) -> None:
    """ValueError, one sentence naming the parameter, for a run the sweep would otherwise
    start and fail late in (or run wrongly): a misspelt key (ignored by Airflow, so the
    run would sweep the defaults), an unknown suite, a kernel glob that matches no case,
    a stopping rule out of its limits, an injected slowdown asked of a real device (it
    would be ignored there), a failure injected into shards on GPUs (a testing hook)."""
    import difflib

    from kernels_bench.stopping import StoppingRule
    from kernels_bench.suite import SuiteError, load_suite

    for key in params:
        if key not in RUN_PARAMS:
            near = difflib.get_close_matches(key, RUN_PARAMS, n=1)
            raise ValueError(f"unknown run parameter {key!r}{f' (did you mean {near[0]!r}?)' if near else ''}; "
                             f"the parameters are {', '.join(RUN_PARAMS)}")
    suites = list(params.get("suites") or [])
    if not suites or len(suites) > MAX_SUITES or len(set(suites)) != len(suites):
        raise ValueError(f"suites {suites[:5]}{'...' if len(suites) > 5 else ''}: give 1 to {MAX_SUITES} suites, "
                         "each once")
    if not params.get("pools"):
        raise ValueError("pools is empty: name at least one pool to sweep")
    loaded = []
    for name in suites:
        if not isinstance(name, str) or "/" in name or name.endswith((".yaml", ".yml")):
            raise ValueError(f"suites: {name!r} is not a suite name (a sweep names shipped suites, "
                             "`python -m kernels_bench list`; its shards run the suite of that name)")
        try:
            loaded.append(load_suite(name))
        except SuiteError as e:
            raise ValueError(f"suites: {e}") from None
    kernel = params.get("kernel")
    if kernel and not any(s.filter(kernel).cases for s in loaded):
        kernels = sorted({pc.case.kernel for s in loaded for pc in s.cases})
        raise ValueError(f"kernel {kernel!r} matches no case of the suites {suites} (kernels: {kernels})")
    StoppingRule.from_dict(params.get("stopping"))
    if params.get("inject") or params.get("inject_failure"):
        from pipelines.config.pools import load_pools

        registry = load_pools()
        real = [p for p in params["pools"] if p in registry and registry[p].device_kind != "simulated"]
        gpus = [p for p in real if registry[p].device_kind == "gpu"]
        if params.get("inject") and real:
            raise ValueError(f"inject slows a simulated GPU down, and pools {real} measure real devices; sweep "
                             "them in a run without inject")
        if params.get("inject_failure") and gpus:  # a testing hook: it would fail GPU shards on purpose
            raise ValueError(f"inject_failure (for testing retries) fails shards on purpose, and pools {gpus} "
                             "hold real GPUs; test retries on a simulated or CPU pool")


def run_info(params: dict, logical_date, dag_run) -> dict:
    """What every task of a sweep needs to know about its DAG run (its parameters
    checked first: check_params)."""
    check_params(params)
    dt = run_date(logical_date, dag_run.run_after)
    return {"dt": dt, "run_id": sweep_run_id(dag_run.run_id, dt), "pools": list(params["pools"]),
            "suites": list(params["suites"]), "kernel": params.get("kernel") or None,
            "stopping": params.get("stopping") or None, "inject": params.get("inject") or None,
            "reason": run_reason(params, dag_run), "inject_failure": params.get("inject_failure")}


def run_reason(params: dict, dag_run) -> str:
    """The reason recorded with the run's rows. One the trigger gave (its conf) stands.
    Otherwise nightly_sweep's default, "nightly", holds only for a run the scheduler
    started: a run triggered by hand is "manual", and one of `airflow backfill` is
    "backfill" (a Param's default cannot tell how the run was started)."""
    reason = params.get("reason") or "manual"
    if "reason" in (getattr(dag_run, "conf", None) or {}) or reason != "nightly":
        return reason
    kind = dag_run.run_type  # a DagRunType (a str enum), or its value
    return {"scheduled": "nightly", "backfill": "backfill"}.get(getattr(kind, "value", kind), "manual")


def plan(info: dict, pool: str, rerun_of: dict | None = None) -> list[dict]:
    """The pool's shards, or none when the pool is not part of this run. For a rerun,
    only the listed cases, with RERUN_BUDGET times the sample budget."""
    from pipelines.sweep.shards import plan_shards

    if pool not in info["pools"]:
        return []
    common = dict(dt=info["dt"], pool=pool, suites=info["suites"], kernel=info["kernel"], inject=info["inject"])
    if rerun_of is None:
        shards = plan_shards(run_id=pool_run_id(info["run_id"], pool), reason=info["reason"],
                             stopping=info["stopping"], **common)
        for s in shards:
            s["inject_failure"] = info.get("inject_failure")
        return shards
    case_ids = (rerun_of.get("unstable") or {}).get(pool) or []
    if not case_ids:
        return []
    from kernels_bench.stopping import LIMITS
    from kernels_bench.suite import load_suite

    # RERUN_BUDGET times the budget the first run had: its suite's rule with the run's
    # overrides (not the harness default, whose 15 s timeout per case would be 45 s).
    shards = []
    for suite in info["suites"]:
        base = {**load_suite(suite).stopping.__dict__, **(info["stopping"] or {})}
        bigger = {**base, "min_samples": min(base["min_samples"] * RERUN_BUDGET, base["max_samples"]),
                  **{k: min(base[k] * RERUN_BUDGET, LIMITS[k][1]) for k in ("min_time_s", "timeout_s")}}
        shards += plan_shards(run_id=pool_run_id(info["run_id"], pool, rerun=True), reason="rerun", stopping=bigger,
                              case_ids=case_ids, **{**common, "suites": [suite]})
    for landing_shard, s in enumerate(shards):  # unique within the run, as plan_shards numbers them
        s["landing_shard"] = landing_shard
    return shards


def run_shard(shard: dict, attempt: int, dag_run_id: str) -> dict:
    from pipelines.sweep import shards as sweep

    lake = Lake.from_env()
    result = sweep.run_shard(shard, lake, attempt=attempt, dag_run_id=dag_run_id)
    fail = shard.get("inject_failure") or {}
    if fail.get("shard") == shard["landing_shard"] and attempt <= int(fail.get("attempts", 0)):
        # Testing hook: fail after landing, as a worker that dies after a partial write
        # would. The retry must replace this shard's file, never add to it.
        raise RuntimeError(f"injected failure after landing shard {shard['landing_shard']} (attempt {attempt})")
    return result


def mine_and_publish(info: dict, rerun: bool = False) -> dict:
    """Mine the run's date and pools, then summarise the runs. After the first mine,
    list the unstable cases (to be rerun); after the reruns' mine, say per case whether
    the rerun confirmed the instability or cleared it."""
    out = {"mined": mine(info["dt"], info["pools"]), "summary": publish_summary(info["dt"], sweep_run_ids(info, rerun))}
    if rerun:
        out["confirmation"] = rerun_outcomes(info)
        out["regressions"] = regression_outcomes(info)
    else:
        out["unstable"] = unstable_cases(info)
    return out


def regression_outcomes(info: dict) -> dict[str, dict[str, str]]:
    """Per pool and case, the status (confirmed, cleared, ...) of the changes first seen
    in this sweep's runs, as the mine after the reruns left them (an energy-per-call
    change under '<case_id> (energy)')."""
    from pipelines.warehouse.session import DATABASE, get_spark

    spark = get_spark(Lake.from_env())
    if not spark.catalog.tableExists(f"{DATABASE}.regressions"):
        return {}
    from pyspark.sql import functions as F

    rows = (spark.table(f"{DATABASE}.regressions").where(F.col("change_run_id").isin(sweep_run_ids(info)))
            .select("pool", "case_id", "metric", "status").collect())
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        out.setdefault(r.pool, {})[r.case_id + (" (energy)" if r.metric == "energy" else "")] = r.status
    return out


def rerun_outcomes(info: dict) -> dict[str, dict[str, str]]:
    """Per pool and rerun case: 'confirmed' when the larger-budget rerun is unstable too,
    'cleared' when it measured stably, 'failed' when it did not measure."""
    rows = (_case_stats(info["dt"], sweep_run_ids(info, rerun=True))
            .select("pool", "case_id", "status", "stable").orderBy("pool", "case_id").collect())
    out: dict[str, dict[str, str]] = {}
    for pool, case_id, status, stable in rows:
        verdict = "failed" if status != "ok" else ("cleared" if stable else "confirmed")
        out.setdefault(pool, {})[case_id] = verdict
    return out


def unstable_cases(info: dict) -> dict[str, list[str]]:
    """Per pool, the cases of this run to confirm with a rerun: those whose measurement
    was not stable, and those this run measured that have an open provisional
    regression (first seen in this run, or still waiting for runs to confirm it)."""
    from pyspark.sql import functions as F

    from pipelines.mining.regressions import provisional_cases
    from pipelines.warehouse.session import DATABASE, get_spark

    out = _unstable_only(info)
    spark = get_spark(Lake.from_env())
    if spark.catalog.tableExists(f"{DATABASE}.regressions"):
        measured = _case_stats(info["dt"], sweep_run_ids(info)).where(F.col("status") == "ok")
        for pool, cases in provisional_cases(spark.table(f"{DATABASE}.regressions"), measured).items():
            out[pool] = sorted(set(out.get(pool, [])) | set(cases))
    return out


def _case_stats(dt: str, run_ids: list[str]):
    """perf.case_stats of `run_ids` on `dt` (values bound as literals, never pasted)."""
    from pyspark.sql import functions as F

    from pipelines.warehouse.session import DATABASE, get_spark

    stats = get_spark(Lake.from_env()).table(f"{DATABASE}.case_stats")
    return stats.where((F.col("dt") == F.lit(dt)) & F.col("run_id").isin(run_ids))


def _unstable_only(info: dict) -> dict[str, list[str]]:
    from pyspark.sql import functions as F

    rows = (_case_stats(info["dt"], sweep_run_ids(info)).where((F.col("status") == "ok") & ~F.col("stable"))
            .select("pool", "case_id").orderBy("pool", "case_id").collect())
    out: dict[str, list[str]] = {}
    for pool, case_id in rows:
        out.setdefault(pool, []).append(case_id)
    return out


def dates_to_mine(logical_date, triggering_events) -> list[dict]:
    """The (date, pools) a `mine` run should process: its logical date when run by time
    or backfill; each triggering asset event's date otherwise, except landings whose own
    DAG already mined them."""
    if logical_date is not None:
        return [{"dt": logical_date.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d"), "pools": None}]
    wanted: dict[str, set] = {}
    for events in triggering_events.values():
        for event in events:
            extra = dict(getattr(event, "extra", None) or {})
            if extra.get("mined_in_dag") or "dt" not in extra:
                continue
            wanted.setdefault(extra["dt"], set()).update(extra.get("pools") or [])
    return [{"dt": dt, "pools": sorted(pools) or None} for dt, pools in sorted(wanted.items())]


def mine(dt: str, pools: list[str] | None) -> dict:
    """Mine one date, score earlier projections onto the hardware it measured (a new
    GPU's backfill landing says how far off they were), project the nightly workloads
    onto the GPUs it measured and score the workload projections made before those GPUs
    were measured, then rewrite the date's nightly report from everything
    published for it; a date with nothing landed (a quiet day) is not an error."""
    from jobs.mine import MINE_STEPS, landed_files, mine as mine_date
    from pipelines.config.progress import Progress
    from pipelines.projection.roofline import rescore_measured
    from pipelines.projection.workload_table import rescore_workloads
    from pipelines.mining.quality import DataQualityError
    from pipelines.report.nightly import build_nightly
    from pipelines.warehouse.session import get_spark

    lake = Lake.from_env()
    if not landed_files(lake, "runs", dt, pools):
        return {"dt": dt, "pools": pools, "status": "nothing landed"}
    try:
        spark = get_spark(lake)
        # Each step a line in the task's log (stderr), with its time.
        summary = mine_date(spark, lake, dt, pools, Progress(MINE_STEPS, f"mine {dt}")).__dict__
        summary["projections_scored"] = rescore_measured(lake, dt, pools, spark=spark)
        summary["workloads_projected"] = project_workloads(lake, [dt], pools, spark=spark)
        summary["workload_projections_scored"] = rescore_workloads(lake, dt, pools, spark=spark)
        summary["report"] = str(build_nightly(lake, dt))
        return summary
    except DataQualityError as e:
        from airflow.sdk.exceptions import AirflowFailException

        # The same data fails the same way: no retries. The pools that passed are published;
        # fix or quarantine the source, then clear the task.
        raise AirflowFailException(str(e)) from e


def project_workloads(lake: Lake, dates: list[str], pools: list[str] | None = None, *, spark=None) -> int:
    """Project the nightly workloads (pipelines/projection/nightly_workloads.yaml) onto
    every catalog GPU measured on `dates` (by `pools`), each from the measurements up to
    its night, and replace their rows in perf.workload_projections; returns the rows
    written. Read through DuckDB; the one write uses `spark` (the mine's session)."""
    from pipelines.projection.nightly_workloads import project_nights
    from pipelines.projection.workload_table import write_workload_projections
    from pipelines.warehouse.frames import Frames

    with Frames(lake) as frames:
        summaries = project_nights(frames, dates, pools)
    if summaries:
        write_workload_projections(lake, summaries, spark=spark)
    return len(summaries)


def publish_summary(dt: str, run_ids: list[str]) -> str:
    """A short text summary of the runs' published stats (printed in the task log)."""
    from pyspark.sql import functions as F

    from pipelines.query.sql import format_rows

    summary = (_case_stats(dt, run_ids).groupBy("pool", "kernel", "dtype")
               .agg(F.count(F.lit(1)).alias("cases"), F.sum(F.when(F.col("status") == "ok", 1).otherwise(0)).alias("ok"),
                    F.round(F.percentile_approx("median_ns", 0.5) / 1000, 1).alias("median_us"),
                    F.round(F.max("tflops"), 3).alias("max_tflops"))
               .orderBy("pool", "kernel", "dtype"))
    return format_rows(summary.columns, [tuple(r) for r in summary.collect()])
