"""python -m kernels_bench list|run: the harness on a bare worker.

  python -m kernels_bench list                       # every suite and its case count
  python -m kernels_bench list --suite gemm-demo     # one suite's cases
  python -m kernels_bench run --suite gemm-demo --device cpu --shard 0/2 --out /tmp/shard0
  python -m kernels_bench run --suite llm-gemm --device sim:H100-SXM5-80GB --out /tmp/sim

A mistake in what was asked (an unknown suite, GPU SKU or device, a malformed option)
is one line on stderr and exit status 2; -v adds its traceback.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import uuid

from kernels_bench.device import DEFAULT_CPU_THREADS, check_device
from kernels_bench.errors import UsageError
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


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--cpu-threads takes a whole number >= 1, got {text!r}")
    return n


def _json_option(name: str, text: str, build):
    """`build(json.loads(text))`, or a UsageError naming the option."""
    try:
        return build(json.loads(text))
    except (ValueError, TypeError) as e:  # JSONDecodeError is a ValueError
        raise UsageError(f"{name}: {e}") from e


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
    """Run a command. A UsageError (kernels_bench/errors.py: a mistake in what was asked)
    prints one line, `error: ...`, and returns 2; -v prints its traceback first. Any
    other exception is a bug and keeps its traceback."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except UsageError as e:
        if args.verbose:
            import traceback

            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="print the traceback of an error")
    ap = argparse.ArgumentParser(prog="python -m kernels_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true", help="print the traceback of an error")
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", parents=[verbose], help="list the suites and their case counts, or one suite's cases")
    ls.add_argument("--suite", help="list this suite's cases (default: every suite, one line each)")
    ls.add_argument("--kernel", help="glob over kernel names")
    run = sub.add_parser("run", parents=[verbose], help="measure one shard and write landing Parquet")
    run.add_argument("--suite", required=True)
    run.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or sim:SKU")
    run.add_argument("--cpu-threads", type=_threads, default=DEFAULT_CPU_THREADS, metavar="N",
                     help="--device cpu: torch's intra-op threads in the measuring processes (default "
                          f"{DEFAULT_CPU_THREADS}; torch's own default, one per core, measures the OS scheduler on "
                          "a shared machine); recorded in the run's env as OMP_NUM_THREADS and MKL_NUM_THREADS")
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
    return ap


def _run(args: argparse.Namespace) -> int:
    if args.cmd == "list" and not args.suite:
        return list_suites(args.kernel)
    case_ids = args.cases.split(",") if getattr(args, "cases", None) else None
    suite = load_suite(args.suite).filter(args.kernel, case_ids)  # SuiteError: a UsageError
    if args.cmd == "list":
        for pc in suite.cases:
            print(pc.case.case_id, pc.case.label, f"SKIP: {pc.skip_reason}" if pc.skip_reason else "")
        print(f"{len(suite.cases)} cases")
        return 0
    if not suite.cases:
        raise UsageError(f"no case of suite {args.suite!r} matches --kernel {args.kernel!r} / --cases "
                         f"{args.cases!r}: nothing to run (`python -m kernels_bench list --suite {args.suite}`)")
    _check_run_arguments(args)
    rule = suite.stopping
    if args.stopping:
        rule = _json_option("--stopping", args.stopping,
                            lambda d: StoppingRule.from_dict({**rule.__dict__, **d}))
    injections = ()
    if args.inject:
        from kernels_bench.sim import Injection  # numpy: the simulated device only

        injections = _json_option("--inject", args.inject, lambda ds: tuple(Injection(**d) for d in ds))
    spec = ShardSpec(run_id=args.run_id or uuid.uuid4().hex[:12], shard=args.shard[0], num_shards=args.shard[1],
                     pool=args.pool, device=args.device, attempt=args.attempt, reason=args.reason,
                     dag_run_id=args.dag_run_id, seed=args.seed, record_shard=args.record_shard,
                     cpu_threads=args.cpu_threads,
                     dt=args.date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"))
    check_device(spec.device)  # as run_shard does first: a bad device is said before a folder is made
    _make_out(args.out)
    try:
        paths = run_shard(suite, spec, args.out, rule=rule, injections=injections,
                          progress=lambda m: print(m, file=sys.stderr, flush=True))
    except ShardStopped as e:
        rest = ("the other cases are recorded as stopped" if e.measured < e.planned
                else "the signal came after the last case: every case was measured")
        print(f"{e}: the measured part is in {args.out} ({rest})", file=sys.stderr)
        print(json.dumps({k: str(v) for k, v in e.paths.items()}))
        return STOPPED_EXIT
    print(json.dumps({k: str(v) for k, v in paths.items()}))
    return 0


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+\-:]{0,127}$")  # as the lake's partition names (safe_name)


def _check_run_arguments(args: argparse.Namespace) -> None:
    """UsageError for an argument the run would otherwise measure a whole shard with and
    then fail on, or land under a wrong label: checked before the first sample."""
    for flag, value in (("--run-id", args.run_id), ("--pool", args.pool)):
        if value is not None and not _NAME.match(value):
            raise UsageError(f"{flag} {value!r}: letters, digits and _ . + - : only (it names a folder of the lake)")
    if args.date is not None:
        try:
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.date):
                raise ValueError
            dt.date.fromisoformat(args.date)
        except ValueError:
            raise UsageError(f"--date {args.date!r} is not a calendar date YYYY-MM-DD") from None
    if args.attempt < 1 or (args.record_shard is not None and args.record_shard < 0):
        raise UsageError("--attempt counts from 1 and --record-shard from 0")


def _make_out(out: str) -> None:
    """The output folder, made before the first sample: a path that cannot hold it is a
    UsageError now, not an OSError after the whole shard was measured."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {out}: a file is there, not a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot make this folder ({e.strerror})") from None


def _entry() -> int:
    """`python -m kernels_bench`: main(), and quiet when the reader of stdout goes away
    (`list | head`), as Unix tools are: no BrokenPipeError traceback, exit 141
    (128 + SIGPIPE, what a shell reports for a tool that SIGPIPE ended)."""
    try:
        status = main()
        sys.stdout.flush()  # here, not at exit, where a broken pipe could only be printed
        return status
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(_entry())
