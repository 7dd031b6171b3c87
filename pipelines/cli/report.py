"""The `perflake report`, `perflake report compare` and `perflake project` commands
(added to the main parser by pipelines/cli/__init__.py)."""
from __future__ import annotations

import argparse

from pipelines.cli.args import date_arg
from pipelines.config.lake import Lake

REPORT_HELP = """\
Write the nightly HTML report (one self-contained file, charts inline) under
<lake>/reports/ and print its path.

examples:
  perflake report                            # the newest night with runs
  perflake report --date 2026-11-22
  perflake report --date 2026-11-22 --out /tmp/night.html
  perflake report compare --sku-a H100-SXM5-80GB --sku-b H200-SXM-141GB
  perflake report compare --torch-a 2.12.0 --torch-b 2.13.0   # each side's newest night
"""

COMPARE_HELP = """\
Compare side A with side B: speedup tables and charts per kernel family, with the
uncertainty from the medians' 95 % CIs. A side is the runs whose perf.runs column
equals a value, on one night (--date, or each side's newest night).

examples:
  perflake report compare --sku-a H100-SXM5-80GB --sku-b H200-SXM-141GB
  perflake report compare --pool-a sim-h100 --pool-b sim-h200 --date 2026-11-22
  perflake report compare --torch-a 2.12.0 --torch-b 2.13.0 --date-a 2026-11-01 --date-b 2026-11-22
  perflake report compare --field driver_version --a 550.54 --b 560.28
"""

PROJECT_HELP = """\
Project every case onto a catalog GPU (roofline bounds from flops and bytes, efficiency
per kernel family and shape calibrated on a measured GPU), write perf.projections, and
report the error per family once the target has been measured. A projection is kept as
first made; --recalibrate makes it again from the current measurements.

examples:
  perflake project --target B200-SXM-180GB                  # calibrate on the most-measured GPU
  perflake project --target H200-SXM-141GB --source H100-SXM5-80GB --device-kind simulated
  perflake project                                          # every catalog GPU with no measurements
  perflake project --target H200-SXM-141GB --measured-date 2026-11-22   # score against that night
  perflake project --target B200-SXM-180GB --target H200-SXM-141GB --format json   # one JSON list

--format csv and json print one document for all targets, a `target` column first and
an error not yet measured empty (CSV) or null (JSON); the table prints '-' for it.
"""

_PAIRS = (("sku", "gpu_sku"), ("pool", "pool"), ("torch", "torch_version"))


def register(sub) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("report", help="write the nightly HTML report (or `report compare`)", description=REPORT_HELP,
                       formatter_class=raw)
    p.add_argument("--date", type=date_arg, help="YYYY-MM-DD (default: the newest night with runs)")
    p.add_argument("--out", help="file to write (default: <lake>/reports/nightly-<date>.html)")
    p.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb", help="how to read the tables")
    p.set_defaults(func=_cmd_report)
    rsub = p.add_subparsers(dest="report_cmd", metavar="compare")
    c = rsub.add_parser("compare", help="GPU A vs GPU B, or software A vs B", description=COMPARE_HELP,
                        formatter_class=raw)
    for short, column in _PAIRS:
        c.add_argument(f"--{short}-a", help=f"side A: runs with {column} = this")
        c.add_argument(f"--{short}-b", help=f"side B: runs with {column} = this")
    c.add_argument("--field", help="any perf.runs column to compare on (with --a and --b)")
    c.add_argument("--a", dest="value_a", help="side A value of --field")
    c.add_argument("--b", dest="value_b", help="side B value of --field")
    c.add_argument("--date", type=date_arg, help="night of both sides (default: each side's newest)")
    c.add_argument("--date-a", type=date_arg)
    c.add_argument("--date-b", type=date_arg)
    c.add_argument("--out")
    c.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    c.set_defaults(func=_cmd_compare)

    p = sub.add_parser("project", help="project cases onto catalog GPUs and score projections",
                       description=PROJECT_HELP, formatter_class=raw)
    p.add_argument("--target", action="append", help="catalog SKU to project onto (repeatable; default: every "
                                                     "catalog GPU with no measurements)")
    p.add_argument("--source", help="measured SKU to calibrate on (default: the one with the most cases)")
    p.add_argument("--device-kind", choices=["gpu", "simulated"],
                   help="kind of calibration data (never mixed; with --source, default: its real measurements "
                        "where it has both)")
    p.add_argument("--source-date", action="append", type=date_arg, help="calibrate on these nights only (repeatable)")
    p.add_argument("--source-pool", action="append", help="calibrate on these pools only (repeatable)")
    p.add_argument("--measured-date", action="append", type=date_arg, help="score against these nights only (repeatable)")
    p.add_argument("--measured-pool", action="append", help="score against these pools only (repeatable)")
    p.add_argument("--cases", choices=["all", "source"], default="all",
                   help="project every published case, or only those measured on the source")
    p.add_argument("--recalibrate", action="store_true", help="replace earlier projections onto the target")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.set_defaults(func=_cmd_project)


def _cmd_report(args) -> int:
    from pipelines.report.nightly import build_nightly

    print(build_nightly(Lake.from_env(), args.date, engine=args.engine, out=_path(args.out)))
    return 0


def _cmd_compare(args) -> int:
    from pipelines.report.versus import build_compare

    sides = [(column, getattr(args, f"{short}_a"), getattr(args, f"{short}_b")) for short, column in _PAIRS
             if getattr(args, f"{short}_a") or getattr(args, f"{short}_b")]
    if args.field or args.value_a or args.value_b:
        sides.append((args.field, args.value_a, args.value_b))
    if len(sides) != 1 or not all(sides[0]):
        raise ValueError("give exactly one pair: --sku-a/--sku-b, --pool-a/--pool-b, --torch-a/--torch-b, or "
                         "--field with --a and --b (see `perflake report compare --help`)")
    column, a, b = sides[0]
    path = build_compare(Lake.from_env(), column, a, column, b, dt_a=args.date_a or args.date,
                         dt_b=args.date_b or args.date, engine=args.engine, out=_path(args.out))
    print(path)
    return 0


def _cmd_project(args) -> int:
    from pipelines.warehouse.frames import Frames
    from pipelines.projection.roofline import project_job, unmeasured_skus

    lake = Lake.from_env()
    targets = args.target
    if not targets:
        with Frames(lake) as frames:
            targets = unmeasured_skus(frames)
        if not targets:
            print("every catalog GPU has measurements; name one with --target to project (and score) anyway")
            return 0
    done = []
    for target in targets:
        _, summary = project_job(lake, target, source=args.source, device_kind=args.device_kind,
                                 source_dates=args.source_date, source_pools=args.source_pool,
                                 measured_dates=args.measured_date, measured_pools=args.measured_pool,
                                 cases=args.cases, recalibrate=args.recalibrate)
        if args.format == "table":  # a heading and a table per target, as each is done
            print(projection_errors([(target, summary)]))
        done.append((target, summary))
    if args.format != "table":  # one document for every target, with a `target` column
        print(projection_errors(done, args.format))
    return 0


def projection_errors(summaries: list, fmt: str = "table") -> str:
    """The error summary (roofline.error_summary) of each (target, summary). As a table,
    each under its heading, an error not yet measured (NaN) printed '-' as the heading
    says. As CSV or JSON, one document a program can read: a `target` column first, an
    unmeasured error empty in CSV and null in JSON."""
    from pipelines.query.sql import format_rows

    def cells(summary):
        return [tuple(None if isinstance(v, float) and v != v else (round(v, 2) if isinstance(v, float) else v)
                      for v in r) for r in summary.itertuples(index=False)]

    if fmt != "table":
        columns = ["target"] + list(summaries[0][1].columns) if summaries else ["target"]
        rows = [(target,) + r for target, summary in summaries for r in cells(summary)]
        return format_rows(columns, rows, fmt=fmt)
    return "\n".join(f"projection error onto {target} (percent of the measured median; '-' until measured):\n"
                     f"{_dash_nulls(format_rows(list(summary.columns), cells(summary)))}"
                     for target, summary in summaries)


def _dash_nulls(table: str) -> str:
    """format_rows' aligned table with '-' in place of each NULL cell, aligned as the cell
    was (numbers right, an all-NULL column left)."""
    lines = table.split("\n")
    if len(lines) < 4:  # header, rule, the row count: no row
        return table

    def cell(c: str) -> str:
        if c.strip() != "NULL":
            return c
        return c.replace("NULL", "-   " if c.startswith("NULL") else "   -", 1)

    body = [" | ".join(cell(c) for c in line.split(" | ")).rstrip() for line in lines[2:-1]]
    return "\n".join(lines[:2] + body + lines[-1:])


def _path(p):
    from pathlib import Path

    return Path(p).resolve() if p else None
