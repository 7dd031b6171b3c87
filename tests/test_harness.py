"""The harness on a CPU: what a shard writes, what each kernel declares, when sampling
stops, and how telemetry marks samples. Real kernels, real child processes, tiny shapes."""
from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from kernels_bench.case import Case
from kernels_bench.kernels import kernel_for
from kernels_bench.measure import measure_case
from kernels_bench.runner import ShardSpec, run_shard
from kernels_bench.stopping import StoppingRule, StoppingState
from kernels_bench.suite import PlannedCase, Suite
from kernels_bench.telemetry import Observer, Reading
from schemas.tables import CASE_RESULTS, RUNS, SAMPLES

FAST = StoppingRule(min_samples=5, min_time_s=0.01, timeout_s=0.5, max_samples=20)
# Correctness is checked before sampling: a handful of samples proves the case runs.
CHECK = StoppingRule(min_samples=3, min_time_s=0.0, timeout_s=0.5, max_samples=3)

NOOP = Case.make("selftest", "noop", "python", "fp32")
TINY_MATMUL = Case.make("gemm", "matmul", "torch", "fp32", m=8, n=8, k=8)
SKIPPED = Case.make("gemm", "matmul", "torch", "fp8", m=16, n=16, k=16)
ALL_REDUCE = Case.make("collective", "all_reduce", "gloo", "fp32", numel=64, world_size=2)


# --- what a shard writes -------------------------------------------------------------

@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    suite = Suite("tiny", (PlannedCase(NOOP), PlannedCase(TINY_MATMUL), PlannedCase(ALL_REDUCE),
                           PlannedCase(SKIPPED, skip_reason="no fp8 here")), FAST)
    spec = ShardSpec(run_id="r-harness", shard=0, num_shards=1, pool="cpu-test", device="cpu", dt="2026-01-02")
    paths = run_shard(suite, spec, tmp_path_factory.mktemp("shard"), progress=lambda m: None)
    return {name: pq.read_table(p) for name, p in paths.items()}, paths


@pytest.mark.parametrize("name,table", [("samples", SAMPLES), ("case_results", CASE_RESULTS), ("runs", RUNS)])
def test_shard_writes_each_landing_file_in_its_table_schema_without_partition_columns(shard, name, table):
    _, paths = shard
    written = pq.read_schema(paths[name])
    expected = table.arrow_schema(with_partitions=False)
    assert written.equals(expected, check_metadata=False)
    assert "dt" not in written.names and "pool" not in written.names
    assert written.metadata[b"perflake.table"] == table.name.encode()


def test_run_row_carries_provenance_and_fingerprints(shard):
    tables, _ = shard
    (run,) = tables["runs"].to_pylist()
    for key in ("host", "torch_version", "python_version", "hardware_fingerprint", "software_fingerprint"):
        assert run[key], key
    assert run["device_kind"] == "cpu"
    # The CPU measuring processes run with one torch thread unless asked otherwise, and say so.
    assert dict(run["env"])["OMP_NUM_THREADS"] == "1"
    assert run["run_id"] == "r-harness" and run["suite"] == "tiny"
    assert run["cases_planned"] == 4 and run["cases_ok"] == 3 and run["status"] == "ok"
    # The budget the cases were measured with, and no injected slowdown on a real device.
    assert StoppingRule.from_dict(json.loads(run["stopping"])) == FAST and run["injected"] is None


def test_a_simulated_run_records_its_capped_budget_and_the_slowdowns_injected(tmp_path):
    from kernels_bench.sim import Injection

    slow = Injection(match={"kernel": "matmul"}, since="2026-01-01", factor=1.5, reasons=("nightly",))
    suite = Suite("tiny", (PlannedCase(TINY_MATMUL),), StoppingRule(min_samples=500, max_samples=5000))
    spec = ShardSpec(run_id="r-sim", shard=0, num_shards=1, pool="sim-test", device="sim:H100-SXM5-80GB",
                     dt="2026-01-02", reason="nightly")
    paths = run_shard(suite, spec, tmp_path, injections=(slow,), progress=lambda m: None)
    (run,) = pq.read_table(paths["runs"]).to_pylist()
    assert json.loads(run["stopping"])["max_samples"] == 200 == json.loads(run["stopping"])["min_samples"]
    (injected,) = json.loads(run["injected"])
    assert injected["factor"] == 1.5 and injected["match"] == {"kernel": "matmul"} and injected["reasons"] == ["nightly"]
    assert pq.read_table(paths["samples"]).num_rows == 200


def test_every_case_has_a_result_row_and_its_samples_match_its_count(shard):
    tables, _ = shard
    results = {r["case_id"]: r for r in tables["case_results"].to_pylist()}
    assert set(results) == {c.case_id for c in (NOOP, TINY_MATMUL, SKIPPED, ALL_REDUCE)}
    samples = tables["samples"].to_pylist()
    for case_id, r in results.items():
        assert sum(s["case_id"] == case_id for s in samples) == r["n_samples"]
    assert all(s["device_kind"] == "cpu" for s in samples)


def test_measured_cases_record_correctness_and_why_sampling_stopped(shard):
    tables, _ = shard
    results = {r["case_id"]: r for r in tables["case_results"].to_pylist()}
    for case in (NOOP, TINY_MATMUL, ALL_REDUCE):
        r = results[case.case_id]
        assert r["status"] == "ok" and r["correct"] is True, r
        assert r["stop_reason"] in ("noise", "timeout", "max_samples")
        assert r["n_samples"] >= FAST.min_samples


def test_a_suite_skip_is_recorded_with_its_reason_and_no_samples(shard):
    tables, _ = shard
    (r,) = [r for r in tables["case_results"].to_pylist() if r["case_id"] == SKIPPED.case_id]
    assert r["status"] == "skipped" and r["error"] == "no fp8 here" and r["n_samples"] == 0


# --- what kernels declare ------------------------------------------------------------

def test_gemm_flops_are_2mnk_and_batched_gemm_multiplies_by_batch():
    mm = kernel_for("matmul")
    assert mm.flops(Case.make("gemm", "matmul", "torch", "bf16", m=64, n=32, k=16)) == 2 * 64 * 32 * 16
    assert mm.flops(Case.make("gemm", "matmul", "torch", "bf16", batch=3, m=64, n=32, k=16)) == 3 * 2 * 64 * 32 * 16


def test_gemm_bytes_are_both_inputs_read_and_the_output_written():
    mm = kernel_for("matmul")
    m, n, k = 64, 32, 16
    assert mm.bytes(Case.make("gemm", "matmul", "torch", "fp32", m=m, n=n, k=k)) == 4 * (m * k + k * n + m * n)
    assert mm.bytes(Case.make("gemm", "matmul", "torch", "bf16", batch=2, m=m, n=n, k=k)) == 2 * 2 * (m * k + k * n + m * n)
    # fp8 inputs, bf16 output
    assert mm.bytes(Case.make("gemm", "matmul", "torch", "fp8", m=m, n=n, k=k)) == (m * k + k * n) + 2 * m * n


def test_case_id_is_stable_and_independent_of_parameter_order():
    a = Case.make("gemm", "matmul", "torch", "bf16", m=4096, n=4096, k=4096)
    b = Case.make("gemm", "matmul", "torch", "bf16", k=4096, n=4096, m=4096)
    assert a.case_id == b.case_id
    # History joins on this id: a change to the hashing silently splits every series.
    assert a.case_id == "629573ff587ac26f"


def test_case_id_differs_when_any_parameter_differs():
    base = dict(m=64, n=64, k=64)
    ids = {Case.make("gemm", "matmul", "torch", "bf16", **base).case_id,
           Case.make("gemm", "matmul", "torch", "bf16", **{**base, "k": 65}).case_id,
           Case.make("gemm", "matmul", "torch", "fp16", **base).case_id,
           Case.make("gemm", "matmul", "torch", "bf16", batch=2, **base).case_id}
    assert len(ids) == 4


def test_attention_flops_are_4_b_h_sq_skv_d_and_causal_prefill_counts_half():
    sdpa = kernel_for("sdpa")
    shape = dict(batch=2, heads=8, q_len=128, kv_len=128, head_dim=64)
    full = 4 * 2 * 8 * 128 * 128 * 64
    assert sdpa.flops(Case.make("attention", "sdpa", "sdpa-math", "bf16", causal=False, **shape)) == full
    assert sdpa.flops(Case.make("attention", "sdpa", "sdpa-math", "bf16", causal=True, **shape)) == full / 2
    gqa = Case.make("attention", "sdpa", "sdpa-math", "bf16", causal=False, kv_heads=2, **shape)
    assert sdpa.flops(gqa) == full  # same arithmetic per query head


def test_attention_bytes_are_q_k_v_read_and_o_written_with_kv_heads():
    sdpa = kernel_for("sdpa")
    decode = Case.make("attention", "sdpa", "sdpa-flash", "bf16", batch=4, heads=32, kv_heads=8,
                       q_len=1, kv_len=1024, head_dim=128, causal=False)
    q_and_o = 2 * 4 * 32 * 1 * 128
    k_and_v = 2 * 4 * 8 * 1024 * 128
    assert sdpa.bytes(decode) == 2 * (q_and_o + k_and_v)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("backend", ["sdpa-math", "sdpa-flash"])
@pytest.mark.parametrize("shape", [
    dict(batch=2, heads=4, kv_heads=4, q_len=16, kv_len=16, head_dim=16, causal=True),   # MHA prefill
    dict(batch=1, heads=4, kv_heads=2, q_len=16, kv_len=16, head_dim=16, causal=False),  # GQA prefill
    dict(batch=2, heads=4, kv_heads=1, q_len=1, kv_len=40, head_dim=16, causal=False),   # GQA decode
], ids=["mha-causal", "gqa-prefill", "gqa-decode"])
def test_attention_matches_the_float64_reference_on_cpu(backend, dtype, shape):
    out = measure_case(Case.make("attention", "sdpa", backend, dtype, **shape), "cpu", CHECK, Observer())
    assert out.status == "ok" and out.correct, out


def test_an_attention_backend_the_device_lacks_is_a_skip_with_the_reason():
    case = Case.make("attention", "sdpa", "sdpa-efficient", "fp32", batch=1, heads=2, q_len=8, head_dim=16)
    out = measure_case(case, "cpu", CHECK, Observer())  # torch has no CPU memory-efficient kernel
    assert out.status == "skipped" and "sdpa-efficient" in out.error and not out.samples


def test_grouped_query_heads_on_the_memory_efficient_backend_are_a_skip_with_the_reason():
    # torch's memory-efficient kernel has no enable_gqa: on an H200 it raised a bare
    # "Invalid backend", recorded as a failure (kernels_bench/reference/h200-2026-11-27)
    case = Case.make("attention", "sdpa", "sdpa-efficient", "bf16", batch=1, heads=4, kv_heads=2, q_len=8,
                     kv_len=8, head_dim=16)
    out = measure_case(case, "cpu", CHECK, Observer())
    assert out.status == "skipped" and "grouped-query" in out.error and not out.samples


def test_causal_attention_with_unequal_lengths_is_skipped_not_mismeasured():
    case = Case.make("attention", "sdpa", "sdpa-math", "fp32", heads=2, q_len=1, kv_len=8, head_dim=16, causal=True)
    out = measure_case(case, "cpu", CHECK, Observer())
    assert out.status == "skipped" and "causal" in out.error


def test_norm_family_declares_per_element_flops_and_compulsory_bytes():
    rows, hidden = 16, 256
    case = lambda k, dt="bf16": Case.make("norm", k, "torch", dt, rows=rows, hidden=hidden)  # noqa: E731
    assert kernel_for("layer_norm").flops(case("layer_norm")) == 8 * rows * hidden
    assert kernel_for("rms_norm").flops(case("rms_norm")) == 4 * rows * hidden
    assert kernel_for("softmax").flops(case("softmax")) == 5 * rows * hidden
    assert kernel_for("layer_norm").bytes(case("layer_norm")) == 2 * (2 * rows * hidden + 2 * hidden)
    assert kernel_for("rms_norm").bytes(case("rms_norm", "fp32")) == 4 * (2 * rows * hidden + hidden)
    assert kernel_for("softmax").bytes(case("softmax")) == 2 * 2 * rows * hidden


@pytest.mark.parametrize("kernel", ["layer_norm", "rms_norm", "softmax"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_norm_kernels_match_the_float64_reference_on_cpu(kernel, dtype):
    out = measure_case(Case.make("norm", kernel, "torch", dtype, rows=8, hidden=96), "cpu", CHECK, Observer())
    assert out.status == "ok" and out.correct, out
    assert out.max_rel_error <= out.tolerance


# --- when sampling stops -------------------------------------------------------------

SAMPLE_S = 0.00390625  # 2**-8 s: sums are exact, so thresholds are hit on a known sample


def test_stops_on_low_noise_only_after_min_samples():
    state = StoppingState(StoppingRule(min_samples=5, min_time_s=0.01, max_noise=0.01, timeout_s=10))
    for _ in range(4):  # min_time is met at the third sample; min_samples is not
        state.add(SAMPLE_S, wall_elapsed_s=0.1)
        assert state.reason is None
    state.add(SAMPLE_S, wall_elapsed_s=0.1)
    assert (state.n, state.reason) == (5, "noise")


def test_stops_on_low_noise_only_after_min_time():
    state = StoppingState(StoppingRule(min_samples=2, min_time_s=0.02, max_noise=0.01, timeout_s=10))
    for _ in range(5):  # 5 samples are 0.0195 s of measured time
        state.add(SAMPLE_S, wall_elapsed_s=0.1)
        assert state.reason is None
    state.add(SAMPLE_S, wall_elapsed_s=0.1)
    assert (state.n, state.reason) == (6, "noise")


def test_noisy_samples_run_until_the_timeout():
    state = StoppingState(StoppingRule(min_samples=2, min_time_s=0.0, max_noise=0.01, timeout_s=1.0))
    for i in range(100):
        state.add(SAMPLE_S * (1 + i % 2), wall_elapsed_s=i * 0.05)  # 33 % noise
        if state.reason:
            break
    assert state.rel_noise > 0.3
    assert (state.n, state.reason) == (21, "timeout")  # wall time 1.0 s at the 21st sample


def test_max_samples_caps_sampling_whatever_the_noise():
    state = StoppingState(StoppingRule(min_samples=2, max_noise=0.01, timeout_s=10, max_samples=7))
    while state.reason is None:
        state.add(SAMPLE_S * (1 + state.n % 2), wall_elapsed_s=0.0)
    assert (state.n, state.reason) == (7, "max_samples")


def test_a_measured_case_records_why_it_stopped():
    capped = measure_case(NOOP, "cpu", StoppingRule(min_samples=5, min_time_s=60, timeout_s=60, max_samples=12),
                          Observer())
    assert capped.stop_reason == "max_samples" and len(capped.samples) == 12
    timed_out = measure_case(NOOP, "cpu", StoppingRule(min_samples=5, min_time_s=60, timeout_s=0.05), Observer())
    assert timed_out.stop_reason == "timeout" and len(timed_out.samples) >= 5


def test_stopping_rule_rejects_unknown_keys():
    with pytest.raises(ValueError, match="min_tme_s"):
        StoppingRule.from_dict({"min_tme_s": 1})


# --- telemetry -----------------------------------------------------------------------

class ClockDipsEveryOtherSample(Observer):
    """Injected telemetry: a 1500 MHz part that reads 900 MHz on every second sample."""

    default_clock_mhz = 1500

    def __init__(self):
        self.calls, self.before, self.after = 0, 0, 0

    def before_case(self):
        self.before += 1

    def reading(self):
        self.calls += 1
        low = self.calls % 2 == 0
        return Reading(sm_clock_mhz=900 if low else 1500, temperature_c=80.0 if low else 60.0, power_w=300.0)

    def after_case(self):
        self.after += 1


def test_samples_at_a_low_clock_are_marked_throttled_and_kept():
    obs = ClockDipsEveryOtherSample()
    out = measure_case(NOOP, "cpu", StoppingRule(min_samples=10, min_time_s=60, max_samples=10), obs)
    assert len(out.samples) == 10
    assert [s["throttled"] for s in out.samples] == [i % 2 == 1 for i in range(10)]
    assert [s["sm_clock_mhz"] for s in out.samples[:2]] == [1500, 900]
    assert out.samples[1]["temperature_c"] == 80.0 and out.samples[0]["power_w"] == 300.0
    assert (obs.before, obs.after) == (1, 1)


def test_throttle_threshold_is_strictly_under_75_percent_of_default_clock():
    obs = ClockDipsEveryOtherSample()
    assert not obs.throttled(Reading(sm_clock_mhz=1125))
    assert obs.throttled(Reading(sm_clock_mhz=1124))
    assert not obs.throttled(Reading())  # no reading: never guessed throttled
    assert not Observer().throttled(Reading(sm_clock_mhz=1))  # no default clock known


def test_without_telemetry_readings_are_null_not_invented():
    out = measure_case(NOOP, "cpu", StoppingRule(min_samples=3, min_time_s=60, max_samples=3), Observer())
    assert all(s["sm_clock_mhz"] is None and s["power_w"] is None and s["throttled"] is False for s in out.samples)
    assert all(math.isfinite(s["latency_ns"]) and s["latency_ns"] >= 0 for s in out.samples)
