"""One small simulated night for the report and projection tests, built once per test
session and shared by tests/test_report.py and tests/test_projections.py.

Night 2035-03-02, run ids `rpt-*`: the `roofline` suite on the simulated H100 and H200
pools, plus a second H100 run of its GEMMs under another (staged) torch version, so that
GPU and software comparisons both have two sides. One H200 case is made to fail and one
H100 case is made noisy (bimodal), so that coverage and unstable cases have content.
Simulated runs carry no torch version of their own; the two torch strings are staged
labels, not a real upgrade.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DT = "2035-03-02"
SUITE = "roofline"
H100, H200 = "H100-SXM5-80GB", "H200-SXM-141GB"
POOLS = {"sim-h100": H100, "sim-h200": H200}
TORCH_A, TORCH_B = "2.13.0+rpt-a", "2.14.0+rpt-b"
# run id -> (pool, torch version, kernel filter)
RUNS = {
    f"rpt-{DT}-sim-h100": ("sim-h100", TORCH_A, None),
    f"rpt-{DT}-sim-h100-torch-b": ("sim-h100", TORCH_B, "matmul"),
    f"rpt-{DT}-sim-h200": ("sim-h200", TORCH_A, None),
}
FAILED_ERROR = "CUDA error: an illegal memory access was encountered (staged by tests/report_data.py)"
_built: dict[str, dict] = {}


def victim_case_id(suite) -> str:
    """The case that fails on the H200 and is noisy on the H100: the first GEMM by id."""
    return sorted(pc.case.case_id for pc in suite.cases if pc.case.kernel == "matmul")[0]


def _stage(staging: Path, run_id: str, pool: str, torch: str, victim: str) -> None:
    results = pq.read_table(staging / "case_results.parquet")
    samples = pq.read_table(staging / "samples.parquet")
    run = pq.read_table(staging / "run.parquet")
    if run_id == f"rpt-{DT}-sim-h200":
        rows = results.to_pylist()
        for r in rows:
            if r["case_id"] == victim:
                r.update(status="failed", error=FAILED_ERROR, correct=None, n_samples=0, stop_reason=None)
        results = pa.Table.from_pylist(rows, schema=results.schema)
        samples = samples.filter(pc.not_equal(samples.column("case_id"), victim))
        run = run.set_column(run.schema.get_field_index("status"), "status", pa.array(["partial"]))
        ok = run.schema.get_field_index("cases_ok")
        run = run.set_column(ok, "cases_ok", pa.array([run.column("cases_ok")[0].as_py() - 1], pa.int32()))
    elif run_id == f"rpt-{DT}-sim-h100":
        rows = samples.to_pylist()
        for r in rows:
            if r["case_id"] == victim and r["iteration"] % 2:
                r["latency_ns"] = int(r["latency_ns"] * 1.4)
        samples = pa.Table.from_pylist(rows, schema=samples.schema)
    for name, value in (("torch_version", torch), ("software_fingerprint", f"rpt-software-{torch}")):
        run = run.set_column(run.schema.get_field_index(name), name, pa.array([value]))
    pq.write_table(results, staging / "case_results.parquet")
    pq.write_table(samples, staging / "samples.parquet")
    pq.write_table(run, staging / "run.parquet")


def sim_night(spark, lake, tmp_root: Path) -> dict:
    """Land and mine the night once per session; returns what the tests need to know."""
    if "night" in _built:
        return _built["night"]
    from kernels_bench.runner import ShardSpec, run_shard
    from kernels_bench.suite import load_suite
    from pipelines.landing.files import land_shard
    from jobs.mine import mine

    suite = load_suite(SUITE)
    victim = victim_case_id(suite)
    for run_id, (pool, torch, kernel) in RUNS.items():
        staging = tmp_root / run_id
        spec = ShardSpec(run_id=run_id, shard=0, num_shards=1, pool=pool, device=f"sim:{POOLS[pool]}", dt=DT,
                         reason="nightly" if kernel is None else "manual", seed=0)
        run_shard(suite.filter(kernel, None), spec, staging, progress=lambda *_: None)
        _stage(staging, run_id, pool, torch, victim)
        land_shard(staging, lake, dt=DT, pool=pool, run_id=run_id, shard=0)
    mine(spark, lake, DT, list(POOLS))
    _built["night"] = {"dt": DT, "victim": victim, "cases": len(suite.cases), "run_ids": sorted(RUNS)}
    return _built["night"]
