"""The simulated device: samples centred on its roofline model, with a heavy tail and
throttling episodes, labelled simulated, deterministic per run id, and slowed by an
injected regression exactly where and when the injection says."""
from __future__ import annotations

import statistics

import pyarrow.parquet as pq
import pytest

from kernels_bench import provenance
from kernels_bench.case import Case
from kernels_bench.runner import ShardSpec, run_shard
from kernels_bench.sim import THROTTLE_CLOCK_FRACTION, Injection, NoiseModel, SimDevice, mean_latency_ns
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import PlannedCase, Suite

SKU = "H100-SXM5-80GB"
MANY = StoppingRule(min_samples=4000, min_time_s=0.0, max_samples=4000)
BIG_GEMM = Case.make("gemm", "matmul", "torch", "bf16", m=4096, n=4096, k=4096)
SMALL_GEMM = Case.make("gemm", "matmul", "torch", "bf16", m=2048, n=2048, k=2048)
COPY = Case.make("memory", "copy", "torch", "fp32", numel=1 << 24)


def latencies(outcome) -> list[int]:
    return [s["latency_ns"] for s in outcome.samples]


@pytest.mark.parametrize("case", [BIG_GEMM, SMALL_GEMM, COPY], ids=["gemm-4096", "gemm-2048", "copy"])
def test_median_sample_is_near_the_model_mean_latency(case):
    sim = SimDevice(SKU)
    out = sim.measure(case, MANY, run_id="r1", dt="2026-01-01")
    # Jitter, run drift and a possible second mode (+3 %) stay within 5 %.
    assert statistics.median(latencies(out)) == pytest.approx(mean_latency_ns(sim.hw, case), rel=0.05)


def test_samples_have_a_heavy_right_tail():
    lat = latencies(SimDevice(SKU).measure(BIG_GEMM, MANY, run_id="r1", dt="2026-01-01"))
    med = statistics.median(lat)
    spikes = sum(x > 1.1 * med for x in lat)
    dips = sum(x < 0.9 * med for x in lat)
    assert spikes >= 10 and dips == 0  # jitter alone (0.6 %) never reaches 10 %
    assert max(lat) > 1.2 * med


def test_a_throttling_episode_lowers_the_clock_slows_samples_and_flags_them():
    sim = SimDevice(SKU, noise=NoiseModel(throttle_prob=1.0))
    out = sim.measure(BIG_GEMM, StoppingRule(min_samples=400, min_time_s=0.0, max_samples=400), "r1", "2026-01-01")
    hot = [s for s in out.samples if s["throttled"]]
    cool = [s for s in out.samples if not s["throttled"]]
    assert 2 <= len(hot) <= len(out.samples) // 2
    default = sim.hw.sm_clock_default_mhz
    assert all(s["sm_clock_mhz"] < 0.75 * default for s in hot)
    slow = statistics.median(s["latency_ns"] for s in hot) / statistics.median(s["latency_ns"] for s in cool)
    assert slow == pytest.approx(1 / THROTTLE_CLOCK_FRACTION, rel=0.05)


def test_by_default_most_case_runs_have_no_throttling():
    sim = SimDevice(SKU)
    rule = StoppingRule(min_samples=50, min_time_s=0.0, max_samples=50)
    runs = [sim.measure(BIG_GEMM, rule, f"r{i}", "2026-01-01") for i in range(200)]
    throttled_runs = sum(any(s["throttled"] for s in o.samples) for o in runs)
    assert 0 < throttled_runs < 20  # throttle_prob 3 %


def test_same_run_id_gives_the_same_samples_and_another_run_id_does_not():
    sim = SimDevice(SKU)
    rule = StoppingRule(min_samples=100, min_time_s=0.0, max_samples=100)
    a = sim.measure(BIG_GEMM, rule, "r1", "2026-01-01")
    assert SimDevice(SKU).measure(BIG_GEMM, rule, "r1", "2026-01-01").samples == a.samples
    assert sim.measure(BIG_GEMM, rule, "r2", "2026-01-01").samples != a.samples


def test_an_injection_slows_matching_cases_by_its_factor_from_its_date_on():
    inj = Injection(match={"kernel": "matmul", "m": 4096}, since="2026-03-01", factor=1.25)
    sim = SimDevice(SKU, injections=(inj,))
    rule = StoppingRule(min_samples=200, min_time_s=0.0, max_samples=200)
    before = latencies(sim.measure(BIG_GEMM, rule, "r1", "2026-02-28"))
    on = latencies(sim.measure(BIG_GEMM, rule, "r1", "2026-03-01"))
    later = latencies(sim.measure(BIG_GEMM, rule, "r1", "2026-06-30"))
    assert before == latencies(SimDevice(SKU).measure(BIG_GEMM, rule, "r1", "2026-02-28"))
    # The same run id draws the same noise, so the slowdown is the factor (up to whole ns).
    assert statistics.median(on) / statistics.median(before) == pytest.approx(1.25, rel=1e-4)
    assert later == on


def test_an_injection_leaves_other_cases_unchanged():
    inj = Injection(match={"kernel": "matmul", "m": 4096}, since="2026-03-01", factor=1.25)
    rule = StoppingRule(min_samples=200, min_time_s=0.0, max_samples=200)
    plain, injected = SimDevice(SKU), SimDevice(SKU, injections=(inj,))
    for case in (SMALL_GEMM, COPY):
        assert injected.measure(case, rule, "r1", "2026-04-01").samples == plain.measure(case, rule, "r1", "2026-04-01").samples


def test_simulated_runs_are_labelled_simulated_in_provenance_and_samples(tmp_path):
    info = provenance.collect(f"sim:{SKU}")
    assert info["device_kind"] == "simulated" and "(simulated)" in info["gpu_name"]
    suite = Suite("sim-tiny", (PlannedCase(BIG_GEMM), PlannedCase(COPY)),
                  StoppingRule(min_samples=10, min_time_s=0.0, max_samples=10))
    spec = ShardSpec(run_id="r-sim", shard=0, num_shards=1, pool="sim", device=f"sim:{SKU}", dt="2026-01-01")
    paths = run_shard(suite, spec, tmp_path, progress=lambda m: None)
    samples = pq.read_table(paths["samples"]).to_pylist()
    (run,) = pq.read_table(paths["runs"]).to_pylist()
    assert len(samples) == 20 and {s["device_kind"] for s in samples} == {"simulated"}
    assert run["device_kind"] == "simulated" and run["gpu_sku"] == SKU


def _sdpa(backend: str, **shape) -> Case:
    p = dict(batch=1, heads=32, kv_heads=32, head_dim=128, causal=False) | shape
    return Case.make("attention", "sdpa", backend, "bf16", **p)


def test_attention_work_follows_what_each_backend_computes_and_moves():
    from kernels_bench.hardware import hardware
    from kernels_bench.kernels import kernel_for
    from kernels_bench.sim import work

    hw = hardware("H200-SXM-141GB")  # 132 SMs
    k = kernel_for("sdpa")
    square = 4 * 1 * 32 * 512 * 512 * 128  # the non-causal flops of q = kv = 512
    # fused causal: 4 tiles of 128 a side, 10 of 16 computed whole, not half the square
    causal = _sdpa("sdpa-flash", q_len=512, kv_len=512, causal=True)
    assert k.flops(causal) == square / 2
    assert work(hw, causal) == (pytest.approx(square * 10 / 16), k.bytes(causal))
    # math: every score computed, and the bf16 score matrix moved four times
    math_causal = _sdpa("sdpa-math", q_len=512, kv_len=512, causal=True)
    assert work(hw, math_causal) == (square, k.bytes(math_causal) + 4 * 32 * 512 * 512 * 2)
    # ... and with 8 kv heads for 32 query heads, K and V read once per query head
    gqa = _sdpa("sdpa-math", q_len=1, kv_len=8192, kv_heads=8)
    per_head = 2 * 8192 * 128 * 2  # K and V of one head, bf16
    assert work(hw, gqa)[1] == k.bytes(gqa) + 4 * 32 * 8192 * 2 + 24 * per_head
    # memory-efficient decode of 32 heads: 32 query blocks on 132 SMs
    decode = _sdpa("sdpa-efficient", q_len=1, kv_len=8192)
    flops, nbytes = work(hw, decode)
    assert nbytes == pytest.approx(k.bytes(decode) * 132 / 32) and flops == pytest.approx(k.flops(decode) * 132 / 32)
    # the same decode on flash (split-KV) and any non-attention case: the kernel's own counts
    flash = _sdpa("sdpa-flash", q_len=1, kv_len=8192)
    assert work(hw, flash) == (k.flops(flash), k.bytes(flash))
    assert work(hw, BIG_GEMM) == (kernel_for("matmul").flops(BIG_GEMM), kernel_for("matmul").bytes(BIG_GEMM))


def test_a_calibration_entry_scales_compute_and_memory_apart_or_alike():
    from kernels_bench.hardware import hardware
    from kernels_bench.sim import roofline_terms_ns, work

    hw = hardware(SKU)
    compute, memory, sm = roofline_terms_ns(hw, BIG_GEMM)
    assert compute > memory  # a big GEMM is compute bound
    assert mean_latency_ns(hw, BIG_GEMM, {"gemm": (2.0, 100.0)}) == pytest.approx(2 * compute + 100)
    assert mean_latency_ns(hw, BIG_GEMM, {"gemm": (1.0, 1e6, 0.0)}) == pytest.approx(1e6 * memory)
    # a fourth value bounds the call's bytes at that rate per SM per clock
    assert sm == pytest.approx(work(hw, BIG_GEMM)[1] / (hw.sm_count * hw.sm_clock_default_mhz / 1e3))
    assert mean_latency_ns(hw, BIG_GEMM, {"gemm": (1.0, 1.0, 0.0, 1e-3)}) == pytest.approx(1e3 * sm)
    assert mean_latency_ns(hw, BIG_GEMM, {"gemm": (1.0, 1.0, 0.0, 1e6)}) == pytest.approx(compute)


def test_two_skus_of_one_chip_differ_in_memory_only():
    """A real H100 ran compute-bound attention as fast as an H200 (one chip, GH100): the
    simulator gives them the same efficiency and SM term; only the HBM term differs, by
    the bandwidths' ratio."""
    from kernels_bench.hardware import hardware
    from kernels_bench.sim import roofline_terms_ns

    h100, h200 = hardware("H100-SXM5-80GB"), hardware("H200-SXM-141GB")
    assert h100.chip == h200.chip == "GH100"
    for case in (BIG_GEMM, _sdpa("sdpa-flash", batch=32, q_len=1, kv_len=8192)):
        (c1, m1, s1), (c2, m2, s2) = roofline_terms_ns(h100, case), roofline_terms_ns(h200, case)
        assert c1 == pytest.approx(c2) and s1 == pytest.approx(s2)
        assert m1 / m2 == pytest.approx(4800 / 3350)
