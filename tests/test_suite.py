"""Suites: YAML groups expand into cases; errors name the file and the key; shards are
deterministic, disjoint and together the whole suite; the bundled suites load."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernels_bench.kernels import kernel_for
from kernels_bench.stopping import StoppingRule
from kernels_bench.suite import SUITES_DIR, SuiteError, load_suite


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def params_of(suite) -> set[frozenset]:
    return {frozenset({"dtype": pc.case.dtype, **pc.case.p}.items()) for pc in suite.cases}


# --- expansion -----------------------------------------------------------------------

def test_axes_expand_to_the_cartesian_product_with_dtypes(tmp_path):
    suite = load_suite(write(tmp_path, """
groups:
  - kernel: copy
    dtypes: [fp32, bf16]
    axes: {numel: [1024, 2048, 4096]}
"""))
    assert len(suite.cases) == 6
    assert {(pc.case.dtype, pc.case.p["numel"]) for pc in suite.cases} == {
        (d, n) for d in ("fp32", "bf16") for n in (1024, 2048, 4096)}


def test_a_mapping_value_on_an_axis_sets_several_parameters_together(tmp_path):
    suite = load_suite(write(tmp_path, """
groups:
  - kernel: matmul
    axes:
      shape: [{m: 16, n: 32, k: 8}, {m: 64, n: 64, k: 64}]
      batch: [1, 4]
"""))
    assert params_of(suite) == {
        frozenset({"dtype": "fp32", "m": m, "n": n, "k": k, "batch": b}.items())
        for (m, n, k) in ((16, 32, 8), (64, 64, 64)) for b in (1, 4)}


def test_include_adds_parameter_sets_and_exclude_removes_partial_matches(tmp_path):
    suite = load_suite(write(tmp_path, """
groups:
  - kernel: copy
    dtypes: [fp32, bf16]
    axes: {numel: [1024, 2048]}
    include: [{numel: 7}]
    exclude: [{dtype: bf16, numel: 2048}]
"""))
    assert {(pc.case.dtype, pc.case.p["numel"]) for pc in suite.cases} == {
        ("fp32", 1024), ("fp32", 2048), ("fp32", 7), ("bf16", 1024), ("bf16", 7)}


def test_skip_keeps_the_case_planned_with_its_reason(tmp_path):
    suite = load_suite(write(tmp_path, """
groups:
  - kernel: matmul
    dtypes: [bf16, fp8]
    axes: {shape: [{m: 16, n: 16, k: 16}]}
    skip: [{where: {dtype: fp8}, reason: "no fp8 on this pool"}]
"""))
    reasons = {pc.case.dtype: pc.skip_reason for pc in suite.cases}
    assert reasons == {"bf16": None, "fp8": "no fp8 on this pool"}


def test_the_same_case_from_two_groups_is_planned_once(tmp_path):
    suite = load_suite(write(tmp_path, """
groups:
  - {kernel: copy, axes: {numel: [1024, 2048]}}
  - {kernel: copy, axes: {numel: [2048, 4096]}}
"""))
    assert sorted(pc.case.p["numel"] for pc in suite.cases) == [1024, 2048, 4096]


def test_suite_stopping_overrides_the_default_rule(tmp_path):
    suite = load_suite(write(tmp_path, """
stopping: {min_time_s: 0.05, max_samples: 99}
groups: [{kernel: noop}]
"""))
    assert suite.stopping == StoppingRule(min_time_s=0.05, max_samples=99)


# --- errors name the file and the key -------------------------------------------------

def test_an_unknown_kernel_error_names_the_file_the_key_and_the_kernel(tmp_path):
    path = write(tmp_path, "groups:\n  - {kernel: copy}\n  - {kernel: matmull}\n", name="typo.yaml")
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    text = str(err.value)
    assert path in text and "groups[1].kernel" in text and "'matmull'" in text and "matmul" in text


def test_an_unknown_group_key_is_named(tmp_path):
    with pytest.raises(SuiteError, match=r"groups\[0\]: unknown keys \['dtype'\]"):
        load_suite(write(tmp_path, "groups:\n  - {kernel: copy, dtype: [fp32]}\n"))


def test_a_backend_the_kernel_does_not_offer_is_named(tmp_path):
    with pytest.raises(SuiteError, match=r"groups\[0\].backends: \['sdpa-magic'\]"):
        load_suite(write(tmp_path, "groups:\n  - {kernel: sdpa, backends: [sdpa-magic]}\n"))


def test_a_bad_stopping_key_names_the_file(tmp_path):
    path = write(tmp_path, "stopping: {min_tme_s: 1}\ngroups: [{kernel: noop}]\n")
    with pytest.raises(SuiteError, match="min_tme_s") as err:
        load_suite(path)
    assert path in str(err.value)


def test_an_unknown_suite_name_lists_the_known_ones():
    with pytest.raises(SuiteError, match="cpu-smoke"):
        load_suite("no-such-suite")


def test_a_suite_that_explodes_warns_with_its_size(tmp_path):
    path = write(tmp_path, "groups:\n  - {kernel: noop, axes: {a: %s, b: %s}}\n" % (list(range(71)), list(range(71))))
    with pytest.warns(UserWarning, match="5041 cases"):
        suite = load_suite(path)
    assert len(suite.cases) == 5041  # a warning, not a refusal


# --- shards --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def suite23(tmp_path_factory):
    return load_suite(write(tmp_path_factory.mktemp("s"), "groups:\n  - {kernel: copy, axes: {numel: %s}}\n"
                            % list(range(1, 24))))


def ids(planned) -> list[str]:
    return [pc.case.case_id for pc in planned]


def test_the_same_shard_twice_is_the_same_cases_in_the_same_order(suite23):
    assert ids(suite23.shard(1, 4)) == ids(suite23.shard(1, 4))
    assert ids(suite23.shard(1, 4, seed=7)) == ids(suite23.shard(1, 4, seed=7))


def test_shards_are_disjoint_and_their_union_is_the_suite(suite23):
    shards = [set(ids(suite23.shard(i, 4))) for i in range(4)]
    assert sum(map(len, shards)) == len(suite23.cases) == 23
    assert set().union(*shards) == set(ids(suite23.cases))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # balanced


def test_a_seed_shuffles_the_order_within_a_shard_but_not_its_membership(suite23):
    plain = ids(suite23.shard(0, 2))
    seeded = [ids(suite23.shard(0, 2, seed=s)) for s in range(1, 6)]
    assert all(sorted(s) == sorted(plain) for s in seeded)
    assert any(s != plain for s in seeded)


def test_a_shard_index_out_of_range_is_refused(suite23):
    with pytest.raises(SuiteError, match="4/4"):
        suite23.shard(4, 4)


# --- the bundled suites ----------------------------------------------------------------

BUNDLED = sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_suite_loads_and_every_case_has_a_cost_model(name):
    suite = load_suite(name)
    assert suite.cases
    for pc in suite.cases:
        k = kernel_for(pc.case.kernel)
        flops, bytes_ = k.flops(pc.case), k.bytes(pc.case)
        assert math.isfinite(flops) and flops >= 0 and math.isfinite(bytes_) and bytes_ >= 0, pc.case.label


def test_cpu_smoke_covers_every_family():
    from kernels_bench.kernels import KERNELS

    families = {pc.case.family for pc in load_suite("cpu-smoke").cases}
    assert families == {k.family for k in KERNELS.values()}
