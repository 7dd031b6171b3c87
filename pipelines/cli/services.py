"""`perflake services up|down|status`: the lake's shared services (pipelines/deploy,
docs/deploy.md); `make up`, `make down` and `make status` run these."""
from __future__ import annotations

import argparse

from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("services", help="start, stop or show the shared services (PostgreSQL, Spark SQL, Airflow)")
    p.add_argument("action", choices=("up", "down", "status", "airflow"),
                   help="airflow: run an `airflow` command against the services (e.g. airflow dags unpause nightly_sweep)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.add_argument("--no-airflow", action="store_true", help="up: leave Airflow out (metastore and SQL service only)")
    p.set_defaults(func=_cmd_services)


def _cmd_services(args) -> int:
    from pipelines.deploy import services

    lake = Lake.from_env()
    if args.action == "airflow":
        from pipelines.deploy.airflow_cli import main

        return main(args.rest)
    if args.rest:
        raise ValueError(f"unexpected arguments {' '.join(args.rest)!r} after `services {args.action}`")
    if args.action == "up":
        states = services.up(lake, with_airflow=not args.no_airflow)
    elif args.action == "down":
        services.down(lake)
        return 0
    else:
        states = services.status(lake)
    print(f"{'service':<24} {'state':<12} {'pid':<11} {'listens on':<34} log")
    for s in states:
        print(s.line())
    wanted = [s for s in states if not (args.action == "up" and args.no_airflow and s.name.startswith("airflow"))]
    return 0 if services.all_healthy(wanted) else 1
