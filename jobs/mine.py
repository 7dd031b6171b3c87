"""spark-submit entry point of the mining job (the same code runs in local mode, on a
standalone cluster, or on Kubernetes/YARN):

  spark-submit jobs/mine.py --lake /data/perflake --date 2026-11-22 [--pool cpu ...]
"""
from __future__ import annotations

import argparse
import json

from pipelines.lake import Lake
from pipelines.mine import mine
from pipelines.spark import get_spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lake", default=None, help="lake root (default $PERFLAKE_HOME or ./data)")
    ap.add_argument("--date", required=True)
    ap.add_argument("--pool", action="append")
    args = ap.parse_args(argv)
    lake = Lake.from_env(args.lake)
    summary = mine(get_spark(lake, app="perflake-mine"), lake, args.date, args.pool)
    print(json.dumps(summary.__dict__))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
