"""`perflake demo`, `perflake demo-history`, `perflake pools` and `perflake airflow`: the
nightly sweep through Airflow on the embedded default, weeks of simulated nights landed
and mined, the Airflow pools from the pool registry, and any `airflow` command against
the lake's own Airflow."""
from __future__ import annotations

import argparse

from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("demo", help="run nightly_sweep on the embedded default and query the result")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("demo-history", help="land and mine weeks of SIMULATED nights on two simulated GPU pools")
    p.add_argument("--nights", type=int, default=None, help="how many nights (default 21)")
    p.add_argument("--backfill", type=int, default=None, help="nights of the new GPU's backfill (default 4)")
    p.set_defaults(func=_cmd_demo_history)

    p = sub.add_parser("pools", help="create or update the Airflow pools from the pool registry")
    p.set_defaults(func=_cmd_pools)

    p = sub.add_parser("airflow", help="run an `airflow` command against this lake's Airflow (`make airflow`'s, or "
                                       "the services' after `make up`), e.g. airflow dags trigger nightly_sweep")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the airflow command and its arguments")
    p.set_defaults(func=_cmd_airflow)


def _cmd_demo(args) -> int:
    from pipelines.orchestration.demo import run_demo

    return run_demo(lake=Lake.from_env(), verbose=args.verbose)


def _cmd_demo_history(args) -> int:
    from pipelines.orchestration.demo_history import BACKFILL_NIGHTS, NIGHTS, run_history

    return run_history(Lake.from_env(), nights_count=args.nights or NIGHTS,
                       backfill=BACKFILL_NIGHTS if args.backfill is None else args.backfill, verbose=args.verbose)


def _cmd_pools(args) -> int:
    from pipelines.orchestration.airflow_env import prepare_airflow, sync_pools

    prepare_airflow(Lake.from_env())
    for name in sync_pools():
        print(f"pool {name}: created or updated")
    return 0


def _cmd_airflow(args) -> int:
    """`airflow ARGS` with the lake's Airflow settings (its home, database and DAG folder;
    the services' secrets in services mode). A bare `airflow` would use ~/airflow, a
    different, empty Airflow."""
    import os
    from pathlib import Path

    from pipelines.config.services import configured
    from pipelines.deploy.airflow import environment, venv_bin

    lake = Lake.from_env()
    env = environment(lake)
    if configured(lake) is None and args.rest[:1] not in (["db"], ["version"], ["config"], [], ["-h"], ["--help"]):
        db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
        if not db.exists():
            raise FileNotFoundError(f"the lake {lake.root} has no Airflow yet ({db} does not exist): start it with "
                                    f"`make airflow` (or the shared services with `make up`)")
    # Airflow's CLI warns on every `dags` command that graphviz is missing (only `dags show` draws).
    env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), "ignore:Could not import graphviz"]))
    airflow = str(venv_bin() / "airflow")
    os.execve(airflow, [airflow, *args.rest], env)
    return 1  # not reached
