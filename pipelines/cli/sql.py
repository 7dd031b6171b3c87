"""`perflake sql` and `perflake sql-server`: read-only SQL over the published tables, and
the JDBC/ODBC endpoint (Spark Thrift Server) for other tools."""
from __future__ import annotations

import sys

from pipelines.config.lake import Lake


def register(sub) -> None:
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


def _cmd_sql(args) -> int:
    from pipelines.query.sql import format_rows, run_query

    columns, rows = run_query(args.query, engine=args.engine, lake=Lake.from_env())
    print(format_rows(columns, rows, fmt=args.format))
    return 0


def _cmd_sql_server(args) -> int:
    from pipelines.query import server

    lake = Lake.from_env()
    if args.action == "start":
        try:
            st = server.start(lake, args.host, args.port, allow_remote=args.allow_remote)
        except RuntimeError as e:  # did not come up: the message carries the cause and the log
            print(f"perflake sql-server: error: {e}", file=sys.stderr)
            return 1
        print(f"SQL server running (pid {st.pid}) at {st.url}; log {st.log}")
    elif args.action == "stop":
        print("SQL server stopped" if server.stop(lake) else "no SQL server was running for this lake")
    else:
        st = server.status(lake)
        print(f"SQL server running (pid {st.pid}) at {st.url}" if st.running else "SQL server not running")
        return 0 if st.running else 3
    return 0
