"""`perflake triage`: the regressions each owner has to triage, and their lifecycle.

  perflake triage list --owner gemm --overdue        # open regressions past their due date
  perflake triage list --status closed --format json
  perflake triage ack 3f9a0c1d2e --note "tile heuristic change; fix in review" --by alice
  perflake triage close 3f9a0c1d2e --note "fixed by #1234"
"""
from __future__ import annotations

import datetime
import getpass
import json

from pipelines.cli.args import date_arg
from pipelines.config.lake import Lake

LIST_COLUMNS = ("regression_id", "owner", "status", "triage_due_dt", "overdue", "metric", "kernel", "dtype",
                "gpu_sku", "device_kind", "change_dt", "change_pct", "cause")  # device_kind: simulated is labelled
STATUSES = ("provisional", "confirmed", "acknowledged", "closed", "cleared")


def register(sub) -> None:
    p = sub.add_parser("triage", help="list, acknowledge and close regressions (owners: pipelines/config/owners.yaml)")
    actions = p.add_subparsers(dest="action", required=True)

    a = actions.add_parser("list", help="regressions to triage (default: provisional, confirmed, acknowledged)")
    a.add_argument("--owner", help="only this owning team")
    a.add_argument("--status", action="append", choices=STATUSES, help="only these statuses (repeatable)")
    a.add_argument("--overdue", action="store_true", help="only open regressions past their triage due date")
    a.add_argument("--improvements", action="store_true", help="improvements instead of regressions")
    a.add_argument("--all", action="store_true", help="every status and direction")
    a.add_argument("--today", type=date_arg, help="YYYY-MM-DD for --overdue (default: today, UTC)")
    a.add_argument("--format", choices=["table", "json"], default="table")
    a.set_defaults(func=_cmd_list)

    for action, help_ in (("ack", "acknowledge: someone is on it (kept by later mines)"),
                          ("close", "close: triage is finished (final; kept by later mines)")):
        a = actions.add_parser(action, help=help_)
        a.add_argument("id", help="regression_id (perflake triage list)")
        a.add_argument("--note", required=action == "ack", help="what is being done, or why")
        a.add_argument("--by", default=None, help="who (default: the current user)")
        a.set_defaults(func=_cmd_set)


def _cmd_list(args) -> int:
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import reader_session
    from pipelines.query.sql import format_rows
    from pipelines.triage.status import items
    from schemas.tables import REGRESSIONS

    today = args.today or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    spark = reader_session(Lake.from_env())
    table = catalog.read_table(spark, REGRESSIONS)
    statuses = None if args.all else tuple(args.status or ("provisional", "confirmed", "acknowledged"))
    direction = None if args.all else ("improvement" if args.improvements else "regression")
    rows = [r.asDict() for r in items(table, today, owner=args.owner, statuses=statuses, direction=direction,
                                      only_overdue=args.overdue).collect()]
    if args.format == "json":
        print(json.dumps({"today": today, "regressions": rows}, default=str, indent=2))
        return 0
    print(format_rows(list(LIST_COLUMNS), [tuple(r[c] for c in LIST_COLUMNS) for r in rows]))
    print(f"{len(rows)} regression(s); {sum(bool(r['overdue']) for r in rows)} overdue on {today}")
    return 0


def _cmd_set(args) -> int:
    from pipelines.triage import status as triage
    from pipelines.warehouse.session import get_spark

    lake = Lake.from_env()
    by = args.by or getpass.getuser()
    change = triage.acknowledge if args.action == "ack" else triage.close
    change(get_spark(lake), lake, args.id, by=by, note=args.note)
    print(f"{'acknowledged' if args.action == 'ack' else 'closed'} {args.id} by {by}")
    return 0
