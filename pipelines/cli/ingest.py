"""`perflake ingest`: land result files produced elsewhere (harness Parquet, nvbench JSON)."""
from __future__ import annotations

import argparse
import json
import sys
import traceback

from pipelines.cli.args import date_arg
from pipelines.config.lake import Lake


def _cmd_ingest(args) -> int:
    from pipelines.landing.ingest import ArgumentError, ingest

    try:
        report = ingest(args.paths, Lake.from_env(), pool=args.pool, date=args.date,
                        force_pool=args.force_pool, verbose=args.verbose)
    except ArgumentError as e:  # arguments that make the whole call unlandable
        print(f"perflake ingest: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - never a raw traceback for any input, unless asked
        print(f"perflake ingest: internal error: {type(e).__name__}: {e}" +
              ("" if args.verbose else " (run with -v for the traceback)"), file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return 2
    print(json.dumps(report.to_dict(), indent=2, default=str))
    print(report.summary(), file=sys.stderr)
    hint = next_steps(report.landed)
    if hint:
        print(hint, file=sys.stderr)
    return 0 if report.ok else 1


def next_steps(landed: list[dict]) -> str:
    """What publishes the shards that landed (IngestReport.landed: one dict per shard,
    with its dt and pool): one `perflake mine` per night, as `make demo` prints its next
    steps; "" when nothing landed."""
    nights: dict[str, set[str]] = {}
    for shard in landed:
        nights.setdefault(str(shard["dt"]), set()).add(str(shard["pool"]))
    if not nights:
        return ""
    commands = [f"perflake mine --date {dt} " + " ".join(f"--pool {p}" for p in sorted(pools))
                for dt, pools in sorted(nights.items())]
    width = max(map(len, commands))
    return "\n".join(["next:"] + [f"  {c:<{width}}   publishes what landed (the perf tables show it once mined)"
                                   for c in commands])


def register(subparsers) -> None:
    """Add `perflake ingest PATH... [--pool NAME] [--date YYYY-MM-DD] [--force-pool] [-v]` to the CLI."""
    p = subparsers.add_parser(
        "ingest", help="land result files produced elsewhere (harness Parquet, nvbench JSON)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Land result files produced elsewhere into the lake, with the same checks as the\n"
                    "pipeline's own landings. Folders are walked recursively; the files of one folder form\n"
                    "one shard. Every file ends in one outcome: landed, skipped (its rows are in the lake\n"
                    "already), quarantined (refused, with the reason) or conflict (the lake holds other rows\n"
                    "for the same shard; kept aside, the landed copy untouched). Prints a JSON report on\n"
                    "stdout and one line per file on stderr; exits 0 when nothing was refused, 1 when\n"
                    "anything was (or nothing was found), 2 for bad arguments. See docs/ingest.md.\n"
                    "Then `perflake mine --date DATE` publishes what landed.",
        epilog="examples:\n"
               "  perflake ingest /scratch/out              # `kernels_bench run --out` folders, at any depth\n"
               "  perflake ingest run.parquet case_results.parquet samples.parquet --pool cpu\n"
               "  perflake ingest results.json --pool h100 --date 2026-11-22   # nvbench --json; h100 in pools.yaml\n"
               "  perflake ingest shards/ && perflake mine --date 2026-11-22")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    p.add_argument("--pool", help="pool the results belong to (default: the registered pool of the run's gpu_sku "
                                  "and device_kind); it must be of the shard's own hardware")
    p.add_argument("--date", type=date_arg,
                   help="run date YYYY-MM-DD (default: the run's start date, or today for nvbench); a shard that "
                        "landed before stays where it landed")
    p.add_argument("--force-pool", action="store_true",
                   help="land in --pool even where the shard's GPU SKU or device kind differ from the pool's "
                        "(logged in the report and the ingest manifest)")
    p.add_argument("-v", "--verbose", action="store_true", help="add tracebacks to internal errors")
    p.set_defaults(func=_cmd_ingest)
