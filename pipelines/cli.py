"""The `perflake` command line.

Examples:
  perflake demo                                   # the nightly sweep on the embedded default
  perflake sql "SELECT kernel, dtype, median_ns FROM perf.case_stats LIMIT 5"
  perflake sql --engine duckdb "SELECT count(*) FROM perf.samples"
  perflake sql-server start                       # JDBC/ODBC on 127.0.0.1:10000 (stop | status)
  perflake mine --date 2026-11-22
  perflake ingest /scratch/out --pool cpu          # land results from another harness (Parquet, nvbench JSON)
  perflake detect-changes history.csv --column median_ns
  perflake regressions --date 2026-11-22           # the night's changes, pooled by cause
  perflake compare RUN_A RUN_B                     # per case: faster, slower, same, ambiguous
  perflake triage list --owner gemm --overdue      # regressions to triage; triage ack ID --note ..., triage close ID
  perflake report --date 2026-11-22                # the nightly HTML report under <lake>/reports/
  perflake report compare --sku-a H100-SXM5-80GB --sku-b H200-SXM-141GB
  perflake project --target B200-SXM-180GB         # roofline projections onto an unmeasured GPU
"""
from __future__ import annotations

import argparse
import json
import sys

from pipelines.lake import Lake


def _cmd_sql(args) -> int:
    from pipelines.sql import run_query, format_rows

    columns, rows = run_query(args.query, engine=args.engine, lake=Lake.from_env())
    print(format_rows(columns, rows, fmt=args.format))
    return 0


def _cmd_sql_server(args) -> int:
    from pipelines import sqlserver

    lake = Lake.from_env()
    if args.action == "start":
        try:
            st = sqlserver.start(lake, args.host, args.port, allow_remote=args.allow_remote)
        except RuntimeError as e:  # did not come up: the message carries the cause and the log
            print(f"perflake sql-server: error: {e}", file=sys.stderr)
            return 1
        print(f"SQL server running (pid {st.pid}) at {st.url}; log {st.log}")
    elif args.action == "stop":
        print("SQL server stopped" if sqlserver.stop(lake) else "no SQL server was running for this lake")
    else:
        st = sqlserver.status(lake)
        print(f"SQL server running (pid {st.pid}) at {st.url}" if st.running else "SQL server not running")
        return 0 if st.running else 3
    return 0


def _cmd_mine(args) -> int:
    from pipelines.mine import mine
    from pipelines.spark import get_spark

    from pipelines.quality import DataQualityError

    lake = Lake.from_env()
    try:
        summary = mine(get_spark(lake), lake, args.date, args.pool or None)
    except DataQualityError as e:  # the pools that passed were published
        print(f"perflake mine: {e}", file=sys.stderr)
        return 1
    print(json.dumps(summary.__dict__, indent=2))
    return 0


def _cmd_demo(args) -> int:
    from pipelines.demo import run_demo

    return run_demo(lake=Lake.from_env())


def _cmd_pools(args) -> int:
    from pipelines.airflow_env import prepare_airflow, sync_pools

    prepare_airflow(Lake.from_env())
    for name in sync_pools():
        print(f"pool {name}: created or updated")
    return 0


def read_series(path: str, column: str):
    """One numeric column of a CSV file, in file order; an empty cell (or NA, NaN, null)
    is a missing run. A missing column or a cell that is not a number is an error naming
    the file, the line and the value."""
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(path, dtype=str)
    if column not in frame.columns:
        raise ValueError(f"{path}: no column {column!r} (columns: {', '.join(frame.columns)})")
    cells = frame[column].str.strip()
    values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(np.isnan(values) & cells.notna().to_numpy() & (cells != "").to_numpy())
    if len(bad):
        i = int(bad[0])  # line 1 is the header
        raise ValueError(f"{path}, row {i + 1} (line {i + 2}), column {column!r}: {cells.iloc[i]!r} is not a number"
                         + (f" ({len(bad) - 1} more such cells)" if len(bad) > 1 else ""))
    return values


def _cmd_detect(args) -> int:
    from pipelines.changepoint import detect

    changes = detect(read_series(args.file, args.column))
    print(json.dumps({"changes": [c.index for c in changes],
                      "details": [c.__dict__ for c in changes]}, default=str, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="perflake", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("sql", help="run a read-only query over the published tables")
    p.add_argument("query")
    p.add_argument("--engine", choices=["spark", "duckdb"], default="spark")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(func=_cmd_sql)

    p = sub.add_parser("sql-server", help="start, stop or check the JDBC/ODBC SQL server (Spark Thrift Server)")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=10000)
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (the server has no authentication and is not read-only)")
    p.set_defaults(func=_cmd_sql_server)

    p = sub.add_parser("mine", help="run the mining job for one date")
    p.add_argument("--date", required=True, help="YYYY-MM-DD")
    p.add_argument("--pool", action="append", help="limit to these pools (repeatable)")
    p.set_defaults(func=_cmd_mine)

    p = sub.add_parser("demo", help="run nightly_sweep on the embedded default and query the result")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("pools", help="create or update the Airflow pools from the pool registry")
    p.set_defaults(func=_cmd_pools)

    p = sub.add_parser("detect-changes", help="change points of one column of a CSV, as JSON")
    p.add_argument("file")
    p.add_argument("--column", required=True)
    p.set_defaults(func=_cmd_detect)

    from pipelines.ingest import register as register_ingest

    register_ingest(sub)

    from pipelines.regression_cli import register as register_regressions

    register_regressions(sub)

    from pipelines.triage_cli import register as register_triage

    register_triage(sub)

    from pipelines.report.cli import add_parsers as register_reports

    register_reports(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"perflake {args.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
