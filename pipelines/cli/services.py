"""`perflake services up [--no-airflow] | down | status | airflow ARGS...`: the lake's shared
services (pipelines/deploy, docs/deploy.md); `make up [NO_AIRFLOW=1]`, `make down` and
`make status` run these."""
from __future__ import annotations

import argparse

from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("services", help="start, stop or show the shared services (PostgreSQL, Spark SQL, Airflow)")
    # One sub-command per action, so that each takes its own options: `up --no-airflow`
    # is up's option, and only `airflow` passes the rest of the line on.
    actions = p.add_subparsers(dest="action", required=True, metavar="{up,down,status,airflow}")
    up = actions.add_parser("up", help="create what is missing and start what is stopped")
    up.add_argument("--no-airflow", action="store_true", help="leave Airflow out (metastore and SQL service only)")
    actions.add_parser("down", help="stop what `up` started")
    actions.add_parser("status", help="each service's state, pid, address and log; exit 1 if one is unhealthy")
    airflow = actions.add_parser("airflow", help="run an `airflow` command against the services "
                                                 "(e.g. airflow dags unpause nightly_sweep)")
    airflow.add_argument("rest", nargs=argparse.REMAINDER, help="the airflow command and its arguments")
    p.set_defaults(func=_cmd_services, no_airflow=False)


def _cmd_services(args) -> int:
    from pipelines.deploy import services

    lake = Lake.from_env()
    if args.action == "airflow":
        from pipelines.deploy.airflow_cli import main

        return main(args.rest)
    if args.action == "up":
        states = services.up(lake, with_airflow=not args.no_airflow)
    elif args.action == "down":
        services.down(lake)
        return 0
    else:
        states = services.status(lake)
        from pipelines.config.services import configured

        if configured(lake) is None:  # the table shows where they would run
            import sys

            print(f"the lake {lake.root} has no services: `perflake services up` (or `make up`) has not set them up "
                  "here; its commands run on their own (embedded metastore)", file=sys.stderr)
    print(f"{'service':<24} {'state':<12} {'pid':<11} {'listens on':<34} log")
    for s in states:
        print(s.line())
    wanted = [s for s in states if not (args.action == "up" and args.no_airflow and s.name.startswith("airflow"))]
    return 0 if services.all_healthy(wanted) else 1
