"""The model layer (#27): workloads as data, their decomposition into kernel cases
against hand-computed shapes and flop counts, the generated suite, and the projection
of a step on a tiny lake with known kernel times (read through DuckDB; no Spark)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kernels_bench.case import Case
from pipelines.config.lake import Lake
from pipelines.projection.decompose import decompose
from pipelines.projection.workload import Scenario, WorkloadError, load_workload, parse_workload

H100 = "H100-SXM5-80GB"


def _by_op(calls):
    return {c.op: c for c in calls}


# --- decomposition against hand-computed values ------------------------------------------

def test_llama_8b_prefill_gemm_shapes_are_the_models_weight_shapes():
    calls = _by_op(decompose(load_workload("llama-8b"), Scenario("prefill", 2, 1024)))
    shape = {op: (c.case.p["m"], c.case.p["n"], c.case.p["k"]) for op, c in calls.items() if c.op_class == "gemm"}
    assert shape == {"qkv_proj": (2048, (32 + 2 * 8) * 128, 4096), "o_proj": (2048, 4096, 4096),
                     "gate_up_proj": (2048, 2 * 14336, 4096), "down_proj": (2048, 4096, 14336),
                     "lm_head": (2, 128256, 4096)}
    assert calls["qkv_proj"].count == 32 and calls["lm_head"].count == 1
    att = calls["attention"].case.p
    assert (att["batch"], att["heads"], att["kv_heads"], att["q_len"], att["kv_len"], att["causal"]) == \
        (2, 32, 8, 1024, 1024, True)


def test_a_decode_step_does_two_flops_per_weight_per_sequence_plus_attention():
    w, batch, ctx = load_workload("llama-8b"), 32, 4096
    calls = decompose(w, Scenario("decode", batch, ctx))
    gemm = sum(c.flops * c.count for c in calls if c.op_class == "gemm")
    assert gemm == 2 * batch * (w.params() - w.vocab * w.hidden)  # every weight but the embedding table
    assert w.params() + 65 * 4096 == 8_030_261_248  # Llama 3.1 8B's published count holds 65 norm weights too
    attention = sum(c.flops * c.count for c in calls if c.op_class == "attention")
    assert attention == 4 * batch * 32 * 1 * ctx * 128 * 32       # QK^T and PV, one query per sequence


def test_tensor_parallel_splits_the_flops_and_adds_two_all_reduces_per_layer():
    w, batch = load_workload("llama-70b"), 16
    one = decompose(w, Scenario("decode", batch, 2048, tp=1))
    eight = decompose(w, Scenario("decode", batch, 2048, tp=8))
    flops = lambda calls: sum(c.flops * c.count for c in calls if c.op_class in ("gemm", "attention"))
    assert 8 * flops(eight) == flops(one)
    reduces = [c for c in eight if c.case.kernel == "all_reduce"]
    assert [c.op for c in reduces] == ["attn_all_reduce", "ffn_all_reduce"] and all(c.count == 80 for c in reduces)
    ar = reduces[0]
    assert ar.case.p == {"numel": batch * 8192, "world_size": 8}
    assert ar.bytes == pytest.approx(2 * 7 / 8 * batch * 8192 * 2)   # nccl-tests' bus bytes of a bf16 all-reduce
    assert not [c for c in one if c.op_class == "communication"]
    att = _by_op(eight)["attention"].case.p
    assert (att["heads"], att["kv_heads"]) == (8, 1)


def test_moe_decode_computes_only_the_active_experts():
    w, batch = load_workload("mixtral-8x7b"), 32
    calls = decompose(w, Scenario("decode", batch, 4096))
    gemm = sum(c.flops * c.count for c in calls if c.op_class == "gemm")
    assert gemm == 2 * batch * (w.params(active=True) - w.vocab * w.hidden)
    experts = _by_op(calls)["expert_gate_up_proj"]
    assert experts.case.p["m"] == batch * 2 // 8 and experts.count == 8 * 32
    ep = _by_op(decompose(w, Scenario("decode", batch, 4096, tp=8, ep=8)))["expert_down_proj"]
    assert (ep.count, ep.case.p["m"], ep.case.p["k"]) == (32, 8, 14336)  # one whole expert per GPU


# --- validation ---------------------------------------------------------------------------

def test_a_preset_with_a_bad_field_is_an_error_naming_the_file_and_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(load_workload("llama-8b").source).read_text().replace("kv_heads: 8", "kv_heads: 7"))
    with pytest.raises(WorkloadError, match=r"bad\.yaml: heads \(32\) must be a multiple of kv_heads \(7\)"):
        load_workload(str(bad))
    with pytest.raises(WorkloadError, match=r"p\.yaml: hidden: a positive integer, got '4k'"):
        parse_workload({**_doc(), "hidden": "4k"}, "p.yaml")
    with pytest.raises(WorkloadError, match=r"p\.yaml: unknown fields \['hiden'\]"):
        parse_workload({**_doc(), "hiden": 1}, "p.yaml")
    with pytest.raises(WorkloadError, match=r"p\.yaml: activation: 'relu' is not one of silu_mul, gelu"):
        parse_workload({**_doc(), "activation": "relu"}, "p.yaml")
    with pytest.raises(WorkloadError, match="no workload preset 'llama-9b'; presets: llama-70b, llama-8b"):
        load_workload("llama-9b")


def _doc() -> dict:
    w = load_workload("llama-8b")
    return {k: getattr(w, k) for k in ("name", "hidden", "layers", "heads", "kv_heads", "head_dim", "ffn",
                                       "activation", "norm", "vocab", "dtype")}


def test_a_scenario_the_model_cannot_split_says_why():
    w = load_workload("llama-8b")
    with pytest.raises(WorkloadError, match="tp 3 does not divide the 32 query heads"):
        decompose(w, Scenario("decode", 1, 128, tp=3))
    with pytest.raises(WorkloadError, match="ep 2 needs a mixture of experts"):
        decompose(w, Scenario("decode", 1, 128, tp=2, ep=2))


# --- the generated suite --------------------------------------------------------------------

def test_the_generated_suite_is_up_to_date_and_listed_by_the_harness():
    import io

    from kernels_bench.__main__ import list_suites
    from kernels_bench.suite import SUITES_DIR, load_suite
    from pipelines.projection.decompose import SUITE_NAME, suite_text

    assert (SUITES_DIR / f"{SUITE_NAME}.yaml").read_text() == suite_text(), "run perflake model --write-suite"
    ids = {pc.case.case_id for pc in load_suite(SUITE_NAME).cases}
    for c in decompose(load_workload("mixtral-8x7b"), Scenario("decode", 32, 4096, tp=8, ep=8)):
        assert c.case.case_id in ids, c.case.label
    out = io.StringIO()
    list_suites(out=out)
    assert any(line.startswith(SUITE_NAME) and "silu_mul" in line for line in out.getvalue().splitlines())


# --- the projection on a lake with known kernel times -----------------------------------------

W = load_workload("llama-8b")
S = Scenario("prefill", 1, 2048)
KNOWN_NS = 100_000.0   # every case the tiny lake measures exactly takes this long ...
QKV_BELOW, QKV_ABOVE = 50_000.0, 200_000.0   # ... but the QKV GEMM's neighbours


def _write_lake(root: Path, sku: str = H100, kind: str = "simulated", scale: float = 1.0) -> Lake:
    """A lake whose case_stats hold, on `sku` (of device kind `kind`): every call of W's
    step S but the QKV GEMM and the LM head, at KNOWN_NS; the QKV GEMM's neighbours
    n=5120 and n=8192; nothing near the LM head (every median times `scale`). Called
    again on the same root, it adds that kind's measurements."""
    calls = {c.op: c.case for c in decompose(W, S)}
    qkv = calls.pop("qkv_proj")
    calls.pop("lm_head")
    cases = {c.case_id: (c, KNOWN_NS) for c in calls.values()}
    for n, ns in ((5120, QKV_BELOW), (8192, QKV_ABOVE)):  # (n=4096 would be the O GEMM's own case)
        c = Case.make("gemm", "matmul", "torch", "bf16", **{**qkv.p, "n": n})
        cases[c.case_id] = (c, ns)
    lake = Lake(root)
    _write_stats(lake, "sim-h100" if kind == "simulated" else "h100", [
        {**_stats_row(c, sku, kind, ns * scale), "energy_per_call_j": ns * 1e-9 * 500.0} for c, ns in cases.values()])
    if not (lake.warehouse / "cases").exists():
        _write_cases(lake, [c for c, _ in cases.values()])
    return lake


def _stats_row(c: Case, sku: str, kind: str, median_ns: float, run_id: str = "r1") -> dict:
    """A perf.case_stats row of case `c` measured on `sku` at `median_ns`."""
    from kernels_bench.kernels import kernel_for
    from schemas.tables import CASE_STATS

    return {**{col: None for col in CASE_STATS.column_names}, "run_id": run_id, "case_id": c.case_id, "attempt": 1,
            "family": c.family, "kernel": c.kernel, "backend": c.backend, "dtype": c.dtype, "device_kind": kind,
            "gpu_sku": sku, "status": "ok", "median_ns": median_ns, "flops_per_call": kernel_for(c.kernel).flops(c),
            "bytes_per_call": kernel_for(c.kernel).bytes(c)}


def _write_stats(lake: Lake, pool: str, rows: list[dict]) -> None:
    from schemas.tables import CASE_STATS

    part = lake.warehouse / "case_stats" / "dt=2035-01-02" / f"pool={pool}"
    part.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, CASE_STATS.arrow_schema(with_partitions=False)), part / "p.parquet")


def _write_cases(lake: Lake, cases: list[Case]) -> None:
    from schemas.tables import CASES

    rows = [{**{col: None for col in CASES.column_names}, "case_id": c.case_id, "family": c.family, "kernel": c.kernel,
             "backend": c.backend, "dtype": c.dtype, "params": [(k, str(v)) for k, v in c.params]} for c in cases]
    (lake.warehouse / "cases").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, CASES.arrow_schema()), lake.warehouse / "cases" / "p.parquet")


@pytest.fixture(scope="module")
def projected(tmp_path_factory):
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.warehouse.frames import Frames

    lake = _write_lake(tmp_path_factory.mktemp("model-lake"))
    with Frames(lake) as frames:
        lookup = load_lookup(frames, H100)
    return lookup, *project_workload(W, S, lookup)


def test_a_call_the_lake_measured_exactly_takes_its_measured_median(projected):
    _, calls, _ = projected
    measured = calls[calls["source"] == "measured"]
    assert set(measured["op"]) == {"embedding", "attn_norm", "attention", "o_proj", "attn_residual", "ffn_norm",
                                   "gate_up_proj", "activation", "down_proj", "ffn_residual", "final_norm"}
    assert (measured["ns_per_call"] == KNOWN_NS).all()


def test_a_shape_between_two_measured_neighbours_is_interpolated_log_log(projected):
    _, calls, _ = projected
    qkv = calls.set_index("op").loc["qkv_proj"]
    f = math.log(6144 / 5120) / math.log(8192 / 5120)
    assert qkv["source"] == "interpolated" and "n=5120 and n=8192" in qkv["how"]
    assert qkv["ns_per_call"] == pytest.approx(QKV_BELOW * (QKV_ABOVE / QKV_BELOW) ** f)


def test_a_shape_with_no_measured_neighbours_falls_back_to_the_calibrated_roofline(projected):
    _, calls, _ = projected
    head = calls.set_index("op").loc["lm_head"]
    assert head["source"] == "roofline" and head["ns_per_call"] >= head["bound_ns"] > 0


def test_the_step_is_the_sum_of_its_calls_and_says_what_it_rests_on(projected):
    lookup, calls, s = projected
    qkv = calls.set_index("op").loc["qkv_proj", "ns_per_call"]
    head = calls.set_index("op").loc["lm_head", "ns_per_call"]
    measured_calls = int(calls.loc[calls["source"] == "measured", "count"].sum())
    assert measured_calls == 1 + 32 * 9 + 1  # the embedding, 9 ops in each of 32 layers, the final norm
    step = measured_calls * KNOWN_NS + 32 * qkv + head
    assert s["step_ns"] == pytest.approx(step)
    assert s["tokens_per_s"] == pytest.approx(2048 / step * 1e9)
    assert s["measured_pct"] == pytest.approx(measured_calls * KNOWN_NS / step * 100)
    assert s["measured_pct"] + s["interpolated_pct"] + s["roofline_pct"] == pytest.approx(100)
    assert s["simulated"] and "SIMULATED measurements of H100-SXM5-80GB" in s["context"]
    # 500 W on every measured or interpolated call; the roofline's LM head is charged the same mean power.
    assert s["energy_per_token_j"] == pytest.approx(step * 1e-9 * 500.0 / 2048)
    flops = sum(c.flops * c.count for c in decompose(W, S))
    assert s["mfu_pct"] == pytest.approx(flops / (step * 1e-9) / 989.4e12 * 100)  # the H100's bf16 peak


def test_an_unmeasured_gpu_is_projected_from_the_measured_one_and_labelled_simulated(projected, tmp_path):
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.warehouse.frames import Frames

    lake = _write_lake(tmp_path)
    with Frames(lake) as frames:
        lookup = load_lookup(frames, "B200-SXM-180GB")
    calls, s = project_workload(W, S, lookup)
    assert (calls["source"] == "roofline").all() and s["simulated"]
    assert "no measurements of B200-SXM-180GB" in s["context"] and "simulated H100-SXM5-80GB" in s["context"]
    assert s["step_ns"] < projected[2]["step_ns"]  # the B200's roofs are higher on every axis


def test_a_filter_that_a_measured_gpu_does_not_match_is_an_error_not_another_gpus_answer(tmp_path):
    """A mistyped --torch (or a night the GPU missed) once answered from another GPU's
    calibration, saying the GPU had no measurements in the lake."""
    from pipelines.projection.lookup import load_lookup
    from pipelines.warehouse.frames import Frames

    lake = _write_lake(tmp_path)
    run = {"run_id": "r1", "gpu_sku": H100, "device_kind": "simulated", "torch_version": "2.13.0"}
    part = lake.warehouse / "runs" / "dt=2035-01-02" / "pool=sim-h100"
    part.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([run]), part / "p.parquet")  # the columns the lookup reads
    with Frames(lake) as frames:
        assert not load_lookup(frames, H100, torch_version="2.13.0").history.empty
        for asked, said in (({"torch_version": "2.13"}, "torch 2.13"), ({"dates": ["2035-01-03"]}, "nights")):
            with pytest.raises(ValueError, match=f"no measurement of {H100} \\(simulated\\) matches {said}.*torch "
                                                 "\\['2.13.0'\\] on 1 night\\(s\\) from 2035-01-02 to 2035-01-02, "
                                                 "in pools \\['sim-h100'\\]"):
                load_lookup(frames, H100, **asked)
        # A GPU the lake never measured still projects from the measured one, filters or not.
        assert load_lookup(frames, "B200-SXM-180GB", torch_version="2.13").calibration is not None
        # Asked for real figures of a GPU measured only on the simulated device: projected from
        # another real GPU where there is one, and never said to be unmeasured.
        real = load_lookup(frames, H100, device_kind="gpu")
        assert real.history.empty and real.context.startswith(f"no measurements of {H100} as gpu")
        assert f"the lake holds simulated measurements of {H100}" in real.context


def test_an_empty_lake_still_answers_from_the_spec_sheet(tmp_path):
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.warehouse.frames import Frames

    with Frames(Lake(tmp_path)) as frames:
        calls, s = project_workload(W, S, load_lookup(frames, "A100-SXM4-80GB"))
    assert (calls["source"] == "roofline").all() and not s["simulated"]
    assert (calls["ns_per_call"][calls["op_class"] != "communication"] == calls["bound_ns"]).all()
    assert "uncalibrated" in s["context"]


def test_the_cli_labels_simulated_data_and_names_its_sources(tmp_path, capsys, monkeypatch):
    from pipelines.cli import main

    lake = _write_lake(tmp_path)
    monkeypatch.setenv("PERFLAKE_HOME", str(lake.root))
    assert main(["model", "llama-8b", "--gpu", H100, "--phase", "prefill", "--prompt", "2048", "--calls"]) == 0
    out = capsys.readouterr().out
    assert f"{H100} [SIMULATED data]: step" in out and "sources:  measured" in out
    assert "between measured n=5120 and n=8192" in out  # the --calls table names each call's source
    assert main(["model", "llama-8b", "--gpu", H100, "--tp", "3"]) == 2
    assert "tp 3 does not divide the 32 query heads" in capsys.readouterr().err


def test_the_cli_gives_each_mode_its_own_options_and_its_history_as_json(tmp_path, capsys, monkeypatch):
    """--history printed its text table under --format json, and --calls or --save beside
    a comparison or a history were ignored without a word."""
    from pipelines.cli import main

    lake = _write_lake(tmp_path)
    monkeypatch.setenv("PERFLAKE_HOME", str(lake.root))
    base = ["model", "llama-8b", "--gpu", H100, "--phase", "prefill", "--prompt", "2048"]
    assert main([*base, "--history", "--format", "json"]) == 0
    (gpu,) = json.loads(capsys.readouterr().out)
    assert gpu["gpu"] == H100 and [n["dt"] for n in gpu["nights"]] == ["2035-01-02"] and "SIMULATED" in gpu["context"]
    for extra, said in ((["--history", "--calls"], "--calls goes with a projection, not with --history"),
                        (["--vs-gpu", "B200-SXM-180GB", "--save"], "--save goes with a projection, not with --vs-gpu"),
                        (["--vs-torch", "2.13.0", "--history"], "are two answers")):
        assert main([*base, *extra]) == 2
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # the option's own name, not the scenario's `seq`
        main([*base, "--prompt", "0"])
    assert refused.value.code == 2 and "--prompt: 0 is not positive" in capsys.readouterr().err


def test_a_gpu_measured_for_real_and_simulated_is_read_from_its_real_measurements_unless_asked(tmp_path, capsys,
                                                                                                 monkeypatch):
    from pipelines.cli import main

    lake = _write_lake(tmp_path)                          # simulated, every measured call at KNOWN_NS
    _write_lake(tmp_path, kind="gpu", scale=2.0)          # the same cases measured for real, twice as slow
    monkeypatch.setenv("PERFLAKE_HOME", str(lake.root))
    args = ["model", "llama-8b", "--gpu", H100, "--phase", "prefill", "--prompt", "2048", "--format", "json"]
    assert main(args) == 0
    real = json.loads(capsys.readouterr().out)[0]["summary"]
    assert main([*args, "--device-kind", "simulated"]) == 0
    sim = json.loads(capsys.readouterr().out)[0]["summary"]
    assert not real["simulated"] and sim["simulated"]
    assert real["step_ns"] == pytest.approx(2 * sim["step_ns"])  # never mixed: every call from one kind
    assert real["context"].startswith(f"gpu measurements of {H100}")
    assert "also holds simulated measurements" in real["context"] and "--device-kind simulated" in real["context"]
    assert "also holds" not in sim["context"]


def test_every_preset_is_answered_on_every_catalog_gpu_with_its_sources(tmp_path):
    from kernels_bench.hardware import load_catalog
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import SOURCES, project_workload
    from pipelines.projection.workload import preset_names
    from pipelines.warehouse.frames import Frames

    lake = _write_lake(tmp_path)
    with Frames(lake) as frames:
        lookups = {sku: load_lookup(frames, sku) for sku, hw in load_catalog().items() if hw.device_kind == "gpu"}
    assert len(lookups) >= 5 and len(preset_names()) >= 4
    for name in preset_names():
        w = load_workload(name)
        for sku, lookup in lookups.items():
            calls, s = project_workload(w, Scenario("decode", 8, 1024).check(w), lookup)
            assert s["step_ns"] > 0 and math.isfinite(s["tokens_per_s"]), (name, sku)
            assert s["measured_pct"] + s["interpolated_pct"] + s["roofline_pct"] == pytest.approx(100)
            assert set(calls["source"]) <= set(SOURCES) and (calls["how"].str.len() > 0).all()
            assert s["target_sku"] == sku and sku in s["context"] and s["simulated"]


def test_a_workload_projected_before_its_gpu_was_measured_is_scored_once_it_is_and_stays_as_made(
        tmp_path, capsys, monkeypatch):
    """Projected onto the B200 while the lake had only the H100 (the roofline calibrated
    on it), then scored on a lake that measured the B200: the scored step is the same
    workload priced from the B200's own measurements, the error is against that, and the
    projection's own figures are unchanged. A GPU still unmeasured is not scored."""
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.projection.workload_table import score, workload_rows
    from pipelines.warehouse.frames import Frames

    b200, a100 = "B200-SXM-180GB", "A100-SXM4-80GB"
    before = _write_lake(tmp_path / "before")
    with Frames(before) as frames:
        blind = [project_workload(W, S, load_lookup(frames, sku))[1] for sku in (b200, a100)]
    rows = workload_rows(blind)
    assert list(rows["as_of_dt"]) == ["", ""] and list(rows["roofline_pct"]) == pytest.approx([100, 100])

    after = _write_lake(tmp_path / "after", sku=b200)  # the B200 arrived and was measured
    with Frames(after) as frames:
        scored = score(frames, rows)
        _, truth = project_workload(W, S, load_lookup(frames, b200))
    (row,) = scored.to_dict("records")
    assert row["target_sku"] == b200 and row["scored_as_of_dt"] == "2035-01-02"
    assert row["scored_step_ns"] == pytest.approx(truth["step_ns"])
    assert 0 < row["scored_measured_pct"] == pytest.approx(truth["measured_pct"])
    assert row["error_pct"] == pytest.approx((blind[0]["step_ns"] / truth["step_ns"] - 1) * 100)
    assert abs(row["error_pct"]) > 1  # the blind roofline is not the measured 100 us per call
    made = rows.iloc[0]
    assert row["step_ns"] == made["step_ns"] and row["projected_at"] == made["projected_at"]

    # `perflake model --scores` reads them back from the table (here written without Spark).
    from pipelines.cli import main
    from schemas.tables import WORKLOAD_PROJECTIONS

    folder = after.warehouse / "workload_projections"
    folder.mkdir()
    pq.write_table(pa.Table.from_pandas(pd.concat([scored, rows.iloc[[1]]]), WORKLOAD_PROJECTIONS.arrow_schema(),
                                        preserve_index=False), folder / "part-0.parquet")
    monkeypatch.setenv("PERFLAKE_HOME", str(after.root))
    assert main(["model", "--scores"]) == 0
    out = capsys.readouterr().out
    assert b200 in out and a100 not in out and "SIMULATED" in out
    assert f"median |error| {abs(row['error_pct']):.1f} % over 1 projections" in out


def test_a_gpu_measured_on_some_families_calibrates_the_others_from_a_third_gpu_never_the_target(tmp_path):
    """The real H100 measured attention alone; the H200 GEMMs. Projecting from the H100
    (`perflake project --source`, or the model on an unmeasured GPU) takes the GEMM
    curve from the H200, as `perflake model` on the H100 does, unless the H200 is the
    target: its measurements score the projections, so they must not make them."""
    from pipelines.projection.roofline import calibrate_source
    from pipelines.warehouse.frames import Frames

    att = Case.make("attention", "sdpa", "sdpa-flash", "bf16", batch=1, heads=32, kv_heads=8, head_dim=128, q_len=2048,
                    kv_len=2048, causal=True)
    gemm = Case.make("gemm", "matmul", "torch", "bf16", m=4096, n=4096, k=4096)
    lake = Lake(tmp_path)
    for sku, pool, case in (("H100-SXM5-80GB", "h100", att), ("H200-SXM-141GB", "h200", gemm)):
        _write_stats(lake, pool, [_stats_row(case, sku, "gpu", 1e6, run_id=f"r-{pool}")])
    _write_cases(lake, [att, gemm])
    with Frames(lake) as frames:
        src, onto_b200 = calibrate_source(frames, H100, "gpu", target="B200-SXM-180GB")
        _, onto_h200 = calibrate_source(frames, H100, "gpu", target="H200-SXM-141GB")
    assert src["case_id"].tolist() == [att.case_id]
    assert "efficiency of gemm from H200-SXM-141GB" in onto_b200.source and ("gemm", "compute") in onto_b200.curves["family"]
    assert "efficiency of gemm" not in onto_h200.source and ("gemm", "compute") not in onto_h200.curves["family"]
