"""Collectives over gloo with two real local processes: results are correct, samples
land like any other kernel's, and bandwidth follows nccl-tests' bus factors."""
from __future__ import annotations

import statistics

import pytest

from kernels_bench.case import Case
from kernels_bench.collectives import run_collective, run_collectives
from kernels_bench.kernels import kernel_for
from kernels_bench.kernels.collective import algbw_gbps, bus_factor, busbw_gbps, size_bytes
from kernels_bench.measure import measure_case
from kernels_bench.stopping import StoppingRule
from kernels_bench.telemetry import Observer

N = 2
RULE = StoppingRule(min_samples=5, min_time_s=0.01, max_noise=0.05, timeout_s=0.5, max_samples=30)
OPS = ("all_reduce", "all_gather", "reduce_scatter")


def collective(op: str, numel: int = 4096, dtype: str = "fp32", world_size: int = N) -> Case:
    return Case.make("collective", op, "gloo", dtype, numel=numel, world_size=world_size)


UNEVEN = collective("all_gather", numel=1001)  # 1001 elements do not split across 2 ranks


@pytest.fixture(scope="module")
def outcomes():
    # One process group measures every case (one start-up of two processes); the bad
    # case sits between good ones, so the group must survive it.
    ops = ("all_reduce", "uneven", "all_gather", "reduce_scatter")
    cases = [UNEVEN if op == "uneven" else collective(op) for op in ops]
    return dict(zip(ops, run_collectives(cases, N, RULE)))


@pytest.mark.parametrize("op", OPS)
def test_gloo_collective_with_two_processes_is_correct_and_sampled(outcomes, op):
    out = outcomes[op]
    assert out.status == "ok" and out.correct is True, out
    assert out.max_rel_error <= out.tolerance
    assert RULE.min_samples <= len(out.samples) <= RULE.max_samples
    assert out.stop_reason in ("noise", "timeout", "max_samples")


@pytest.mark.parametrize("op", OPS)
def test_collective_samples_have_the_same_fields_as_every_other_kernel(outcomes, op):
    single = measure_case(Case.make("selftest", "noop", "python", "fp32"), "cpu",
                          StoppingRule(min_samples=2, max_samples=2), Observer())
    assert [list(s) for s in outcomes[op].samples[:1]] == [list(single.samples[0])]
    assert [s["iteration"] for s in outcomes[op].samples] == list(range(len(outcomes[op].samples)))
    assert all(s["latency_ns"] > 0 for s in outcomes[op].samples)


def test_all_reduce_bus_bandwidth_is_algorithm_bandwidth_times_2_n_minus_1_over_n(outcomes):
    case = collective("all_reduce")
    median_ns = statistics.median(s["latency_ns"] for s in outcomes["all_reduce"].samples)
    algbw = algbw_gbps(case, median_ns)
    assert algbw == pytest.approx(4096 * 4 / median_ns)  # bytes per ns == GB/s
    assert busbw_gbps(case, median_ns) == pytest.approx(algbw * 2 * (N - 1) / N)


@pytest.mark.parametrize("op,factor", [("all_reduce", 2 * 7 / 8), ("all_gather", 7 / 8), ("reduce_scatter", 7 / 8)])
def test_bus_factors_are_those_of_nccl_tests(op, factor):
    assert bus_factor(op, 8) == pytest.approx(factor)
    assert bus_factor(op, 1) == 0.0  # one rank moves nothing over the bus


@pytest.mark.parametrize("op", OPS)
def test_declared_bytes_are_bus_bytes_so_bytes_over_time_is_bus_bandwidth(op):
    case = collective(op, numel=1 << 20, dtype="bf16", world_size=4)
    assert size_bytes(case) == 2 * (1 << 20)
    assert kernel_for(op).bytes(case) / 1000.0 == pytest.approx(busbw_gbps(case, 1000.0))


def test_a_collective_outside_a_process_group_is_a_skip_that_says_where_to_run_it():
    out = measure_case(collective("all_reduce"), "cpu", RULE, Observer())
    assert out.status == "skipped" and "run_collective" in out.error


def test_nccl_on_a_cpu_run_is_a_skip_with_the_reason():
    case = Case.make("collective", "all_reduce", "nccl", "fp32", numel=1024, world_size=2)
    out = run_collective(case, 2, RULE, device="cpu")
    assert out.status == "skipped" and "CUDA" in out.error


def test_a_case_for_another_world_size_is_refused():
    with pytest.raises(ValueError, match="world_size 4"):
        run_collective(collective("all_reduce", world_size=2), 4, RULE)


def test_a_buffer_that_does_not_split_across_ranks_fails_without_hanging_the_group(outcomes):
    out = outcomes["uneven"]
    assert out.status == "failed" and "multiple of world_size" in out.error and not out.samples
    assert outcomes["all_gather"].status == "ok"  # the next case in the same group
