"""`perflake ingest`: land result files produced elsewhere (harness Parquet, nvbench JSON)."""
from __future__ import annotations

import argparse
import json

from pipelines.config.lake import Lake


def _cmd_ingest(args) -> int:
    from pipelines.landing.ingest import ingest

    report = ingest(args.paths, Lake.from_env(), pool=args.pool, date=args.date)
    print(json.dumps(report.to_dict(), indent=2, default=str))
    return 0 if report.ok else 1


def register(subparsers) -> None:
    """Add `perflake ingest PATH... [--pool NAME] [--date YYYY-MM-DD]` to the CLI."""
    p = subparsers.add_parser(
        "ingest", help="land result files produced elsewhere (harness Parquet, nvbench JSON)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Land result files produced elsewhere into the lake, with the same checks as the\n"
                    "pipeline's own landings: bad files and rows go to quarantine with a reason, the rest\n"
                    "lands; a file ingested before is skipped. Prints a JSON report; exits 1 when\n"
                    "anything was set aside. Then `perflake mine --date DATE` publishes what landed.",
        epilog="examples:\n"
               "  perflake ingest /scratch/out              # a `kernels_bench run --out` directory\n"
               "  perflake ingest run.parquet case_results.parquet samples.parquet --pool cpu\n"
               "  perflake ingest results.json --pool h100 --date 2026-11-22   # nvbench --json; h100 in pools.yaml\n"
               "  perflake ingest shards/*/ && perflake mine --date 2026-11-22")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--pool", help="pool the results belong to (default: inferred from the run's gpu_sku)")
    p.add_argument("--date", help="run date YYYY-MM-DD (default: the run's start date, or today for nvbench)")
    p.set_defaults(func=_cmd_ingest)
