"""Does a night's mine cost the same whatever the length of the history before it?

    .venv/bin/python benchmarks/history_mining.py --histories 30 365 --series 500 --repeats 2

For each history length H it builds a lake of its own (SIMULATED data throughout):
1. one night D measured on the simulated H100 and H200 (the harness on the sim device,
   landed as the pipeline lands it), `--series` cases in all, mined by the real job;
2. H earlier nights published from that night's rows (new run ids and dates, medians
   jittered by 0.5 %), and perf.series and perf.regressions brought up to date over them;
3. night D mined again, timed: `jobs.mine.mine` in a process whose Spark session is
   already up (the session's start is not part of the mine), `--repeats` times.
Lakes and processes alternate between the lengths so that a drift of the machine's load
hits both. It prints one line per mine and the ratio of the medians (longest history
over shortest); the goal is within 20 %. Figures go to benchmarks/NOTES-scale.md by
hand, with the machine and the date.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NIGHT = "2031-06-01"
POOLS = {"sim-h100": "sim:H100-SXM5-80GB", "sim-h200": "sim:H200-SXM-141GB"}
SUITES = ("attention", "llm-gemm", "norm", "memory")


def land_night(lake, series: int) -> None:
    """Night D on both simulated GPUs: `series` cases in all, landed as the sweep lands them."""
    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.stopping import StoppingRule
    from kernels_bench.suite import Suite, load_suite
    from pipelines.landing.files import land_shard

    planned = [pc for name in SUITES for pc in load_suite(name).cases if pc.skip_reason is None]
    per_pool = series // len(POOLS)
    rule = StoppingRule(min_samples=10, min_time_s=0.0, max_noise=1.0, timeout_s=1.0, max_samples=20)
    for pool, device in POOLS.items():
        run_id = f"hist-{NIGHT}-{pool}"
        spec = ShardSpec(run_id=run_id, shard=0, num_shards=1, pool=pool, device=device, dt=NIGHT, reason="nightly")
        staging = Path(tempfile.mkdtemp(prefix="hist-night-"))
        run_shard(Suite("history-bench", tuple(planned[:per_pool])), spec, staging, rule=rule,
                  progress=lambda _: None)
        land_shard(staging, lake, dt=NIGHT, pool=pool, run_id=run_id, shard=0)
        shutil.rmtree(staging)


def publish_history(spark, lake, nights: int, seed: int = 3) -> None:
    """`nights` nights before D, made from D's published rows: one run per pool and night."""
    from pyspark.sql import functions as F

    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import DATABASE
    from schemas.tables import CASE_STATS, RUNS

    d0 = datetime.date.fromisoformat(NIGHT)
    back = spark.createDataFrame([(i, (d0 - datetime.timedelta(days=i)).isoformat()) for i in range(1, nights + 1)],
                                 "back INT, hist_dt STRING")
    jitter = 1 + F.randn(seed) * 0.005
    stats = (spark.table(f"{DATABASE}.case_stats").where(F.col("dt") == NIGHT).crossJoin(back)
             .withColumn("run_id", F.concat_ws("-h", "run_id", F.col("back").cast("string")))
             .withColumn("_j", jitter))
    for c in ("median_ns", "p10_ns", "p90_ns", "mean_ns", "median_ci_low_ns", "median_ci_high_ns"):
        if c in stats.columns:
            stats = stats.withColumn(c, F.col(c) * F.col("_j"))
    stats = stats.withColumn("dt", F.col("hist_dt")).drop("back", "hist_dt", "_j")
    runs = (spark.table(f"{DATABASE}.runs").where(F.col("dt") == NIGHT).crossJoin(back)
            .withColumn("run_id", F.concat_ws("-h", "run_id", F.col("back").cast("string")))
            .withColumn("started_at", F.col("started_at") - F.make_interval(days=F.col("back")))
            .withColumn("finished_at", F.col("finished_at") - F.make_interval(days=F.col("back")))
            .withColumn("dt", F.col("hist_dt")).drop("back", "hist_dt"))
    catalog.write_partitions(spark, lake, stats, CASE_STATS)
    catalog.write_partitions(spark, lake, runs, RUNS)


def build(root: Path, nights: int, series: int) -> None:
    from jobs.mine import mine, update_history
    from pipelines.config.lake import Lake
    from pipelines.mining.regressions import update_regressions
    from pipelines.warehouse.session import get_spark

    lake = Lake(root)
    land_night(lake, series)
    spark = get_spark(lake, app="history-bench-build")
    mine(spark, lake, NIGHT)
    publish_history(spark, lake, nights)
    update_history(spark, lake)
    update_regressions(spark, lake)
    n = spark.sql("SELECT count(DISTINCT dt) AS nights, count(*) AS rows FROM perf.case_stats").first()
    print(json.dumps({"built": str(root), "nights": n.nights, "case_stats_rows": n.rows}), flush=True)


def time_mines(root: Path, repeats: int) -> None:
    from jobs.mine import mine
    from pipelines.config.lake import Lake
    from pipelines.warehouse.session import get_spark

    lake = Lake(root)
    spark = get_spark(lake, app="history-bench")
    spark.sql("SELECT count(*) FROM perf.case_stats").collect()  # the session is up
    for _ in range(repeats):
        t = time.perf_counter()
        summary = mine(spark, lake, NIGHT)
        print(json.dumps({"mine_s": round(time.perf_counter() - t, 2), "case_stats": summary.case_stats,
                          "steps_s": getattr(summary, "seconds", None)}), flush=True)


def _child(*args: str) -> list[dict]:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--histories", type=int, nargs="+", default=[30, 365], help="nights of history before D")
    ap.add_argument("--series", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=2, help="timed mines per process")
    ap.add_argument("--rounds", type=int, default=1, help="processes per history length (alternated)")
    ap.add_argument("--root", default=None, help="where the lakes go (default: a temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="time the lakes already built under --root")
    ap.add_argument("--_build", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--_time", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._build:
        build(Path(args._build[0]), int(args._build[1]), int(args._build[2]))
        return 0
    if args._time:
        time_mines(Path(args._time[0]), int(args._time[1]))
        return 0

    root = Path(args.root or tempfile.mkdtemp(prefix="perflake-history-bench-"))
    lakes = {h: root / f"history-{h}" for h in args.histories}
    for h, lake in lakes.items():
        if args.reuse:
            continue
        t = time.perf_counter()
        info = _child("--_build", str(lake), str(h), str(args.series))[-1]
        print(f"built {h} nights of history ({info['case_stats_rows']} case_stats rows, "
              f"{info['nights']} nights) in {time.perf_counter() - t:.0f} s", flush=True)
    times: dict[int, list[float]] = {h: [] for h in args.histories}
    for r in range(args.rounds):
        for h in args.histories:
            for line in _child("--_time", str(lakes[h]), str(args.repeats)):
                times[h].append(line["mine_s"])
                print(f"round {r + 1}, history {h:4d} nights: mine {line['mine_s']:.2f} s "
                      f"({line['case_stats']} case_stats rows; steps {line['steps_s']})", flush=True)
    med = {h: statistics.median(v) for h, v in times.items()}
    lo, hi = min(args.histories), max(args.histories)
    print(json.dumps({"median_mine_s": med, "ratio_longest_over_shortest": round(med[hi] / med[lo], 3)}))
    if not args.root:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
