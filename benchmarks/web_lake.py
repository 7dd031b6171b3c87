"""The year-long simulated lake the dashboard benchmark (benchmarks/web_pages.py) and
tests/test_web.py read: written straight from the table definitions (schemas/tables.py)
with pyarrow, in the warehouse layout the mining job publishes (a `_CURRENT` snapshot per
table, or per Hive partition of a partitioned one: pipelines/warehouse/snapshots.py).
NIGHTS nights, SERIES series over four pools (one GPU SKU each), a software upgrade and a
driver upgrade part-way, steps injected into a few percent of the series with their
perf.regressions rows, raw samples for the newest SAMPLE_NIGHTS nights, and projections
onto one GPU. The values are
drawn, not measured (device_kind 'simulated'): the benchmark measures the dashboard, not
the detector.
"""
from __future__ import annotations

import datetime
import hashlib
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernels_bench.hardware import load_catalog  # noqa: E402
from pipelines.config.lake import Lake  # noqa: E402
from schemas import tables as T  # noqa: E402

POOLS = {"sim-h100-a": "H100-SXM5-80GB", "sim-h100-b": "H100-SXM5-80GB", "sim-h200": "H200-SXM-141GB",
         "sim-a100": "A100-SXM4-80GB"}
TARGET = "B200-SXM-180GB"  # projected onto, never measured
SAMPLES_PER_CASE = 40


def _h(*parts) -> str:
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:16]


def _write(lake: Lake, table: T.Table, rows: dict, partition: dict | None = None) -> None:
    schema = table.arrow_schema(with_partitions=False)
    data = pa.table({c.name: pa.array(rows[c.name], type=c_type) for c, c_type in
                     ((c, schema.field(c.name).type) for c in table.columns if c.name not in table.partition_by)},
                    schema=schema)
    tdir = lake.table_path(table.name)
    if table.partition_by:  # each partition is a snapshot behind its own pointer
        tdir = tdir.joinpath(*(f"{k}={partition[k]}" for k in table.partition_by))
    snap = tdir / "_snapshot-bench"
    snap.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, snap / "part-00000.parquet", compression="zstd")
    (snap / "_SUCCESS").touch()
    (tdir / "_CURRENT").write_text(snap.name + "\n")


def _cases(n: int, rng) -> list[dict]:
    out, sizes = [], [256, 512, 1024, 2048, 4096, 8192, 16384]
    kinds = [("gemm", "matmul", "torch"), ("gemm", "matmul", "triton"), ("memory", "copy", "torch"),
             ("norm", "layernorm", "torch"), ("attention", "sdpa", "sdpa-flash")]
    dtypes = ["bf16", "fp16", "fp32"]
    i = 0
    while len(out) < n:
        family, kernel, backend = kinds[i % len(kinds)]
        dtype = dtypes[(i // len(kinds)) % len(dtypes)]
        s = sizes[(i // 15) % len(sizes)]
        v = i // (15 * len(sizes))
        if family == "gemm":
            params = {"m": str(s), "n": str(s), "k": str(s * (v + 1))}
            flops, bytes_ = 2.0 * s * s * s * (v + 1), 2.0 * 3 * s * s
        elif family == "attention":
            params = {"batch": str(v + 1), "heads": "16", "seq": str(s), "head_dim": "128"}
            flops, bytes_ = 4.0 * (v + 1) * 16 * s * s * 128, 2.0 * 4 * (v + 1) * 16 * s * 128
        else:
            params = {"numel": str(s * s * (v + 1))}
            flops, bytes_ = (5.0 * s * s * (v + 1) if family == "norm" else 0.0), 2.0 * 2 * s * s * (v + 1)
        case_id = _h(family, kernel, backend, dtype, sorted(params.items()))
        out.append(dict(case_id=case_id, family=family, kernel=kernel, backend=backend, dtype=dtype, params=params,
                        flops=flops, bytes=bytes_))
        i += 1
    return out


def build_lake(root: Path, nights: int, series: int, sample_nights: int, seed: int = 0) -> dict:
    """Write the simulated lake under `root`; returns what the benchmark links to."""
    rng = np.random.default_rng(seed)
    lake = Lake.from_env(root)
    if root.exists():
        shutil.rmtree(root)
    catalog = load_catalog()
    cases = _cases(series // len(POOLS), rng)
    nc = len(cases)
    start = datetime.date(2035, 1, 1)
    dates = [(start + datetime.timedelta(days=i)).isoformat() for i in range(nights)]
    upgrade, driver = nights * 2 // 3, nights // 3
    hw = {p: _h("hw", p, sku) for p, sku in POOLS.items()}
    flops = np.array([c["flops"] for c in cases])
    bytes_ = np.array([c["bytes"] for c in cases])
    # True level per pool x case: the roofline time at a drawn efficiency.
    level = {}
    for p, sku in POOLS.items():
        h = catalog[sku]
        peak = np.array([h.peak_tflops.get(c["dtype"], 50.0) for c in cases])
        bound = np.maximum(flops / (peak * 1e3), bytes_ / h.memory_bandwidth_gbps)
        level[p] = 2500.0 + bound / rng.uniform(0.3, 0.8, nc)
    # Steps: 3 % of series get a +8..25 % step (some after the torch upgrade), 1 % improve.
    steps = {}
    for p in POOLS:
        for ci in rng.choice(nc, max(1, nc * 4 // 100), replace=False):
            night = upgrade if rng.random() < 0.5 else int(rng.integers(nights // 4, nights - 2))
            steps[(p, ci)] = (night, float(rng.choice([1.08, 1.12, 1.25, 0.9])))
    series_points = {}
    for di, dt in enumerate(dates):
        for pool, sku in POOLS.items():
            run_id = f"nightly-{dt}-{pool}"
            factor = np.ones(nc)
            for (p, ci), (night, f) in steps.items():
                if p == pool and di >= night:
                    factor[ci] = f
            noise = rng.normal(0, 0.01, nc)
            median = level[pool] * factor * (1 + noise)
            rel = np.abs(rng.normal(0.02, 0.01, nc)) + (rng.random(nc) < 0.01) * 0.2
            torch = "2.13.0" if di >= upgrade else "2.12.0"
            drv = "575.51" if di >= driver else "570.86"
            started = datetime.datetime.fromisoformat(dt).replace(hour=2, tzinfo=datetime.timezone.utc)
            run = {c.name: [None] for c in T.RUNS.columns}
            run.update(run_id=[run_id], dag_run_id=[f"scheduled__{dt}"], shard=[0], num_shards=[1], attempt=[1],
                       pool=[pool], reason=["nightly"], suite=["bench"], started_at=[started],
                       finished_at=[started + datetime.timedelta(minutes=40)], host=[f"{pool}-host"],
                       device_kind=["simulated"], device=[f"sim:{sku}"], gpu_name=[catalog[sku].name], gpu_sku=[sku],
                       driver_version=[drv], cuda_version=["12.9"], torch_version=[torch], triton_version=["3.4.0"],
                       python_version=["3.11"], harness_commit=["0a1b2c3"], env=[[]], hardware_fingerprint=[hw[pool]],
                       software_fingerprint=[_h(torch, drv)], status=["ok"], cases_planned=[nc], cases_ok=[nc])
            _write(lake, T.RUNS, run, {"dt": dt, "pool": pool})
            status = np.where(rng.random(nc) < 0.002, "failed", "ok")
            ok = status == "ok"
            peak = np.array([catalog[sku].peak_tflops.get(c["dtype"], 50.0) for c in cases])
            bound = np.maximum(flops / (peak * 1e3), bytes_ / catalog[sku].memory_bandwidth_gbps)
            stats = {c.name: [None] * nc for c in T.CASE_STATS.columns}
            stats.update(run_id=[run_id] * nc, case_id=[c["case_id"] for c in cases], attempt=[1] * nc,
                         family=[c["family"] for c in cases], kernel=[c["kernel"] for c in cases],
                         backend=[c["backend"] for c in cases], dtype=[c["dtype"] for c in cases],
                         device_kind=["simulated"] * nc, gpu_sku=[sku] * nc, status=status.tolist(),
                         error=[None if o else "simulated failure" for o in ok],
                         correct=ok.tolist(), n=np.where(ok, SAMPLES_PER_CASE, 0).tolist(),
                         n_kept=np.where(ok, SAMPLES_PER_CASE - 2, 0).tolist(),
                         median_ns=np.where(ok, median, np.nan).tolist(),
                         p10_ns=(median * (1 - rel)).tolist(), p90_ns=(median * (1 + rel)).tolist(),
                         iqr_ns=(median * rel).tolist(), mean_ns=median.tolist(), stdev_ns=(median * rel / 1.35).tolist(),
                         rel_noise=rel.tolist(), median_ci_low_ns=(median * (1 - rel / 4)).tolist(),
                         median_ci_high_ns=(median * (1 + rel / 4)).tolist(),
                         flops_per_call=flops.tolist(), bytes_per_call=bytes_.tolist(),
                         tflops=(flops / median / 1e3).tolist(), gbps=(bytes_ / median).tolist(),
                         pct_of_peak=(100 * bound / median).tolist(), stable=(rel < 0.1).tolist(),
                         energy_per_call_j=(median * 1e-9 * 500).tolist(), avg_power_w=[500.0] * nc)
            for k in ("median_ns", "p10_ns", "p90_ns"):
                stats[k] = [None if v != v else v for v in stats[k]]
            _write(lake, T.CASE_STATS, stats, {"dt": dt, "pool": pool})
            if di >= nights - sample_nights:
                n = SAMPLES_PER_CASE
                lat = (np.repeat(median, n) * (1 + rng.normal(0, 0.01, nc * n))).astype(np.int64)
                throttled = rng.random(nc * n) < 0.01
                samples = {"run_id": [run_id] * (nc * n), "case_id": np.repeat([c["case_id"] for c in cases], n).tolist(),
                           "attempt": [1] * (nc * n), "iteration": np.tile(np.arange(n), nc).tolist(),
                           "latency_ns": lat.tolist(), "sm_clock_mhz": [1980] * (nc * n), "temperature_c": [None] * (nc * n),
                           "power_w": [None] * (nc * n), "throttled": throttled.tolist(),
                           "outlier": (rng.random(nc * n) < 0.02).tolist(), "device_kind": ["simulated"] * (nc * n)}
                _write(lake, T.SAMPLES, samples, {"dt": dt, "pool": pool})
            for ci in range(nc):
                if ok[ci]:
                    series_points.setdefault((pool, ci), []).append((dt, run_id, float(median[ci])))
    # Unpartitioned tables.
    hw_rows = list(catalog.values())
    _write(lake, T.HARDWARE, {
        "sku": [h.sku for h in hw_rows], "name": [h.name for h in hw_rows], "device_kind": [h.device_kind for h in hw_rows],
        "peak_tflops": [[(k, str(v)) for k, v in h.peak_tflops.items()] for h in hw_rows],
        "memory_bandwidth_gbps": [h.memory_bandwidth_gbps for h in hw_rows], "l2_bytes": [h.l2_bytes for h in hw_rows],
        "sm_count": [h.sm_count for h in hw_rows], "memory_bytes": [h.memory_bytes for h in hw_rows],
        "board_power_w": [h.board_power_w for h in hw_rows], "source": [h.source for h in hw_rows]})
    _write(lake, T.CASES, {
        "case_id": [c["case_id"] for c in cases], "family": [c["family"] for c in cases],
        "kernel": [c["kernel"] for c in cases], "backend": [c["backend"] for c in cases],
        "dtype": [c["dtype"] for c in cases], "params": [list(c["params"].items()) for c in cases],
        "m": [int(c["params"]["m"]) if "m" in c["params"] else None for c in cases],
        "n": [int(c["params"]["n"]) if "n" in c["params"] else None for c in cases],
        "k": [int(c["params"]["k"]) if "k" in c["params"] else None for c in cases],
        "batch": [int(c["params"]["batch"]) if "batch" in c["params"] else None for c in cases],
        "flops_per_call": flops.tolist(), "bytes_per_call": bytes_.tolist()})
    srows = {c.name: [] for c in T.SERIES.columns}
    keys = {}
    for (pool, ci), pts in series_points.items():
        c, sku = cases[ci], POOLS[pool]
        key = _h(c["case_id"], sku, hw[pool], "simulated")
        keys[(pool, ci)] = key
        base = [m for _, _, m in pts[-8:-1]]
        for col, v in (("series_key", key), ("case_id", c["case_id"]), ("pool", pool), ("gpu_sku", sku),
                       ("hardware_fingerprint", hw[pool]), ("device_kind", "simulated"), ("family", c["family"]),
                       ("kernel", c["kernel"]), ("dtype", c["dtype"]), ("first_run_id", pts[0][1]),
                       ("first_dt", pts[0][0]),
                       ("first_started_at", datetime.datetime.fromisoformat(pts[0][0]).replace(
                           hour=2, tzinfo=datetime.timezone.utc)),
                       ("last_run_id", pts[-1][1]), ("last_dt", pts[-1][0]),
                       ("n_runs", len(pts)), ("last_median_ns", pts[-1][2]),
                       ("baseline_ns", float(np.median(base)) if base else None),
                       ("baseline_mad_ns", float(np.median(np.abs(np.array(base) - np.median(base)))) if base else None)):
            srows[col].append(v)
    for col, values in srows.items():  # columns the dashboard does not read (series v2's carried history)
        values.extend([None] * (len(keys) - len(values)))
    _write(lake, T.SERIES, srows)
    reg = {c.name: [] for c in T.REGRESSIONS.columns}
    statuses = ["confirmed", "acknowledged", "closed", "provisional", "cleared"]
    for i, ((pool, ci), (night, f)) in enumerate(sorted(steps.items())):
        c, dt = cases[ci], dates[night]
        before = float(level[pool][ci])
        status = statuses[i % len(statuses)] if night < nights - 1 else "provisional"
        first = datetime.datetime.fromisoformat(dt).replace(hour=6, tzinfo=datetime.timezone.utc)
        row = dict(regression_id=_h("reg", pool, ci)[:10], series_key=keys[(pool, ci)], metric="latency", unit="ns",
                   case_id=c["case_id"], pool=pool, gpu_sku=POOLS[pool], device_kind="simulated", family=c["family"],
                   kernel=c["kernel"], backend=c["backend"], dtype=c["dtype"],
                   change_run_id=f"nightly-{dt}-{pool}", change_dt=dt,
                   last_good_run_id=f"nightly-{dates[night - 1]}-{pool}", last_good_dt=dates[night - 1],
                   before_ns=before, after_ns=before * f, before_value=before, after_value=before * f,
                   change_pct=(f - 1) * 100, sigmas=abs(f - 1) / 0.01, p_value=1e-6, q_value=1e-4,
                   direction="regression" if f > 1 else "improvement", status=status, runs_after=nights - night,
                   confirmed_by_run_id=None, detected_by="significance",
                   cause="torch 2.12.0 -> 2.13.0" if night == upgrade else (
                       "driver 570.86 -> 575.51" if night == driver else None),
                   attribution=[("torch_version", "2.12.0 -> 2.13.0")] if night == upgrade else [],
                   first_seen_at=first, status_since=first,
                   acknowledged_by="alice" if status == "acknowledged" else None,
                   acknowledged_at=first if status == "acknowledged" else None,
                   note="looking" if status == "acknowledged" else None, owner=c["family"],
                   triage_due_dt=(datetime.date.fromisoformat(dt) + datetime.timedelta(days=2)).isoformat(),
                   closed_by="bob" if status == "closed" else None, closed_at=first if status == "closed" else None,
                   close_note="expected" if status == "closed" else None)
        for k, v in row.items():
            reg[k].append(v)
    _write(lake, T.REGRESSIONS, reg)
    proj = {c.name: [] for c in T.PROJECTIONS.columns}
    tgt = catalog[TARGET]
    for ci, c in enumerate(cases):
        peak = tgt.peak_tflops.get(c["dtype"], 50.0)
        bound = max(c["flops"] / (peak * 1e3), c["bytes"] / tgt.memory_bandwidth_gbps)
        projected = 2500.0 + bound / 0.55
        measured = projected * float(rng.normal(1, 0.15)) if ci % 3 == 0 else None
        row = dict(case_id=c["case_id"], target_sku=TARGET, source_sku="H100-SXM5-80GB", device_kind="simulated",
                   family=c["family"], kernel=c["kernel"], backend=c["backend"], dtype=c["dtype"],
                   shape=",".join(f"{k}={v}" for k, v in sorted(c["params"].items())), flops_per_call=c["flops"],
                   bytes_per_call=c["bytes"], regime="compute" if c["flops"] / (peak * 1e3) > c["bytes"] / tgt.memory_bandwidth_gbps else "memory",
                   bound_ns=bound, efficiency=0.55, launch_ns=2500.0, projected_ns=projected,
                   projected_tflops=c["flops"] / projected / 1e3, projected_gbps=c["bytes"] / projected,
                   model="roofline-efficiency-v1", calibration_level="family-dtype curve",
                   calibration_source="H100-SXM5-80GB simulated (benchmark)", source_median_ns=None, note=None,
                   projected_at=datetime.datetime(2035, 6, 1, tzinfo=datetime.timezone.utc), measured_ns=measured,
                   measured_run_id=None, measured_dt=None,
                   error_pct=(projected - measured) / measured * 100 if measured else None, scored_at=None)
        for k, v in row.items():
            proj[k].append(v)
    _write(lake, T.PROJECTIONS, proj)
    some = sorted(keys.items())[0][1]
    stepped = keys[sorted(steps)[0]]
    last = dates[-1]
    return {"lake": str(root), "nights": nights, "series": len(keys), "pools": len(POOLS), "cases": nc,
            "series_key": stepped, "plain_series_key": some, "last_dt": last,
            "run_a": f"nightly-{dates[-2]}-sim-h100-a", "run_b": f"nightly-{last}-sim-h100-a",
            "kernel": cases[0]["kernel"]}
