"""`perflake sql` and `perflake sql-server`: read-only SQL over the published tables, and
the JDBC/ODBC endpoint (Spark Thrift Server) for other tools, with its users."""
from __future__ import annotations

import getpass
import sys
import traceback

from pipelines.cli.args import port_arg
from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("sql", help="run a read-only query over the published tables")
    p.add_argument("query")
    p.add_argument("--engine", choices=["spark", "duckdb"], default="spark")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("-v", "--verbose", action="store_true", help="print the full traceback of an error")
    p.set_defaults(func=_cmd_sql)

    p = sub.add_parser("sql-server", help="start, stop or check the JDBC/ODBC SQL server (Spark Thrift Server), "
                                          "and manage its users")
    p.add_argument("action", choices=["start", "stop", "status", "add-user", "remove-user", "users"])
    p.add_argument("name", nargs="?", help="the user name (add-user, remove-user); add-user reads the password "
                                           "from the terminal, or from stdin when it is not a terminal")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: loopback only; another needs users to authenticate)")
    p.add_argument("--port", type=port_arg, default=10000)
    p.add_argument("--query-timeout", type=int, default=None, metavar="SECONDS",
                   help="cancel a statement after this many seconds (default 300)")
    p.add_argument("--max-rows", type=int, default=None, help="rows a statement returns at most (default 100000)")
    p.add_argument("--max-scratch-mb", type=int, default=None, metavar="MB",
                   help="shuffle and spill files a statement may write to the server's disk (default 10240)")
    p.add_argument("--runaway-grace-s", type=int, default=None, metavar="SECONDS",
                   help="stop a cancelled statement's task still running this long after (default 20)")
    p.set_defaults(func=_cmd_sql_server)


def _cmd_sql(args) -> int:
    from pipelines.query.sql import QueryError, ReadOnlyError, format_rows, run_query

    try:
        columns, rows = run_query(args.query, engine=args.engine, lake=Lake.from_env())
    except (ReadOnlyError, QueryError) as e:
        # One sentence, no traceback: a refusal or a mistake in the query is an answer.
        if args.verbose:
            traceback.print_exc()
        print(f"perflake sql: {e}", file=sys.stderr)
        return 2
    print(format_rows(columns, rows, fmt=args.format))
    return 0


def _cmd_sql_server(args) -> int:
    from pipelines.query import server, users

    lake = Lake.from_env()
    if args.action in ("add-user", "remove-user") and not args.name:
        print(f"perflake sql-server {args.action}: error: give the user name", file=sys.stderr)
        return 2
    if args.action == "start":
        limits = {k: v for k, v in (("query_timeout_s", args.query_timeout), ("max_rows", args.max_rows),
                                    ("max_scratch_mb", args.max_scratch_mb),
                                    ("runaway_grace_s", args.runaway_grace_s)) if v is not None}
        try:
            st = server.start(lake, args.host, args.port, **limits)
        except RuntimeError as e:  # did not come up: the message carries the cause and the log
            print(f"perflake sql-server: error: {e}", file=sys.stderr)
            return 1
        auth = "users authenticate (password file)" if users.users(lake) else "no authentication (loopback only)"
        print(f"SQL server running (pid {st.pid}) at {st.url}; {auth}; log {st.log}; audit {server.audit_log(lake)}")
    elif args.action == "stop":
        print("SQL server stopped" if server.stop(lake) else "no SQL server was running for this lake")
    elif args.action == "add-user":
        users.add_user(lake, args.name, _read_password())
        print(f"user {args.name} can now log in to the SQL server ({users.password_file(lake)})")
    elif args.action == "remove-user":
        if not users.remove_user(lake, args.name):
            print(f"perflake sql-server: no user {args.name!r}", file=sys.stderr)
            return 1
        print(f"user {args.name} removed")
    elif args.action == "users":
        print("\n".join(users.users(lake)) or "no users: the server runs without authentication, on loopback only")
    else:
        st = server.status(lake)
        print(f"SQL server running (pid {st.pid}) at {st.url}" if st.running else "SQL server not running")
        return 0 if st.running else 3
    return 0


def _read_password() -> str:
    """The new password, never from the command line (ps would show it to every user)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ")
    return first
