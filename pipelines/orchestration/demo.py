"""`make demo`: the nightly sweep on the embedded default, end to end, in one process:
the real `nightly_sweep` DAG through `dag.test()` (SQLite metadata under the lake),
raw samples landed in Parquet, Spark mining into `perf.case_stats`, then one query.

Quiet by default: one line per task on the terminal, the logs of Airflow, Spark and the
harness in <lake>/logs/demo-<time>.log (`verbose` shows them instead). The Spark
session starts in a background thread at the beginning, while Airflow migrates its
database, parses the DAG and the harness measures: the `mine` task then finds it up
(pipelines.warehouse.session.get_spark returns the process's session)."""
from __future__ import annotations

import datetime
import importlib.util
import threading
import time

from pipelines.config.lake import Lake
from pipelines.orchestration.airflow_env import DAGS_DIR, prepare_airflow, sync_pools
from pipelines.orchestration.console import Console, TaskLines, duration, log_path, quiet_exit

DEMO_QUERY = ("SELECT kernel, dtype, params['m'] AS m, params['n'] AS n, params['k'] AS k, "
              "round(median_ns / 1000, 1) AS median_us, round(tflops * 1000, 1) AS gflops, n_kept, stable "
              "FROM perf.case_stats JOIN perf.cases USING (case_id, kernel, dtype) "
              "WHERE run_id IN {run_ids} ORDER BY dtype, cast(params['m'] AS int)")
TRY_QUERY = "SELECT dt, pool, kernel, dtype, round(median_ns / 1e3, 1) AS median_us, stable FROM perf.case_stats LIMIT 10"
TASK_PREFIXES = ("plan", "run", "plan_rerun", "rerun")  # per-pool tasks (dags/sweep_tasks.py)


def load_dag(name: str):
    """The DAG object of dags/<name>.py, loaded as the DAG processor would (dags/ on the path)."""
    import sys

    if str(DAGS_DIR) not in sys.path:
        sys.path.insert(0, str(DAGS_DIR))
    spec = importlib.util.spec_from_file_location(f"perflake_dag_{name}", DAGS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


class SparkWarmup:
    """Start the lake's Spark session in a background thread; `wait()` returns it, or
    raises what starting it raised."""

    def __init__(self, lake: Lake):
        self.lake, self.error, self.seconds = lake, None, None
        self._thread = threading.Thread(target=self._start, name="spark-warmup", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        from pipelines.warehouse.session import get_spark

        t0 = time.monotonic()
        try:
            get_spark(self.lake)
            # The mine task's own modules (Great Expectations takes seconds to import):
            # imported here, they are ready when the task starts.
            import great_expectations  # noqa: F401

            import jobs.mine  # noqa: F401
            import pipelines.projection.roofline  # noqa: F401
            import pipelines.report.nightly  # noqa: F401
        except BaseException as e:  # re-raised by wait(), in the caller's thread
            self.error = e
        self.seconds = time.monotonic() - t0

    def wait(self):
        from pipelines.warehouse.session import get_spark

        self._thread.join()
        if self.error is not None:
            raise self.error
        return get_spark(self.lake)


def hidden_tasks(task_ids, all_pools, run_pools) -> set[str]:
    """The per-pool tasks of pools outside this run: they plan nothing, so no line."""
    names = {f"{prefix}_{p.replace('-', '_')}" for p in set(all_pools) - set(run_pools) for prefix in TASK_PREFIXES}
    return names & set(task_ids)


def run_demo(lake: Lake, logical_date: datetime.datetime | None = None, conf: dict | None = None, *,
             verbose: bool = False) -> int:
    with Console(log_path(lake, "demo"), verbose) as out:
        out.say(f"perflake demo: the nightly_sweep DAG on this machine's CPU, lake {lake.root}")
        if not verbose:
            out.say(f"  logs (Airflow, Spark, harness): {out.path}  (perflake demo -v shows them here)")
        from pipelines.warehouse.preflight import check_spark_can_start

        check_spark_can_start(lake)  # Java, the metastore's lock: one sentence now, not a trace later
        spark = SparkWarmup(lake)
        t = time.monotonic()
        prepare_airflow(lake)
        sync_pools()
        dag = load_dag("nightly_sweep")
        out.say(f"  Airflow ready (SQLite metadata under the lake) in {duration(time.monotonic() - t)}; "
                f"Spark starting in the background")
        when = logical_date or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        run_pools = (conf or {}).get("pools") or dag.params["pools"]
        from pipelines.config.pools import load_pools

        hidden = hidden_tasks(dag.task_ids, load_pools(), run_pools)
        with TaskLines(out, list(dag.task_ids), hidden):
            dag_run = dag.test(logical_date=when, run_conf=conf or {})
        state = str(dag_run.state).rsplit(".", 1)[-1]
        out.say(f"nightly_sweep {state} in {duration(out.elapsed())}")
        if state != "success":
            out.say(f"the DAG run did not succeed; the task logs are in {out.path}")
            return 1
        from pipelines.query.sql import format_rows, run_query
        from pipelines.sweep.ids import pool_run_id, run_date, sweep_run_id

        spark.wait()
        dt = run_date(when, None)
        sweep_id = sweep_run_id(dag_run.run_id, dt)
        run_ids = "(" + ", ".join(f"'{pool_run_id(sweep_id, p)}'" for p in run_pools) + ")"
        query = DEMO_QUERY.format(run_ids=run_ids)
        cols, rows = run_query(query, engine="spark", lake=lake)
        out.say(f"\nthis night's cases (perf.case_stats joined with perf.cases, {len(rows)} rows):")
        for line in format_rows(cols, rows).splitlines()[:-1]:
            out.say(line)
        report = lake.reports / f"nightly-{dt}.html"
        out.say("\nnext:")
        out.say(f'  perflake sql "{TRY_QUERY}"')
        out.say(f"  report:  {report}{'' if report.exists() else ' (not written)'}  (make report SERVE=1 serves it)")
        out.say("  make web            the dashboard on http://127.0.0.1:8080/")
        out.say("  make demo-history   weeks of SIMULATED nights on two GPU pools: regressions, triage, projections")
        out.say("  perflake info       what the lake holds (pools, GPUs, nights, tables)")
        out.say(f"demo took {duration(out.elapsed())}")
        quiet_exit()
        return 0 if rows else 1
