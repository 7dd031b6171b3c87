"""Scale benchmark of the mining job: SIMULATED raw samples, mined by Spark, and the same
cleaning and aggregation done by DuckDB and by pandas on the same Parquet, in one run.

    .venv/bin/python benchmarks/scale_mining.py --sizes 10e6 100e6 --out /tmp/scale.json

For each size it generates a landing lake (samples of the llm-gemm suite on the
simulated H100: real case_results and runs rows from the harness, with samples drawn
from the sim device's roofline model, device_kind = 'simulated'), then runs each engine
in its own process, sampling the resident memory of that process tree:

- spark-core: pipelines.mining (clean_samples, latest_attempt, flag_outliers,
  sample_stats), the pure transformations the mining job uses, written to Parquet;
- duckdb: the same rules in SQL (reject invalid, dedup on the natural key, latest
  attempt, MAD outliers with k=5 excluding throttled samples, quantiles, CI ranks);
- pandas: the same rules with pandas group-bys (skipped above --pandas-max samples);
- spark-mine (with --full-mine): the whole job, `pipelines.mine.mine`, which also
  republishes the samples table, runs, cases, series and the quality gates.

Each engine's per-case medians are compared with Spark's: the report says the largest
relative difference, so a fast but wrong engine shows. Figures go to
benchmarks/NOTES-scale.md by hand, with the machine and the date.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipelines.config import processes  # noqa: E402

DT, POOL, SUITE = "2031-06-01", "sim-h100", "llm-gemm"
SAMPLES_PER_CASE = 2000
KEYS = ["run_id", "case_id", "attempt"]


# ---------------------------------------------------------------- data generation
def generate(root: Path, n_samples: int, seed: int = 7) -> dict:
    """A landing lake of about n_samples simulated samples, one date, one pool."""
    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.stopping import StoppingRule
    from kernels_bench.suite import load_suite
    from pipelines.config.lake import Lake

    lake = Lake(root)
    template = root / "template"
    spec = ShardSpec(run_id="template", shard=0, num_shards=1, pool=POOL, device="sim:H100-SXM5-80GB", dt=DT,
                     reason="manual")
    rule = StoppingRule(min_samples=10, min_time_s=0.0, max_noise=1.0, timeout_s=1.0, max_samples=20)
    paths = run_shard(load_suite(SUITE), spec, template, rule=rule, progress=lambda _: None)
    results = pq.read_table(paths["case_results"])
    results = results.filter(pc.equal(results["status"], "ok"))
    run = pq.read_table(paths["runs"])
    tmpl = pq.read_table(paths["samples"]).to_pandas()
    levels = tmpl.groupby("case_id").latency_ns.median().reindex(results["case_id"].to_pylist()).to_numpy()

    rng = np.random.default_rng(seed)
    n_cases = len(levels)
    per_run = n_cases * SAMPLES_PER_CASE
    n_runs = max(1, round(n_samples / per_run))
    schema = pq.read_schema(paths["samples"])
    case_ids = np.repeat(np.array(results["case_id"].to_pylist(), dtype=object), SAMPLES_PER_CASE)
    iteration = np.tile(np.arange(SAMPLES_PER_CASE, dtype=np.int32), n_cases)
    base = np.repeat(levels, SAMPLES_PER_CASE)
    for r in range(n_runs):
        run_id = f"scale-{r:05d}"
        drift = np.exp(rng.normal(0, 0.002, n_cases)).repeat(SAMPLES_PER_CASE)
        lat = base * drift * np.exp(rng.normal(0, 0.01, per_run))
        spikes = rng.random(per_run) < 0.02
        lat[spikes] *= 1 + rng.exponential(0.15, spikes.sum())
        throttled = rng.random(per_run) < 0.01
        lat[throttled] /= 0.6
        bad = rng.random(per_run) < 1e-5  # a few invalid rows that must be quarantined
        latency = np.where(bad, -1, lat).astype(np.int64)
        table = pa.table({
            "run_id": pa.array([run_id] * per_run), "case_id": pa.array(case_ids), "attempt": pa.array(
                np.ones(per_run, dtype=np.int32)), "iteration": iteration, "latency_ns": latency,
            "sm_clock_mhz": pa.array(np.where(throttled, 1000, 1980).astype(np.int32)),
            "temperature_c": pa.nulls(per_run, pa.float64()), "power_w": pa.nulls(per_run, pa.float64()),
            "throttled": throttled, "outlier": pa.nulls(per_run, pa.bool_()),
            "device_kind": pa.array(["simulated"] * per_run)}).cast(schema)
        for kind, t in (("samples", table),
                        ("case_results", results.set_column(0, "run_id", pa.array([run_id] * len(results)))),
                        ("runs", run.set_column(run.schema.get_field_index("run_id"), "run_id", pa.array([run_id])))):
            dst = lake.landing_file(kind, DT, POOL, run_id, 0)
            dst.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(t, dst)
    shutil.rmtree(template)
    return {"runs": n_runs, "cases": n_cases, "samples": n_runs * per_run}


def samples_glob(root: Path) -> str:
    return str(root / "landing" / "samples" / f"dt={DT}" / "*" / "*" / "*.parquet")


# ---------------------------------------------------------------- engines
def run_spark_core(root: Path, out: Path) -> None:
    from pyspark.sql import functions as F

    from pipelines.config.lake import Lake
    from jobs.mine import landed_files, read_landed
    from pipelines.mining.aggregate import sample_stats
    from pipelines.mining.clean import clean_samples, latest_attempt
    from pipelines.mining.outliers import flag_outliers
    from pipelines.warehouse.session import get_spark
    from schemas.tables import SAMPLES

    lake = Lake(root)
    spark = get_spark(lake, app="perflake-scale")
    samples = read_landed(spark, landed_files(lake, "samples", DT), SAMPLES)
    good, _bad = clean_samples(samples)
    stats = sample_stats(flag_outliers(latest_attempt(good.drop("_source"))))
    stats.select(*KEYS, "n", "n_kept", F.col("median_ns"), "p10_ns", "p90_ns").write.mode("overwrite").parquet(
        str(out))
    (out / JVM_MEMORY_FILE).write_text(json.dumps(jvm_memory(spark)))
    spark.stop()


JVM_MEMORY_FILE = "_jvm_memory.json"  # a leading "_": Parquet readers of `out` skip it


def jvm_memory(spark) -> dict:
    """The driver JVM's memory as the JVM itself accounts it (local mode: the driver is
    also the executor): the heap limit, the peak heap in use (sum of each heap pool's
    peak, an upper bound of the true peak), the peak non-heap use (metaspace, code
    cache) and the direct buffers still held. The process's resident set also holds
    the JVM's own native memory and the Python driver, which these do not count."""
    mf = spark._jvm.java.lang.management.ManagementFactory
    gib = 2.0**30
    pools = list(mf.getMemoryPoolMXBeans())
    peak = {kind: sum(p.getPeakUsage().getUsed() for p in pools if p.getType().name() == kind)
            for kind in ("HEAP", "NON_HEAP")}
    buffer_pools = mf.getPlatformMXBeans(spark._jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean"))
    direct = sum(b.getMemoryUsed() for b in buffer_pools if b.getName() == "direct")
    return {"heap_max_gib": round(mf.getMemoryMXBean().getHeapMemoryUsage().getMax() / gib, 2),
            "heap_peak_gib": round(peak["HEAP"] / gib, 2), "non_heap_peak_gib": round(peak["NON_HEAP"] / gib, 2),
            "direct_buffers_gib": round(direct / gib, 3)}


def run_spark_mine(root: Path, out: Path) -> None:
    from pipelines.config.lake import Lake
    from jobs.mine import mine
    from pipelines.warehouse.session import get_spark

    lake = Lake(root)
    spark = get_spark(lake, app="perflake-scale-mine")
    mine(spark, lake, DT)
    spark.table("perf.case_stats").where(f"dt = '{DT}'").select(*KEYS, "n", "n_kept", "median_ns", "p10_ns",
                                                                  "p90_ns").write.mode("overwrite").parquet(str(out))
    spark.stop()


DUCKDB_SQL = """
COPY (
WITH s AS (SELECT run_id, case_id, attempt, iteration, latency_ns, throttled FROM read_parquet('{glob}')),
good AS (SELECT DISTINCT ON (run_id, case_id, attempt, iteration) * FROM s
         WHERE run_id IS NOT NULL AND case_id IS NOT NULL AND iteration >= 0 AND latency_ns > 0),
latest AS (SELECT * FROM good QUALIFY attempt = max(attempt) OVER (PARTITION BY run_id, case_id)),
med AS (SELECT run_id, case_id, attempt, median(latency_ns::DOUBLE) AS m FROM latest WHERE NOT throttled
        GROUP BY ALL),
mad AS (SELECT l.run_id, l.case_id, l.attempt, median(abs(l.latency_ns - med.m)) AS mad,
               avg(abs(l.latency_ns - med.m)) AS meanad
        FROM latest l JOIN med USING (run_id, case_id, attempt) WHERE NOT l.throttled GROUP BY ALL),
flagged AS (SELECT l.*, NOT l.throttled AND NOT coalesce(abs(l.latency_ns - med.m)
                > 5 * greatest(CASE WHEN mad.mad > 0 THEN mad.mad * 1.4826 ELSE mad.meanad * sqrt(pi() / 2) END,
                               med.m * 1e-4), false) AS kept
            FROM latest l LEFT JOIN med USING (run_id, case_id, attempt) LEFT JOIN mad USING (run_id, case_id, attempt))
SELECT run_id, case_id, attempt, count(*) AS n, count(*) FILTER (WHERE kept) AS n_kept,
       quantile_cont(latency_ns::DOUBLE, 0.5) FILTER (WHERE kept) AS median_ns,
       quantile_cont(latency_ns::DOUBLE, 0.1) FILTER (WHERE kept) AS p10_ns,
       quantile_cont(latency_ns::DOUBLE, 0.9) FILTER (WHERE kept) AS p90_ns
FROM flagged GROUP BY ALL
) TO '{out}' (FORMAT parquet)
"""


def run_duckdb(root: Path, out: Path) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET temp_directory = '{root / 'duckdb-tmp'}'")
    out.mkdir(parents=True, exist_ok=True)
    con.execute(DUCKDB_SQL.format(glob=samples_glob(root), out=out / "stats.parquet"))


def run_pandas(root: Path, out: Path) -> None:
    import glob

    import pandas as pd

    cols = ["run_id", "case_id", "attempt", "iteration", "latency_ns", "throttled"]
    # The id columns are read as dictionaries, so pandas gets categoricals directly instead
    # of one Python string per sample (at 10^8 samples that is ~12 GiB of strings).
    df = pa.concat_tables([pq.read_table(f, columns=cols, read_dictionary=["run_id", "case_id"])
                           for f in sorted(glob.glob(samples_glob(root)))]).to_pandas()
    df = df[df.run_id.notna() & df.case_id.notna() & (df.iteration >= 0) & (df.latency_ns > 0)]
    df = df.drop_duplicates(["run_id", "case_id", "attempt", "iteration"])
    df = df[df.attempt == df.groupby(["run_id", "case_id"], observed=True).attempt.transform("max")]
    lat = df.latency_ns.astype("float64")
    basis = lat.where(~df.throttled)
    g = [df.run_id, df.case_id, df.attempt]
    med = basis.groupby(g, observed=True).transform("median")
    mad = (basis - med).abs().groupby(g, observed=True).transform("median")
    meanad = (basis - med).abs().groupby(g, observed=True).transform("mean")
    robust = np.where(mad > 0, mad * 1.4826, meanad * np.sqrt(np.pi / 2))
    outlier = pd.Series((lat - med).abs() > 5 * np.maximum(robust, med * 1e-4), index=lat.index)
    kept_lat = lat.where(~df.throttled & ~outlier)
    grouped = kept_lat.groupby(g, observed=True)
    stats = pd.DataFrame({"n": lat.groupby(g, observed=True).size(), "n_kept": grouped.count(),
                          "median_ns": grouped.median(), "p10_ns": grouped.quantile(0.1),
                          "p90_ns": grouped.quantile(0.9)}).reset_index()
    out.mkdir(parents=True, exist_ok=True)
    stats.astype({"run_id": str, "case_id": str}).to_parquet(out / "stats.parquet")


def run_spark_startup(root: Path, out: Path) -> None:
    """The fixed cost inside spark-core's time: JVM, session and metastore start, one query."""
    from pipelines.config.lake import Lake
    from pipelines.warehouse.session import get_spark

    spark = get_spark(Lake(root), app="perflake-scale-startup")
    spark.range(1).collect()
    spark.stop()


ENGINES = {"spark-startup": run_spark_startup, "spark-core": run_spark_core, "spark-mine": run_spark_mine,
           "duckdb": run_duckdb, "pandas": run_pandas}


# ---------------------------------------------------------------- measuring
def measure(engine: str, root: Path, out: Path, driver_memory: str | None = None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PERFLAKE_HOME": str(root)}
    if driver_memory:  # read by pyspark when it launches the JVM
        env["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {driver_memory} pyspark-shell"
    cmd = [sys.executable, __file__, "engine", engine, "--lake", str(root), "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(root / f"{engine}.log", "w"))
    peak = 0

    def sample():
        nonlocal peak
        while proc.poll() is None:
            peak = max(peak, processes.tree_rss_bytes(proc.pid))
            time.sleep(0.25)

    t = threading.Thread(target=sample)
    t.start()
    proc.wait()
    t.join()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{engine} failed; see {root / f'{engine}.log'}")
    result = {"seconds": round(seconds, 1), "peak_rss_gib": round(peak / 2**30, 2)}
    if (out / JVM_MEMORY_FILE).exists():
        result["jvm"] = json.loads((out / JVM_MEMORY_FILE).read_text())
    return result


def medians(out: Path) -> dict:
    t = pq.read_table(out).to_pandas()
    return dict(zip(zip(t.run_id, t.case_id, t.attempt.astype(int)), t.median_ns))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    e = sub.add_parser("engine", help="(internal) run one engine")
    e.add_argument("name", choices=sorted(ENGINES))
    e.add_argument("--lake", required=True)
    e.add_argument("--out", required=True)
    ap.add_argument("--sizes", nargs="+", type=float, default=[10e6, 100e6])
    ap.add_argument("--work", default="/tmp/perflake-scale", help="where the generated lakes go (deleted after)")
    ap.add_argument("--pandas-max", type=float, default=100e6, help="skip pandas above this many samples")
    ap.add_argument("--full-mine", action="store_true", help="also time the whole mining job")
    ap.add_argument("--engines", nargs="+", choices=sorted(ENGINES), default=None,
                    help="run only these engines (default: spark-core, spark-startup, duckdb, pandas)")
    ap.add_argument("--driver-memory", default=None,
                    help="the Spark driver's heap (spark-submit --driver-memory), e.g. 512m; default Spark's 1g")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)
    if args.cmd == "engine":
        ENGINES[args.name](Path(args.lake), Path(args.out))
        return 0

    report = []
    for size in args.sizes:
        root = Path(args.work) / f"lake-{int(size)}"
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.perf_counter()
        gen = generate(root, int(size))
        row = {"samples": gen["samples"], "runs": gen["runs"], "cases": gen["cases"],
               "generate_s": round(time.perf_counter() - t0, 1)}
        engines = ["spark-core", "spark-startup", "duckdb"] + (["pandas"] if size <= args.pandas_max else []) + (
            ["spark-mine"] if args.full_mine else [])
        engines = [e for e in engines if args.engines is None or e in args.engines]
        # Engines checked and timed against spark-core (when it ran).
        compared = [e for e in engines if e not in ("spark-core", "spark-startup") and "spark-core" in engines]
        for name in engines:
            out = root / f"out-{name}"
            row[name] = measure(name, root, out, args.driver_memory)
            row[name]["samples_per_s"] = round(gen["samples"] / row[name]["seconds"])
            print(json.dumps({"samples": gen["samples"], name: row[name]}), flush=True)
            if name in compared:
                ref, got = medians(root / "out-spark-core"), medians(out)
                diff = max(abs(got[k] / ref[k] - 1) for k in ref if ref[k])
                row[name]["max_rel_median_diff_vs_spark"] = float(f"{diff:.2e}")
                row[name]["groups_match"] = set(ref) == set(got)
        for name in compared:
            row[f"spark_over_{name}_time"] = round(row["spark-core"]["seconds"] / row[name]["seconds"], 2)
        report.append(row)
        print(json.dumps(row, indent=2), flush=True)
        shutil.rmtree(root, ignore_errors=True)
    if len(report) > 1 and all("spark-core" in r for r in report):
        per = [r["spark-core"]["seconds"] / r["samples"] for r in report]
        print(f"spark cost per sample, largest vs smallest size: {per[-1] / per[0]:.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
