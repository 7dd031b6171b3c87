"""`make demo`: the nightly sweep on the embedded default, end to end, in one process:
the real `nightly_sweep` DAG through `dag.test()` (SQLite metadata under the lake),
raw samples landed in Parquet, Spark mining into `perf.case_stats`, then one query."""
from __future__ import annotations

import datetime
import importlib.util
import time

from pipelines.orchestration.airflow_env import DAGS_DIR, prepare_airflow, sync_pools
from pipelines.config.lake import Lake

DEMO_QUERY = ("SELECT kernel, dtype, params['m'] AS m, params['n'] AS n, params['k'] AS k, "
              "round(median_ns / 1000, 1) AS median_us, round(tflops * 1000, 1) AS gflops, n_kept, stable "
              "FROM perf.case_stats JOIN perf.cases USING (case_id, kernel, dtype) "
              "WHERE run_id IN {run_ids} ORDER BY dtype, cast(params['m'] AS int)")


def load_dag(name: str):
    """The DAG object of dags/<name>.py, loaded as the DAG processor would (dags/ on the path)."""
    import sys

    if str(DAGS_DIR) not in sys.path:
        sys.path.insert(0, str(DAGS_DIR))
    spec = importlib.util.spec_from_file_location(f"perflake_dag_{name}", DAGS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


def run_demo(lake: Lake, logical_date: datetime.datetime | None = None, conf: dict | None = None) -> int:
    t0 = time.monotonic()
    print(f"perflake demo: lake at {lake.root}")
    prepare_airflow(lake)
    sync_pools()
    dag = load_dag("nightly_sweep")
    when = logical_date or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    dag_run = dag.test(logical_date=when, run_conf=conf or {})
    state = str(dag_run.state)
    print(f"\nnightly_sweep finished: {state} in {time.monotonic() - t0:.0f} s")
    if "success" not in state:
        print("the DAG run did not succeed; see the task logs above")
        return 1
    from pipelines.query.sql import format_rows, run_query
    from pipelines.sweep.ids import pool_run_id, run_date, sweep_run_id

    dt = run_date(when, None)
    sweep_id = sweep_run_id(dag_run.run_id, dt)
    pools = (conf or {}).get("pools") or dag.params["pools"]
    run_ids = "(" + ", ".join(f"'{pool_run_id(sweep_id, p)}'" for p in pools) + ")"
    query = DEMO_QUERY.format(run_ids=run_ids)
    print(f"\nperflake sql \"{query}\"\n")
    cols, rows = run_query(query, engine="spark", lake=lake)
    print(format_rows(cols, rows))
    print(f"\n{len(rows)} rows; raw samples under {lake.landing}, tables under {lake.warehouse}")
    print(f"try: perflake sql \"SELECT count(*) FROM perf.case_stats\"   (demo took {time.monotonic() - t0:.0f} s)")
    return 0 if rows else 1
