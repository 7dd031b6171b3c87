"""`perflake regressions`, `perflake compare` and `perflake detect-changes`: the night's
changes pooled by cause, comparing two sets of runs, and the detector on any series.
(Acknowledging and closing a regression is `perflake triage`.)

  perflake regressions --date 2033-01-09              # pooled by cause; --detail lists each
  perflake compare RUN_A RUN_B                        # per case: faster, slower, same, ambiguous
  perflake compare --a gpu_sku=H100-SXM5-80GB --a torch_version=2.12.0 --b gpu_sku=H100-SXM5-80GB \\
      --b torch_version=2.13.0 --format json
"""
from __future__ import annotations

import argparse
import json
import sys

from pipelines.cli.args import date_arg
from pipelines.config.lake import Lake

DETAIL_COLUMNS = ("series_key", "metric", "kernel", "dtype", "gpu_sku", "change_run_id", "change_pct", "q_value",
                  "direction", "status", "cause")
COMPARE_COLUMNS = ("case_id", "kernel", "dtype", "shape", "verdict", "ratio", "ci_low", "ci_high", "p_value", "n_a",
                   "n_b")


def register(sub) -> None:
    from pipelines.query.selectable import SELECTABLE

    p = sub.add_parser("regressions", help="the night's regressions and improvements, pooled by what changed")
    p.add_argument("--date", type=date_arg, help="night of the change runs, YYYY-MM-DD (default: every night)")
    p.add_argument("--all", action="store_true", help="include cleared changes")
    p.add_argument("--detail", action="store_true", help="also list every change")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=_cmd_regressions)

    p = sub.add_parser("detect-changes", help="change points of one column of a CSV, as JSON")
    p.add_argument("file")
    p.add_argument("--column", required=True)
    p.add_argument("--alpha", type=_probability, default=None,
                   help="largest p-value of a reported change in the history's body, per history (default "
                        "0.005; the newest runs, asked again every night, are held to the smaller of this and "
                        "0.001). 0.02 finds 0.5-0.8 %% more of the steps for two to three times the false alarms; see "
                        "docs/regressions.md")
    p.set_defaults(func=_cmd_detect)

    p = sub.add_parser("compare", help="compare two runs (or two sets of runs) case by case on their raw samples",
                       epilog=f"filter keys: {', '.join(SELECTABLE)}")
    p.add_argument("run_a", nargs="?", help="run id of side A (or use --a)")
    p.add_argument("run_b", nargs="?", help="run id of side B (or use --b)")
    p.add_argument("--a", action="append", default=[], metavar="KEY=VALUE", help="filter for side A (repeatable)")
    p.add_argument("--b", action="append", default=[], metavar="KEY=VALUE", help="filter for side B (repeatable)")
    p.add_argument("--tolerance", type=_tolerance, default=0.02, help="relative change treated as none (default 0.02)")
    p.add_argument("--alpha", type=_probability, default=0.01,
                   help="significance level of the rank test (default 0.01)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    p.add_argument("--engine", choices=["spark", "duckdb"], default="spark",
                   help="spark (default; any size) or duckdb (embedded: no JVM start, for a few runs)")
    p.set_defaults(func=_cmd_compare)


def _spark():
    from pipelines.warehouse.session import get_spark

    lake = Lake.from_env()
    return get_spark(lake), lake


def _cmd_regressions(args) -> int:
    from pipelines.warehouse import catalog
    from pipelines.mining.attribution import changes, describe, pooled
    from pipelines.query.sql import format_rows
    from schemas.tables import REGRESSIONS

    from pipelines.warehouse.session import reader_session

    spark = reader_session(Lake.from_env())
    table = catalog.read_table(spark, REGRESSIONS)
    dt = args.date
    chosen = changes(table, dt, include_cleared=args.all)
    groups = [r.asDict() for r in pooled(chosen).collect()]
    rows = []
    if args.detail:
        rows = [r.asDict() for r in chosen.orderBy("cause", "direction", "series_key").collect()]
    if args.format == "json":
        print(json.dumps({"date": dt, "groups": [{**g, "summary": describe(g)} for g in groups],
                          "regressions": rows}, default=str, indent=2))
        return 0
    print(headline(groups, dt, chosen.select("series_key").distinct().count() if groups else 0))
    for g in groups:
        print(f"  {describe(g)}")
    if dt and not groups:
        print(f"  ({_nights_note(spark, dt)})")
    if args.detail:
        print(format_rows(list(DETAIL_COLUMNS), [tuple(r[c] for c in DETAIL_COLUMNS) for r in rows]))
    return 0


def headline(groups: list[dict], dt: str | None, series: int) -> str:
    """The first line of `perflake regressions`: how many series changed (each once, though
    a change in latency and in energy puts it in two groups) and in how many groups (they
    follow, one a line), or a whole sentence when none did."""
    night = f"on {dt}" if dt else "in the whole history"
    if not groups:
        return f"0 changed series {night}."
    return f"{series} changed series {night}, {len(groups)} group(s):"


def _nights_note(spark, dt: str) -> str:
    """Why a night shows no change: it was mined and nothing changed, or it is not in the lake."""
    from pyspark.sql import functions as F
    from pipelines.warehouse import catalog
    from schemas.tables import RUNS

    nights = catalog.read_table(spark, RUNS).agg(F.min("dt").alias("first"), F.max("dt").alias("last"),
                                                  F.max(F.when(F.col("dt") == F.lit(dt), 1)).alias("has")).first()
    if nights["has"]:
        return f"runs of {dt} were mined: no series changed that night"
    if nights["first"] is None:
        return "the lake has no mined night yet (make demo, or perflake mine --date D)"
    return f"no run of {dt} was mined; the lake's nights run from {nights['first']} to {nights['last']}"


def _cmd_compare(args) -> int:
    from pipelines.query.ab import ORDER, Side, mixed_kinds
    from pipelines.query.sql import format_rows

    a, b = Side.parse(args.a, args.run_a), Side.parse(args.b, args.run_b)
    if args.engine == "duckdb":
        from pipelines.query.ab import compare_runs_duckdb
        from pipelines.warehouse.duck import duckdb_connection

        rows = compare_runs_duckdb(duckdb_connection(Lake.from_env()), a, b, alpha=args.alpha,
                                   tolerance=args.tolerance)
    else:
        from pipelines.warehouse import catalog
        from pipelines.query.ab import compare_runs
        from pipelines.warehouse.session import DATABASE
        from schemas.tables import CASES

        spark, lake = _spark()
        cases = spark.table(catalog.ensure_table(spark, lake, CASES))
        result = compare_runs(spark.table(f"{DATABASE}.samples"), spark.table(f"{DATABASE}.runs"), cases, a, b,
                              alpha=args.alpha, tolerance=args.tolerance)
        rows = [r.asDict() for r in result.orderBy(*ORDER).collect()]
    if args.format == "json":
        print(json.dumps({"a": str(a), "b": str(b), "cases": rows}, default=str, indent=2))
        return 0
    columns = list(COMPARE_COLUMNS) + (["test"] if args.format == "csv" else [])
    if args.format == "table":
        tests = sorted({r["test"] for r in rows if r["test"]})
        print(f"A: {a}\nB: {b}\nratio = median(B) / median(A), 99 % bootstrap CI; test: {', '.join(tests) or '-'}")
        for note in mixed_kinds(rows):
            print(f"note: {note}", file=sys.stderr)
    print(format_rows(columns, [tuple(r[c] for c in columns) for r in rows], fmt=args.format))
    if args.format == "table":
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        print(", ".join(f"{v}: {n}" for v, n in sorted(counts.items())))
    return 0


def read_series(path: str, column: str):
    """One numeric column of a CSV file, in file order; an empty cell (or NA, NaN, null)
    is a missing run. A file that is not CSV, a missing column or a cell that is not a
    number is an error naming the file (and the line and the value)."""
    import numpy as np
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        reason = " ".join(str(e).split())  # pandas ends some messages with a newline
        raise ValueError(f"{path}: not a readable CSV file ({reason})") from e
    if column not in frame.columns:
        raise ValueError(f"{path}: no column {column!r} (columns: {', '.join(frame.columns)})")
    cells = frame[column].str.strip()
    values = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) & cells.notna().to_numpy() & (cells != "").to_numpy())
    if len(bad):
        i = int(bad[0])  # line 1 is the header
        more = f" ({len(bad) - 1} more such cells)" if len(bad) > 1 else ""
        raise ValueError(f"{path}, row {i + 1} (line {i + 2}), column {column!r}: {cells.iloc[i]!r} is not a finite "
                         f"number{more}")
    return values


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability strictly between 0 and 1")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a relative change from 0 up to 1 (0.02 is 2 %)")
    return value


def _cmd_detect(args) -> int:
    from pipelines.changepoint import DetectorParams, detect

    params = DetectorParams() if args.alpha is None else DetectorParams(alpha=args.alpha)
    changes = detect(read_series(args.file, args.column), params=params)
    print(json.dumps({"changes": [c.index for c in changes],
                      "details": [c.__dict__ for c in changes]}, default=str, indent=2))
    return 0
