"""`perflake mine`: run the mining job (jobs/mine.py) for one date in this process."""
from __future__ import annotations

import json
import sys

from pipelines.cli.args import date_arg
from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("mine", help="run the mining job for one date")
    p.add_argument("--date", required=True, type=date_arg, help="YYYY-MM-DD")
    p.add_argument("--pool", action="append", help="limit to these pools (repeatable)")
    p.set_defaults(func=_cmd_mine)


def _cmd_mine(args) -> int:
    from jobs.mine import MINE_STEPS, mine
    from pipelines.config.progress import Progress
    from pipelines.mining.quality import DataQualityError
    from pipelines.warehouse.session import get_spark

    from jobs.mine import landed_files
    from pipelines.config.pools import pool

    lake = Lake.from_env()
    for name in args.pool or ():
        pool(name)  # an unknown pool is a KeyError naming the known ones, before Spark starts
    if not landed_files(lake, "runs", args.date, args.pool):
        raise FileNotFoundError(f"nothing landed for {args.date} (pools: {', '.join(args.pool or ['all'])}) under "
                                f"{lake.landing}; run a sweep for that night first (make demo)")
    progress = Progress(MINE_STEPS + 1, "mine")
    progress.step("starting Spark")
    try:
        summary = mine(get_spark(lake), lake, args.date, args.pool or None, progress)
    except DataQualityError as e:  # the pools that passed were published
        print(f"perflake mine: {e}", file=sys.stderr)
        return 1
    progress.finish(f"{summary.case_stats} case statistics published for {args.date}")
    print(json.dumps(summary.__dict__, indent=2))
    return 0
