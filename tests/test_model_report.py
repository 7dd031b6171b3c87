"""The models night over night (#27, step 5): the nightly workloads projected onto each
GPU a night measured, and the nightly report and the dashboard's Models page showing
them against the night before, on a tiny lake with known kernel times (DuckDB only; the
rows are written as the mine's Spark write would leave them)."""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config.lake import Lake
from pipelines.projection.decompose import decompose
from pipelines.projection.workload import Scenario, WorkloadError, load_workload

H100 = "H100-SXM5-80GB"
W = load_workload("llama-8b")
S = Scenario("prefill", 1, 2048)
NIGHTS = ("2035-01-01", "2035-01-02")
TORCH = {"2035-01-01": "2.12.0", "2035-01-02": "2.13.0"}
KNOWN_NS = 100_000.0     # every call of W's step S takes this long on both nights ...
SLOWER_OP = "gate_up_proj"   # ... but this GEMM (once per layer) takes twice that on the second
CALLS = 1 + 32 * 10 + 2      # the embedding, 10 calls in each of 32 layers, the final norm and the LM head
STEP_NS = {NIGHTS[0]: CALLS * KNOWN_NS, NIGHTS[1]: (CALLS + 32) * KNOWN_NS}


def _write_lake(root: Path) -> Lake:
    """Two nights of pool sim-h100 (simulated H100) measuring every call of W's step S
    (torch 2.12.0, then 2.13.0: the gate-up GEMM twice as slow), and a `cpu` pool on the
    second night (a SKU outside the catalog)."""
    from kernels_bench.kernels import kernel_for
    from schemas.tables import CASE_STATS, CASES, RUNS

    cases = {c.case.case_id: c for c in decompose(W, S)}
    lake = Lake(root)
    for dt in NIGHTS:
        for pool, sku, kind in (("sim-h100", H100, "simulated"), ("cpu", "cpu", "cpu")):
            if pool == "cpu" and dt == NIGHTS[0]:
                continue
            run_id = f"{dt}-r-{pool}"
            stats = []
            for cid, call in cases.items():
                c, k = call.case, kernel_for(call.case.kernel)
                ns = KNOWN_NS * (2 if call.op == SLOWER_OP and dt == NIGHTS[1] else 1)
                stats.append({**{col: None for col in CASE_STATS.column_names}, "run_id": run_id, "case_id": cid,
                              "attempt": 1, "family": c.family, "kernel": c.kernel, "backend": c.backend,
                              "dtype": c.dtype, "device_kind": kind, "gpu_sku": sku, "status": "ok",
                              "median_ns": ns, "flops_per_call": k.flops(c), "bytes_per_call": k.bytes(c),
                              "tflops": k.flops(c) / ns / 1e3, "gbps": k.bytes(c) / ns, "stable": True,
                              "energy_per_call_j": ns * 1e-9 * 500.0})
            part = f"dt={dt}/pool={pool}"
            _write(lake.warehouse / "case_stats" / part, stats, CASE_STATS.arrow_schema(with_partitions=False))
            run = {**{col: None for col in RUNS.column_names}, "run_id": run_id, "shard": 0, "attempt": 1,
                   "device_kind": kind, "gpu_sku": sku, "torch_version": TORCH[dt], "suite": "llm-models",
                   "status": "ok", "reason": "nightly"}
            _write(lake.warehouse / "runs" / part, [run], RUNS.arrow_schema(with_partitions=False))
    rows = [{**{col: None for col in CASES.column_names}, "case_id": cid, "family": c.case.family,
             "kernel": c.case.kernel, "backend": c.case.backend, "dtype": c.case.dtype,
             "params": [(k, str(v)) for k, v in c.case.params]} for cid, c in cases.items()]
    _write(lake.warehouse / "cases", rows, CASES.arrow_schema())
    return lake


def _write(folder: Path, rows: list[dict], schema: pa.Schema) -> None:
    """`rows` as one Parquet file (columns the test leaves out are null, even required ones)."""
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([f.with_nullable(True) for f in schema])
    pq.write_table(pa.Table.from_pylist(rows, schema), folder / "part-0.parquet")


def _publish_workloads(lake: Lake, summaries: list[dict]) -> None:
    """perf.workload_projections as the mine's write leaves it (without Spark)."""
    from pipelines.projection.workload_table import workload_rows
    from schemas.tables import WORKLOAD_PROJECTIONS

    frame = workload_rows(summaries)
    folder = lake.warehouse / "workload_projections"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, WORKLOAD_PROJECTIONS.arrow_schema(), preserve_index=False),
                   folder / "part-0.parquet")


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Lake, list[dict]]:
    from pipelines.projection.nightly_workloads import project_nights
    from pipelines.warehouse.frames import Frames

    lake = _write_lake(tmp_path_factory.mktemp("model-report-lake"))
    with Frames(lake) as frames:
        summaries = project_nights(frames, list(NIGHTS), nightly=[(W, S)])
    _publish_workloads(lake, summaries)
    return lake, summaries


# --- the nightly projection ---------------------------------------------------------------

def test_each_night_projects_the_workload_from_the_measurements_up_to_that_night(lake):
    from pipelines.projection.lookup import load_lookup
    from pipelines.projection.model import project_workload
    from pipelines.warehouse.frames import Frames

    lake, summaries = lake
    assert [(s["as_of_dt"], s["target_sku"], s["device_kind"]) for s in summaries] == \
        [(dt, H100, "simulated") for dt in NIGHTS]  # the cpu pool's SKU is not in the catalog: no row
    for s in summaries:
        assert s["step_ns"] == pytest.approx(STEP_NS[s["as_of_dt"]]) and s["measured_pct"] == pytest.approx(100)
        assert s["simulated"] and s["scenario"] == S.label
    with Frames(lake) as frames:
        _, first = project_workload(W, S, load_lookup(frames, H100, dates=[NIGHTS[0]]))
    assert summaries[0]["tokens_per_s"] == pytest.approx(first["tokens_per_s"])


def test_a_night_is_compared_with_the_same_projection_as_of_the_night_before(lake):
    from pipelines.projection.workload_table import night_changes, torch_versions, workload_rows
    import pandas as pd

    _, summaries = lake
    runs = pd.DataFrame([{"dt": dt, "gpu_sku": H100, "device_kind": "simulated", "torch_version": v}
                         for dt, v in TORCH.items()])
    (row,) = night_changes(workload_rows(summaries), NIGHTS[1], torch_versions(runs)).itertuples(index=False)
    assert row.prev_dt == NIGHTS[0] and row.prev_step_ns == pytest.approx(STEP_NS[NIGHTS[0]])
    assert row.change_pct == pytest.approx((STEP_NS[NIGHTS[1]] / STEP_NS[NIGHTS[0]] - 1) * 100)  # +9.9 %
    assert (row.prev_torch, row.torch) == ("2.12.0", "2.13.0")
    first = night_changes(workload_rows(summaries), NIGHTS[0])
    assert len(first) == 1 and first["change_pct"].isna().all()


def test_the_nightly_workloads_file_is_valid_and_a_bad_entry_names_the_file_and_the_scenario():
    from pipelines.projection.nightly_workloads import load_nightly, parse_nightly

    pairs = load_nightly()
    assert {w.name for w, _ in pairs} == {"llama-8b", "llama-70b", "mixtral-8x7b"}
    assert {s.phase for _, s in pairs} == {"prefill", "decode"}
    with pytest.raises(WorkloadError, match=r"n\.yaml: llama-8b\[1\]: unknown keys \['context'\] for prefill"):
        parse_nightly({"llama-8b": [{"phase": "decode", "batch": 1, "context": 64},
                                    {"phase": "prefill", "batch": 1, "context": 64}]}, "n.yaml")
    with pytest.raises(WorkloadError, match=r"n\.yaml: llama-8b\[0\]: scenario for llama-8b: tp 3 does not divide"):
        parse_nightly({"llama-8b": [{"phase": "decode", "batch": 1, "context": 64, "tp": 3}]}, "n.yaml")
    with pytest.raises(WorkloadError, match=r"n\.yaml: no workload preset 'llama-9b'"):
        parse_nightly({"llama-9b": [{"phase": "decode", "batch": 1, "context": 64}]}, "n.yaml")


# --- the nightly report -------------------------------------------------------------------

def _cells(html: str, table_id: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table_id}"[^>]*>.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def test_the_report_shows_the_models_tokens_per_s_and_the_change_against_the_night_before(lake, tmp_path):
    from pipelines.report.nightly import build_nightly

    lake, summaries = lake
    html = build_nightly(lake, NIGHTS[1], out=tmp_path / "r.html", quiet=True).read_text()
    models = html[html.index('<section id="models">'):]
    (row,) = _cells(models, "workload-projections")
    cols = dict(zip(["workload", "scenario", "GPU", "step", "tokens/s", "tokens/s per GPU", "change"], row))
    assert cols["workload"] == "llama-8b" and cols["scenario"] == S.label
    assert cols["GPU"] == f"{H100} simulated"
    assert cols["tokens/s"] == f"{summaries[1]['tokens_per_s']:,.0f}" == f"{2048 / STEP_NS[NIGHTS[1]] * 1e9:,.0f}"
    assert cols["change"] == "+9.9 %" and "2.12.0 → 2.13.0" in row
    headline = re.search(r'<ul id="workload-changes">(.*?)</ul>', models, re.S).group(1)
    assert "9.9 % slower" in headline and "torch 2.12.0 → 2.13.0" in headline and "[SIMULATED data]" in headline
    assert "SIMULATED measurements of H100-SXM5-80GB" in models  # the sources, named
    assert len(re.findall(r'class="step-point"', models)) == 2  # the step time on both nights
    assert "perf.workload_projections" in html[:html.index('<section id="regressions">')]  # provenance


def test_a_lake_without_workload_projections_says_how_they_are_made():
    from pipelines.report.workloads import section

    assert "the nightly mine writes perf.workload_projections" in section(None, NIGHTS[0])


# --- the dashboard --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client(lake):
    from fastapi.testclient import TestClient

    from pipelines.web.app import create_app

    with TestClient(create_app(lake[0]), raise_server_exceptions=False, base_url="http://127.0.0.1",
                    client=("127.0.0.1", 50000)) as c:
        yield c


def test_the_models_page_shows_the_same_figures_and_labels_simulated_data(client, lake):
    _, summaries = lake
    r = client.get("/models")
    assert r.status_code == 200, r.text
    (row,) = _cells(r.text, "workload-projections")
    assert row[:4] == ["llama-8b", S.label, f"{H100} simulated", NIGHTS[1]]
    assert row[5] == f"{summaries[1]['tokens_per_s']:,.0f}" and row[7] == "+9.9 %" and row[8] == NIGHTS[0]
    assert row[9] == "2.12.0 → 2.13.0" and 'id="simulated"' in r.text
    assert "SIMULATED measurements of H100-SXM5-80GB" in r.text
    old = client.get("/models", params={"date": NIGHTS[0], "workload": "llama-8b"})
    (row,) = _cells(old.text, "workload-projections")
    assert row[3] == NIGHTS[0] and row[7] == "first night"


def test_the_models_page_answers_a_bad_or_unknown_workload_with_a_page_that_names_it(client):
    assert client.get("/models", params={"workload": "llama-9b"}).status_code == 404
    bad = client.get("/models", params={"workload": "x'; DROP TABLE runs; --"})
    assert bad.status_code == 400 and "workload" in bad.text
