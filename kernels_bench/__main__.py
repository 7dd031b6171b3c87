"""python -m kernels_bench list|run: the harness on a bare worker.

  python -m kernels_bench list                       # every suite and its case count
  python -m kernels_bench list --suite gemm-demo     # one suite's cases
  python -m kernels_bench run --suite gemm-demo --device cpu --shard 0/2 --out /tmp/shard0
  python -m kernels_bench run --suite llm-gemm --device sim:H100-SXM5-80GB --out /tmp/sim
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import uuid

from kernels_bench.runner import STOPPED_EXIT, ShardSpec, ShardStopped, run_shard
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import SUITES_DIR, SuiteError, load_suite


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/N (e.g. 0/4), got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {text}: need 0 <= I < N")
    return i, n


def list_suites(kernel: str | None = None, out=None) -> int:
    """One line per suite of kernels_bench/suites: name, cases (skipped ones counted
    apart), kernels. A suite that does not load is listed with its error (exit 2)."""
    out = out or sys.stdout
    status = 0
    names = sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))
    width = max(map(len, names), default=5)
    for name in names:
        try:
            suite = load_suite(name).filter(kernel)
        except SuiteError as e:
            print(f"{name:<{width}}  error: {e}", file=out)
            status = 2
            continue
        skipped = sum(pc.skip_reason is not None for pc in suite.cases)
        kernels = sorted({pc.case.kernel for pc in suite.cases})
        print(f"{name:<{width}}  {len(suite.cases):>4} cases" + (f" ({skipped} skipped)" if skipped else "")
              + f"  {', '.join(kernels)}", file=out)
    print(f"{len(names)} suites; `python -m kernels_bench list --suite NAME` lists one suite's cases", file=out)
    return status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="list the suites and their case counts, or one suite's cases")
    ls.add_argument("--suite", help="list this suite's cases (default: every suite, one line each)")
    ls.add_argument("--kernel", help="glob over kernel names")
    run = sub.add_parser("run", help="measure one shard and write landing Parquet")
    run.add_argument("--suite", required=True)
    run.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or sim:SKU")
    run.add_argument("--shard", type=_shard, default=(0, 1), help="I/N")
    run.add_argument("--record-shard", type=int, default=None,
                     help="shard number written in the rows (unique within a multi-suite run; default I)")
    run.add_argument("--out", required=True)
    run.add_argument("--kernel", help="glob over kernel names")
    run.add_argument("--cases", default=None, help="comma-separated case ids to run (a subset of the suite)")
    run.add_argument("--run-id", default=None)
    run.add_argument("--pool", default="adhoc")
    run.add_argument("--reason", default="manual", choices=["nightly", "backfill", "rerun", "manual", "import"])
    run.add_argument("--dag-run-id", default="cli")
    run.add_argument("--attempt", type=int, default=1)
    run.add_argument("--date", default=None, help="run date YYYY-MM-DD (UTC today by default)")
    run.add_argument("--seed", type=int, default=None, help="shuffle the case order with this seed")
    run.add_argument("--stopping", default=None, help='JSON overrides, e.g. {"min_time_s": 1.0}')
    run.add_argument("--inject", default=None,
                     help='sim only: JSON list of {"match": {...}, "since": "YYYY-MM-DD", "factor": 1.05, '
                          '"jitter": 0.0, "reasons": ["nightly"]} (jitter and reasons optional)')
    args = ap.parse_args(argv)
    if args.cmd == "list" and not args.suite:
        return list_suites(args.kernel)
    try:
        case_ids = args.cases.split(",") if getattr(args, "cases", None) else None
        suite = load_suite(args.suite).filter(args.kernel, case_ids)
    except SuiteError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.cmd == "list":
        for pc in suite.cases:
            print(pc.case.case_id, pc.case.label, f"SKIP: {pc.skip_reason}" if pc.skip_reason else "")
        print(f"{len(suite.cases)} cases")
        return 0
    rule = suite.stopping
    if args.stopping:
        rule = StoppingRule.from_dict({**rule.__dict__, **json.loads(args.stopping)})
    injections = ()
    if args.inject:
        from kernels_bench.sim import Injection  # numpy: the simulated device only

        injections = tuple(Injection(**d) for d in json.loads(args.inject))
    spec = ShardSpec(run_id=args.run_id or uuid.uuid4().hex[:12], shard=args.shard[0], num_shards=args.shard[1],
                     pool=args.pool, device=args.device, attempt=args.attempt, reason=args.reason,
                     dag_run_id=args.dag_run_id, seed=args.seed, record_shard=args.record_shard,
                     dt=args.date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"))
    try:
        paths = run_shard(suite, spec, args.out, rule=rule, injections=injections,
                          progress=lambda m: print(m, file=sys.stderr, flush=True))
    except ShardStopped as e:
        print(f"{e}: the measured part is in {args.out} (the other cases are recorded as stopped)",
              file=sys.stderr)
        print(json.dumps({k: str(v) for k, v in e.paths.items()}))
        return STOPPED_EXIT
    print(json.dumps({k: str(v) for k, v in paths.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
