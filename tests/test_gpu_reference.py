"""The REAL GPU reference nights (kernels_bench/reference/h200-2026-11-26 and -27, measured
on an NVIDIA H200, issue #26): they land whole through `perflake ingest` into the
registered `h200` pool, the change detector finds a step put into their real noise, and
the simulator's attention model, per backend, projects measured attention it was not
fitted on."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines.changepoint.detector import detect
from pipelines.config.lake import Lake
from pipelines.config.pools import load_pools
from pipelines.landing.ingest import ingest

NIGHT = Path(__file__).resolve().parents[1] / "kernels_bench" / "reference" / "h200-2026-11-26"
SHARDS = sorted(p for p in (NIGHT / "shards").iterdir() if p.is_dir())
BLOCK = 20  # samples per point of a series cut from one case's samples, taken in order


def test_the_real_h200_night_lands_whole_in_the_h200_pool(tmp_path):
    lake = Lake(tmp_path / "lake")
    report = ingest([NIGHT / "shards"], lake, pool="h200", registry=load_pools())
    assert report.ok, report.issues
    assert report.counts["landed"] == 3 * len(SHARDS) == 18
    assert {s["dt"] for s in report.landed} == {"2026-11-26"}
    assert sum(s["samples"] for s in report.landed) == 262_323
    assert sum(s["case_results"] for s in report.landed) == 187
    runs = pq.read_table(next((lake.landing / "runs").rglob("*.parquet"))).to_pylist()[0]
    assert (runs["device_kind"], runs["gpu_sku"], runs["device"]) == ("gpu", "H200-SXM-141GB", "cuda")
    assert 5_000 < runs["launch_overhead_ns"] < 30_000  # a real launch cost, kept out of the samples


def _real_series() -> list[np.ndarray]:
    """Per case with at least 40 blocks: the medians of consecutive BLOCK-sample blocks,
    in the order the samples were taken (real H200 noise, drift and clock changes)."""
    out = []
    for shard in SHARDS:
        samples = pq.read_table(shard / "samples.parquet", columns=["case_id", "iteration", "latency_ns"]).to_pandas()
        for _, g in samples.groupby("case_id", sort=True):
            lat = g.sort_values("iteration").latency_ns.to_numpy(float)
            blocks = len(lat) // BLOCK
            if blocks >= 40:
                out.append(np.median(lat[:blocks * BLOCK].reshape(blocks, BLOCK), axis=1))
    return out


def test_a_5_percent_step_in_real_h200_noise_is_found_at_its_point():
    series = _real_series()
    assert len(series) >= 100
    found = 0
    for x in series:
        k = len(x) // 2
        y = x.copy()
        y[k:] *= 1.05
        found += any(not c.provisional and k <= c.index <= k + 3 for c in detect(y))
    # 126 of 128 when written; a step of 5 % is several sigma in every one of these series
    assert found >= 0.95 * len(series), f"{found} of {len(series)}"


@pytest.mark.parametrize("name", [p.name for p in SHARDS])
def test_every_shard_says_it_was_measured_on_a_real_gpu(name):
    run = pq.read_table(NIGHT / "shards" / name / "run.parquet").to_pylist()[0]
    assert run["device_kind"] == "gpu" and run["gpu_name"] == "NVIDIA H200"
    assert run["driver_version"] == "580.159.04" and run["torch_version"].startswith("2.11.0")


SECOND = NIGHT.parent / "h200-2026-11-27"  # the second lease: attention shard 0 of 8, collectives


def test_the_second_h200_lease_lands_its_attention_and_collectives_with_their_skips_and_failures(tmp_path):
    lake = Lake(tmp_path / "lake")
    report = ingest([SECOND / "shards"], lake, pool="h200", registry=load_pools())
    assert report.ok, report.issues
    assert report.counts["landed"] == 6
    import pandas as pd

    results = pd.concat(pq.read_table(f).to_pandas() for f in (lake.landing / "case_results").rglob("*.parquet"))
    by_status = results.groupby(["kernel", "status"]).size().to_dict()
    # shard 0 of 8: 20 ok, 3 "Invalid backend" (before the harness called them skips), 1 timeout;
    # on one GPU every NCCL collective is a skip with its reason, the gloo ones ran
    assert by_status[("sdpa", "ok")] == 20 and by_status[("sdpa", "failed")] == 3
    assert by_status[("sdpa", "timeout")] == 1
    skipped = results[results.status == "skipped"]
    assert len(skipped) == 48 and skipped.error.str.contains("needs [248] GPUs; 1 visible").all()


def _gpu_night():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_night", NIGHT.parents[2] / "benchmarks" / "gpu_night.py")
    gpu_night = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_night)
    return gpu_night


def _land(night: Path, pool: str, tmp_path: Path, files: int, samples: int) -> Lake:
    """Ingest a reference night's shards into a fresh lake, check that every file landed
    with every sample, and return the lake."""
    lake = Lake(tmp_path / "lake")
    report = ingest([night / "shards"], lake, pool=pool, registry=load_pools())
    assert report.ok, report.issues
    assert report.counts["landed"] == files and sum(s["samples"] for s in report.landed) == samples
    return lake


def _rows(lake: Lake, table: str = "case_results"):
    """The landed rows of one landing table, as one frame."""
    import pandas as pd

    return pd.concat(pq.read_table(f).to_pandas() for f in (lake.landing / table).rglob("*.parquet"))


FUSED = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient")


def test_the_attention_model_fitted_on_the_first_leases_projects_the_third():
    """Out of sample: the calibration fitted on the 23 attention cases of the first two
    leases, applied to the 90 cases of the third (other shapes, another day)."""
    gpu_night = _gpu_night()
    from kernels_bench.sim import calibrated_ns

    first, third = gpu_night._grouped([NIGHT, SECOND]), gpu_night._grouped([THIRD])
    errors = []
    for backend in (*FUSED, "sdpa-math"):
        _, measured, terms, _ = zip(*first[f"attention/{backend}"])
        entry = gpu_night.fit_calibration(measured, terms)
        errors += [abs(calibrated_ns(terms, entry) / y - 1) for _, y, terms, _ in third[f"attention/{backend}"]]
    # 10.7 % when written; the calibration of before (one scale, half the square for
    # causal, q/k/v traffic for math, every SM busy), fitted on the same cases: 19.0 %
    assert len(errors) == 90 and np.median(errors) < 0.15


def test_the_attention_model_holds_out_by_shard_within_10_percent():
    errors = _gpu_night().holdout_errors([NIGHT, SECOND, THIRD], tuple(f"attention/{b}" for b in (*FUSED, "sdpa-math")))
    pooled = np.abs(np.concatenate([errors[f"attention/{b}"] for b in (*FUSED, "sdpa-math")]))
    assert len(pooled) == 113 and np.median(pooled) < 0.10  # 6.5 % when written (math 5.7 %)
    assert np.median(np.abs(errors["attention/sdpa-cudnn"])) < 0.10
    assert np.median(np.abs(errors["attention/sdpa-math"])) < 0.10  # the unfused backend, on its score traffic


def test_the_calibrated_simulator_meets_the_real_h200_attention():
    errors: dict[str, list[float]] = {}
    for family, _, measured, _, calibrated, _ in _gpu_night().sim_cases([SECOND, THIRD]):
        errors.setdefault(family, []).append(abs(calibrated / measured - 1))
    # one scale for all of attention was off by a median 83 %; per backend the fused ones are close
    assert len(errors["attention"]) == 110 and np.median(errors["attention"]) < 0.10
    for backend in FUSED:
        assert np.median(errors[f"attention/{backend}"]) < 0.10, backend


THIRD = NIGHT.parent / "h200-2026-11-27-attention"  # the third lease: attention shards 1-5 of 8


def test_the_third_h200_lease_lands_whole_with_its_partial_shard(tmp_path):
    results = _rows(_land(THIRD, "h200", tmp_path, files=15, samples=63_096))
    assert results.status.value_counts().to_dict() == {"ok": 90, "skipped": 14, "stopped": 11, "timeout": 5}
    # shard 5 was stopped at the lease's budget: its 11 unmeasured cases are kept as `stopped`
    stopped = results[results.status == "stopped"]
    assert len(stopped) == 11 and stopped.shard.nunique() == 1
    # every timeout is the one shape with a 2 x 17 GB KV cache (set-up drawn on the host)
    timeouts = results[results.status == "timeout"].params.map(dict)
    assert all((p["batch"], p["kv_heads"], p["kv_len"], p["q_len"]) == ("32", "32", "32768", "1") for p in timeouts)


EVENING = NIGHT.parent / "h200-2026-11-27-evening"  # the fourth lease: attention shards 2, 5, 6 and 7 of 8


def _medians(night: Path) -> dict[str, float]:
    return {cid: m for _, _, results, samples in _gpu_night().shards(night)
            for cid, m in samples.groupby("case_id").latency_ns.median().items()
            if cid in set(results.case_id[results.status == "ok"])}


def test_the_fourth_lease_measures_the_17_gb_decode_and_repeats_the_third(tmp_path):
    results = _rows(_land(EVENING, "h200", tmp_path, files=12, samples=64_572))
    assert results.status.value_counts().to_dict() == {"ok": 82, "skipped": 14}  # no timeout left
    # the shape whose K and V (17 GB each) were drawn on the host and timed out in the
    # third lease, on every backend: its inputs are now drawn on the device
    big = results[results.params.map(lambda p: (dict(p)["batch"], dict(p)["kv_heads"], dict(p)["kv_len"])
                                     == ("32", "32", "32768"))]
    assert len(big) == 6 and (big.status == "ok").all() and set(big.backend) == {
        "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"}
    # shards 2 and 5 measured again, another run two and a half hours later: the same medians
    afternoon, evening = _medians(THIRD), _medians(EVENING)
    ratios = np.array([evening[c] / afternoon[c] for c in set(afternoon) & set(evening)])
    assert len(ratios) == 26 and abs(np.median(ratios) - 1) < 0.02 and np.abs(ratios - 1).max() < 0.05


H100 = NIGHT.parent / "h100-2026-11-27"  # an H100 lease: the validation, attention shards 0-2 of 8


def test_the_h100_lease_lands_in_its_own_pool_with_its_validation(tmp_path):
    import json

    lake = _land(H100, "h100", tmp_path, files=9, samples=22_588)
    results, runs = _rows(lake), _rows(lake, "runs")
    assert results.status.value_counts().to_dict() == {"ok": 61, "skipped": 11}
    assert set(runs.gpu_name) == {"NVIDIA H100 80GB HBM3"} and set(runs.gpu_sku) == {"H100-SXM5-80GB"}
    validation = json.loads((H100 / "validation.json").read_text())
    assert validation["complete"] and len(validation["cases"]) == 18


def test_on_the_same_cases_the_h100_is_slower_only_where_the_kernel_is_bound_by_hbm():
    """H100 and H200 share the GH100 chip (132 SMs, 1980 MHz, the same peak); the H200's
    HBM is 1.43x faster. Measured on the 60 cases both ran: cuDNN's batch-32 decode, at
    over 90 % of HBM on both (KV caches of 8192 tokens and more), is 1.40-1.51x slower on the H100; the prefills of flash and
    the memory-efficient kernel, bound in the SMs, run at the same speed."""
    from kernels_bench.case import Case

    gpu_night, h100, h200 = _gpu_night(), _medians(H100), _medians(NIGHT.parent / "h200-2026-11-27")
    for night in (THIRD, EVENING):
        h200.update(_medians(night))
    cases = {r.case_id: r for _, _, results, _ in gpu_night.shards(H100) for r in results.itertuples()}
    decode, prefill = [], []
    for cid in set(h100) & set(h200):
        r = cases[cid]
        p = {k: gpu_night._value(v) for k, v in r.params}
        assert Case.make(r.family, r.kernel, r.backend, r.dtype, **p).case_id == cid
        if r.backend == "sdpa-cudnn" and p["q_len"] == 1 and p["batch"] == 32 and p["kv_len"] >= 8192:
            decode.append(h100[cid] / h200[cid])
        if r.backend in ("sdpa-flash", "sdpa-efficient") and p["q_len"] > 1:
            prefill.append(h100[cid] / h200[cid])
    assert len(decode) == 6 and all(1.35 < x < 1.55 for x in decode)  # 1.40-1.51 when written
    assert len(prefill) >= 8 and all(0.93 < x < 1.07 for x in prefill)


def test_the_attention_model_projects_the_h100_held_out_by_shard_within_10_percent():
    """The second GPU model: each H100 shard held out, the calibration fitted on every other
    shard of both GPUs (an SM-side byte rate is fitted only with two GPU models: on one,
    it and the HBM term are the same bytes over two constants)."""
    backends = tuple(f"attention/{b}" for b in (*FUSED, "sdpa-math"))
    errors = _gpu_night().holdout_errors([NIGHT, SECOND, THIRD, EVENING, H100], backends, held_out="h100")
    pooled = np.abs(np.concatenate([errors[b] for b in backends]))
    # 5.8 % when written; the calibration of before (fitted on the H200, a random
    # efficiency per SKU, no SM bound) was 30.9 % off on these cases
    assert len(pooled) == 61 and np.median(pooled) < 0.10
    assert np.median(np.abs(errors["attention/sdpa-flash"])) < 0.10  # 7.2 %: bound in the SMs in decode


def test_the_calibrated_simulator_meets_the_real_h100_attention():
    errors: dict[str, list[float]] = {}
    for family, _, measured, _, calibrated, sku in _gpu_night().sim_cases([H100]):
        assert sku == "H100-SXM5-80GB"
        errors.setdefault(family, []).append(abs(calibrated / measured - 1))
    assert len(errors["attention"]) == 61 and np.median(errors["attention"]) < 0.08  # 4.2 % when written
