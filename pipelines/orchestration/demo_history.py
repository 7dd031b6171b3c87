"""`make demo-history`: weeks of SIMULATED nights on two simulated GPU pools, landed and
mined by the product's own paths, so that regressions, triage, comparisons, the report,
projections and the dashboard have something real to show.

Every number here comes from the simulated device (kernels_bench/sim.py: a roofline
model with noise); runs say `device_kind = simulated` and the pools are `sim-h100` and
`sim-h200`. Each night is measured by the harness (`kernels_bench.runner.run_shard` on
`sim:<SKU>` with the night's `Injection`s), its run row carries the night's simulated
software stack (torch, triton, driver), it lands with `land_shard` and is mined by
`jobs.mine.mine` in one Spark session. The events, with known ground truth:

- torch 2.12 -> 2.13 (40 % into the history): bf16 GEMMs with k = 4096 get 12 % slower;
- driver 560 -> 570 (the night after the arrival): flash attention gets 10 % faster;
- a flaky case: one fp32 GEMM on sim-h100 measures with 8 % extra noise every night;
- failures: two cases fail on one night, and one night of sim-h100 never lands;
- a new GPU: sim-h200 arrives two thirds in; perf.projections are made onto it from
  the H100's history first, then its previous nights are backfilled (reason `backfill`)
  and the projections are scored against what it measured.

Beside them, and labelled as such, the REAL nights: the NVIDIA H200 nights kept in
kernels_bench/reference (device_kind `gpu`, pool `h200`), ingested and mined last.
"""
from __future__ import annotations

import datetime
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import kernels_bench
from pipelines.config.lake import Lake
from pipelines.orchestration.console import Console, duration, log_path, quiet_exit

POOLS = {"sim-h100": "H100-SXM5-80GB", "sim-h200": "H200-SXM-141GB"}
NIGHTS = 21
# The nights measured on a real NVIDIA H200 (kernels_bench/reference/<name>/README.md;
# each night.json names its date): two leases, two dates.
REAL_NIGHTS = tuple(Path(kernels_bench.__file__).resolve().parent / "reference" / name
                    for name in ("h200-2026-11-26", "h200-2026-11-27"))
REAL_NIGHT_DT = "2026-11-26"  # the fuller night (GEMM, memory, norm, roofline): the report to read first
BACKFILL_NIGHTS = 4
FLAKY = {"kernel": "matmul", "dtype": "fp32", "m": "128", "n": "4096", "k": "4096"}
FAILURE = "simulated failure (demo-history): CUDA error: an illegal memory access was encountered"


@dataclass(frozen=True)
class Events:
    """On which night (0-based) each event happens, for a history of `nights` nights:
    the same proportions at any length (21 nights: upgrade 8, arrival 14, driver 15)."""

    nights: int

    @property
    def upgrade(self) -> int:
        return round(self.nights * 0.4)

    @property
    def arrival(self) -> int:
        return round(self.nights * 0.67)

    @property
    def driver(self) -> int:
        return self.arrival + 1

    @property
    def failed_cases(self) -> dict:
        """(pool, night) -> how many cases fail that night."""
        return {("sim-h200", self.nights - 4): 2}

    @property
    def missing(self) -> set:
        """(pool, night) whose shard never landed (a worker down all night)."""
        return {("sim-h100", (self.upgrade + self.arrival) // 2)}
DAG_RUN = "demo_history__{dt}"


@dataclass(frozen=True)
class Software:
    """The simulated software stack of a night, stamped in its run rows."""

    torch_version: str
    triton_version: str
    driver_version: str
    cuda_version: str = "12.8"


def software(night: int, ev: Events) -> Software:
    torch, triton = ("2.13.0", "3.5.0") if night >= ev.upgrade else ("2.12.0", "3.4.0")
    return Software(torch, triton, "570.86.10" if night >= ev.driver else "560.35.03")


def injections(pool: str, dates: list[str]):
    """The events as the simulated device's injections (sim.Injection), for `pool`."""
    from kernels_bench.sim import Injection

    ev = Events(len(dates))
    out = [Injection({"kernel": "matmul", "dtype": "bf16", "k": "4096"}, since=dates[ev.upgrade], factor=1.12),
           Injection({"kernel": "sdpa", "backend": "sdpa-flash"}, since=dates[ev.driver], factor=0.90)]
    if pool == "sim-h100":
        out.append(Injection(FLAKY, since=dates[0], jitter=0.08))
    return tuple(out)


def history_suite():
    """The cases of the history: LLM GEMMs (fp32, bf16, fp16; 128 and 2048 tokens) and
    flash attention (bf16), from the product's suites."""
    from kernels_bench.suite import Suite, load_suite

    gemm = [pc for pc in load_suite("llm-gemm").cases if pc.skip_reason is None and pc.case.dtype in ("fp32", "bf16", "fp16")
            and str(pc.case.p.get("m")) in ("128", "2048") and "batch" not in pc.case.p]
    attention = [pc for pc in load_suite("attention").cases
                 if pc.case.backend == "sdpa-flash" and pc.case.dtype == "bf16" and pc.case.p.get("q_len") != 1]
    return Suite("demo-history", tuple(gemm + attention))


def nights(n: int, end: datetime.date | None = None) -> list[str]:
    """`n` consecutive dates ending the day before `end` (default: today, UTC)."""
    end = end or datetime.datetime.now(datetime.timezone.utc).date()
    return [(end - datetime.timedelta(days=n - i)).isoformat() for i in range(n)]


def land_night(lake: Lake, suite, pool: str, night: int, dates: list[str], reason: str, staging: Path) -> dict:
    """Measure `suite` on the pool's simulated GPU for night `night` and land it; returns
    the landed row counts. Run row: the night's software, started at 02:00 UTC."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kernels_bench import provenance
    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.stopping import StoppingRule
    from pipelines.landing.files import land_shard
    from pipelines.sweep.ids import pool_run_id, sweep_run_id

    dt = dates[night]
    run_id = pool_run_id(sweep_run_id(DAG_RUN.format(dt=dt), dt), pool)
    spec = ShardSpec(run_id=run_id, shard=0, num_shards=1, pool=pool, device=f"sim:{POOLS[pool]}", dt=dt,
                     reason=reason, dag_run_id=DAG_RUN.format(dt=dt))
    out = staging / run_id
    rule = StoppingRule(min_samples=30, min_time_s=0.0, max_noise=0.01, timeout_s=1.0, max_samples=40)
    paths = run_shard(suite, spec, out, rule=rule, injections=injections(pool, dates), progress=lambda _: None)
    ev = Events(len(dates))
    failing = ev.failed_cases.get((pool, night), 0)
    if failing:
        _fail_cases(paths, failing)
    (row,) = pq.read_table(paths["runs"]).to_pylist()
    start = datetime.datetime.fromisoformat(dt).replace(hour=2, minute=7 * list(POOLS).index(pool),
                                                          tzinfo=datetime.timezone.utc)
    row.update(software(night, ev).__dict__, started_at=start, finished_at=start + datetime.timedelta(minutes=5))
    if failing:
        row.update(status="partial", cases_ok=row["cases_ok"] - failing)
    row["software_fingerprint"] = provenance.fingerprint(row, provenance.SOFTWARE_KEYS)
    pq.write_table(pa.Table.from_pylist([row], schema=pq.read_schema(paths["runs"])), paths["runs"])
    counts = land_shard(out, lake, dt=dt, pool=pool, run_id=run_id, shard=0)
    shutil.rmtree(out, ignore_errors=True)
    return counts


def _fail_cases(paths: dict, n: int) -> None:
    """The first `n` GEMM cases of the shard failed: status failed with the error, no samples."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    results = pq.read_table(paths["case_results"])
    rows = results.to_pylist()
    failed = [r["case_id"] for r in rows if r["kernel"] == "matmul"][:n]
    for r in rows:
        if r["case_id"] in failed:
            r.update(status="failed", error=FAILURE, stop_reason=None, n_samples=0, energy_per_call_j=None,
                     avg_power_w=None)
    pq.write_table(pa.Table.from_pylist(rows, schema=results.schema), paths["case_results"])
    samples = pq.read_table(paths["samples"])
    keep = pc.invert(pc.is_in(samples.column("case_id"), value_set=pa.array(failed)))
    pq.write_table(samples.filter(keep), paths["samples"])


def plan(n: int = NIGHTS, backfill: int = BACKFILL_NIGHTS) -> list[tuple[int, list[str], list[tuple[str, str]]]]:
    """The history in the order it happens, as (night, pools to mine, landings as (pool,
    reason)): nights before the arrival on sim-h100 only; at the arrival the H200's
    previous `backfill` nights are backfilled; then both pools nightly."""
    ev = Events(n)
    steps = []
    for night in range(n):
        if night == ev.arrival:
            for b in range(max(0, ev.arrival - backfill), ev.arrival):
                steps.append((b, ["sim-h200"], [("sim-h200", "backfill")]))
        pools = ["sim-h100"] + (["sim-h200"] if night >= ev.arrival else [])
        landings = [(p, "nightly") for p in pools if (p, night) not in ev.missing]
        steps.append((night, pools, landings))
    return steps


def run_history(lake: Lake, *, nights_count: int = NIGHTS, backfill: int = BACKFILL_NIGHTS,
                verbose: bool = False) -> int:
    if nights_count < 8:
        raise ValueError(f"--nights {nights_count}: at least 8, so that each event has nights before and after it")
    ev = Events(nights_count)
    with Console(log_path(lake, "demo-history"), verbose) as out:
        dates = nights(nights_count)
        suite = history_suite()
        steps = plan(nights_count, backfill)
        out.say(f"perflake demo-history: {nights_count} SIMULATED nights ({dates[0]} .. {dates[-1]}) on pools "
                f"sim-h100 and sim-h200 (simulated GPUs), {len(suite.cases)} cases per night; lake {lake.root}")
        if not verbose:
            out.say(f"  logs (Spark, mining): {out.path}  (perflake demo-history -v shows them here)")
        out.say(f"  events: torch 2.13 on {dates[ev.upgrade]} (bf16 GEMMs k=4096 +12 %), driver 570 on "
                f"{dates[ev.driver]} (flash attention -10 %), a flaky fp32 GEMM on sim-h100, failures, "
                f"sim-h200 arrives {dates[ev.arrival]} (backfilled {backfill} night{'s' * (backfill != 1)})")
        from pipelines.warehouse.preflight import check_spark_can_start

        check_spark_can_start(lake)
        from jobs.mine import mine
        from pipelines.warehouse.session import get_spark

        spark = get_spark(lake, app="perflake-demo-history")
        out.say(f"  Spark session up in {duration(out.elapsed())}")
        staging = Path(tempfile.mkdtemp(prefix="demo-history-", dir=_tmp(lake)))
        started, samples = time.monotonic(), 0
        try:
            for i, (night, pools, landings) in enumerate(steps, 1):
                if "sim-h200" in pools and not _projected(lake):  # before its first (backfill) landing
                    _project_h200(lake, out)
                for pool, reason in landings:
                    samples += land_night(lake, suite, pool, night, dates, reason, staging)["samples"]
                landed = [pool for pool, _ in landings]
                down = [p for p in pools if p not in landed]
                if landed:
                    summary = mine(spark, lake, dates[night], landed)
                    what = (f"landed, mined {summary.case_stats:>3} case stats in {summary.seconds['total']:.0f} s"
                            + (f"; {', '.join(down)} landed nothing" if down else ""))
                else:  # as the mine task does: a night with nothing landed is not an error
                    what = f"{', '.join(down)} landed nothing (a simulated worker outage): no mine"
                took = time.monotonic() - started
                left = took / i * (len(steps) - i)
                kind = "backfill" if landings and landings[0][1] == "backfill" else "nightly"
                out.say(f"  [{i:>2}/{len(steps)}] {dates[night]} {kind:<8} {'+'.join(pools):<17} {what} "
                        f"({duration(took)} elapsed, ~{duration(left)} left)")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _real_night(lake, spark, out)
        status = _finish(lake, out, dates, spark, samples, ev)
        quiet_exit()
        return status


def _real_night(lake: Lake, spark, out: Console) -> None:
    """Beside the simulated pools: the REAL H200 nights kept in the repository
    (kernels_bench/reference), landed by `perflake ingest`'s path into pool h200 and
    mined, one date each."""
    import json

    from jobs.mine import mine
    from pipelines.config.pools import load_pools
    from pipelines.landing.ingest import ingest

    for night in REAL_NIGHTS:
        report = ingest([night / "shards"], lake, pool="h200", registry=load_pools())
        if not report.ok:
            raise RuntimeError(f"the real GPU night {night.name} did not land: {report.issues[:3]}")
        dt = json.loads((night / "night.json").read_text())["dt"]
        summary = mine(spark, lake, dt, ["h200"])
        out.say(f"  REAL GPU night (not simulated): NVIDIA H200 on {dt}, pool h200, from {night.name}: "
                f"{summary.samples:,} samples, {summary.case_stats} case stats in {summary.seconds['total']:.0f} s")


def _tmp(lake: Lake) -> Path:
    p = lake.root / "tmp"
    p.mkdir(parents=True, exist_ok=True)
    return p


def _projected(lake: Lake) -> bool:
    return (lake.warehouse / "projections").is_dir()


def _project_h200(lake: Lake, out: Console) -> None:
    """Before the new GPU's data lands: project every case, and the nightly workloads,
    onto it from the H100 (both are scored once it is measured)."""
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.projection.nightly_workloads import load_nightly
    from pipelines.projection.roofline import project_job
    from pipelines.projection.workload_table import write_workload_projections
    from pipelines.warehouse.frames import Frames

    project_job(lake, POOLS["sim-h200"], source=POOLS["sim-h100"], device_kind="simulated")
    with Frames(lake) as frames:
        blind = load_lookup(frames, POOLS["sim-h200"], device_kind="simulated")
        summaries = [project_workload(w, s, blind)[1] for w, s in load_nightly()]
    write_workload_projections(lake, summaries)
    out.say(f"  sim-h200 arrives: projected onto {POOLS['sim-h200']} from the H100's history (perf.projections, "
            f"and {len(summaries)} workload projections)")


def _finish(lake: Lake, out: Console, dates: list[str], spark, samples: int, ev: Events) -> int:
    from pipelines.orchestration.tasks import project_workloads
    from pipelines.projection.roofline import rescore_measured
    from pipelines.projection.workload_table import rescore_workloads
    from pipelines.report.nightly import build_nightly

    scored = rescore_measured(lake, dates[-1], ["sim-h200"], spark=spark)
    # Every night's workload projections in one write (the mine task writes one night's).
    workloads = project_workloads(lake, dates, spark=spark)
    workloads_scored = rescore_workloads(lake, dates[-1], ["sim-h200"], spark=spark)
    report = build_nightly(lake, dates[-1])
    rows = spark.sql("SELECT status, count(*) AS n FROM perf.regressions WHERE pool LIKE 'sim-%' "
                     "GROUP BY status ORDER BY status").collect()
    changes = ", ".join(f"{r.n} {r.status}" for r in rows) or "none"
    run_a = _run_id(dates[ev.upgrade - 1], "sim-h100")
    run_b = _run_id(dates[ev.upgrade], "sim-h100")
    errors = "; ".join([f"projections onto {s['target_sku']}: {s['measured']} of {s['projected']} cases measured, "
                        f"median error {s['median_abs_error_pct']} %" for s in scored]
                       + [f"workload projections onto {s['target_sku']}: {s['scored']} scored against its "
                          f"measurements, median error {s['median_abs_error_pct']} %" for s in workloads_scored])
    out.say(f"done in {duration(out.elapsed())}: {samples:,} SIMULATED samples; changes found: {changes}"
            + (f"; {errors}" if errors else "") + f"; {workloads} workload projections (perf.workload_projections)")
    out.say("next (all on the simulated history, but the last):")
    out.say("  perflake regressions                 changes pooled by cause (torch upgrade, driver change)")
    out.say("  perflake triage list                 the regressions to triage, by owner")
    out.say(f"  perflake compare {run_a} {run_b}")
    out.say("  perflake report compare --torch-a 2.12.0 --torch-b 2.13.0")
    out.say(f"  perflake project --target B200-SXM-180GB --source {POOLS['sim-h100']} --device-kind simulated")
    out.say(f"  perflake model llama-8b --gpu {POOLS['sim-h100']} --history   a model's step per night")
    out.say(f"  report:  {report}")
    out.say("  make web                             the dashboard on http://127.0.0.1:8080/ (series, triage, compare)")
    out.say(f"  perflake report --date {REAL_NIGHT_DT}         a REAL H200 night's report (pool h200; "
            f"attention on 2026-11-27)")
    return 0


def _run_id(dt: str, pool: str) -> str:
    from pipelines.sweep.ids import pool_run_id, sweep_run_id

    return pool_run_id(sweep_run_id(DAG_RUN.format(dt=dt), dt), pool)
