"""The `perflake` command line.

Examples:
  perflake demo                                   # the nightly sweep on the embedded default (-v: all logs)
  perflake demo-history                           # weeks of SIMULATED nights on two GPU pools, mined
  perflake info                                   # what the lake holds: nights, pools, GPUs, tables
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
  perflake model llama-8b --gpu H100-SXM5-80GB --phase decode --batch 32 --tp 8   # an LLM's step from its kernels
"""
from __future__ import annotations

import argparse
import os
import sys

from pipelines.cli import airflow, info, ingest, mine, model, regressions, report, services, sql, triage, web

# Each command group's module adds its sub-commands: one module per group.
GROUPS = (sql, mine, airflow, ingest, regressions, triage, report, model, web, services, info)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="perflake", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="show the logs of Airflow and Spark, and tracebacks of errors")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for group in GROUPS:
        group.register(sub)
    _verbose_everywhere(ap)
    return ap


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """`-v` after any sub-command too (`perflake demo -v`), unless it defines its own."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                if "-v" not in child._option_string_actions:
                    child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                       help="show the logs of Airflow and Spark, and tracebacks of errors")
                _verbose_everywhere(child)


def main(argv: list[str] | None = None) -> int:
    """Run a command. A known failure (pipelines/cli/failures.py) prints one sentence
    and exits 2; anything else is a bug and keeps its traceback. -v adds the traceback
    to the sentence."""
    from pipelines.cli.failures import known_failure

    args = build_parser().parse_args(argv)
    if not getattr(args, "verbose", False):
        _quiet_py4j()
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, where a reader that went away (`| head`) can be caught
        return status
    except BrokenPipeError:  # quiet, as Unix tools are; 128 + SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit, too
        return 141
    except KeyboardInterrupt:
        print(f"perflake {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        message = known_failure(e)
        if message is None:
            raise
        if getattr(args, "verbose", False):
            import traceback

            traceback.print_exc()
        print(f"perflake {args.cmd}: error: {message}", file=sys.stderr)
        return 2


def _quiet_py4j() -> None:
    """py4j logs a Ctrl-C during a Spark call as an error with two screens of traceback,
    on the root logger; the one line that main() prints says it (-v keeps py4j's)."""
    import logging

    py4j = f"{os.sep}py4j{os.sep}"
    logging.getLogger().addFilter(lambda record: py4j not in record.pathname)


if __name__ == "__main__":
    sys.exit(main())
