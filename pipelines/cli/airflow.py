"""`perflake demo`, `perflake demo-history` and `perflake pools`: the nightly sweep through
Airflow on the embedded default, weeks of simulated nights landed and mined, and the
Airflow pools from the pool registry."""
from __future__ import annotations

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
