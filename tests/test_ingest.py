"""`perflake ingest`: harness Parquet and nvbench JSON land in the landing zone, once."""
from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kernels_bench.case import Case
from pipelines.cli.ingest import register
from pipelines.landing.ingest import ingest
from pipelines.config.lake import Lake
from pipelines.config.pools import Pool
from schemas.tables import CASE_RESULTS, RUNS, SAMPLES

NOW = dt.datetime(2032, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
REGISTRY = {"dq-a": Pool("dq-a", "H100-SXM5-80GB", "gpu", 1, "default"),
            "dq-b": Pool("dq-b", "cpu", "cpu", 1, "default")}


# --------------------------------------------------------------------------- builders (shared with test_bad_input)

def case(i: int, kernel: str = "matmul", dtype: str = "fp32") -> Case:
    return Case.make("gemm", kernel, "torch", dtype, m=64 * (i + 1), n=64, k=64)


def shard_rows(run_id: str = "imp-1", *, shard: int = 0, cases: int = 2, samples: int = 5,
               started: dt.datetime = NOW - dt.timedelta(hours=1), kernel: str = "matmul", dtype: str = "fp32"):
    """Rows of one valid harness shard: {"runs": [...], "case_results": [...], "samples": [...]}."""
    cs = [case(i, kernel if i == 0 else "matmul", dtype if i == 0 else "fp32") for i in range(cases)]
    run = {"run_id": run_id, "dag_run_id": "ext", "shard": shard, "num_shards": 1, "attempt": 1,
           "reason": "manual", "suite": "ext", "started_at": started, "finished_at": started + dt.timedelta(minutes=5),
           "host": "elsewhere", "device_kind": "gpu", "device": "cuda:0", "gpu_name": "H100", "gpu_sku": "H100-SXM5-80GB",
           "hardware_fingerprint": "hw1", "software_fingerprint": "sw1", "status": "ok",
           "cases_planned": cases, "cases_ok": cases}
    results = [{"run_id": run_id, "shard": shard, "case_id": c.case_id, "attempt": 1, "suite": "ext",
                "family": c.family, "kernel": c.kernel, "backend": c.backend, "dtype": c.dtype,
                "params": {k: str(v) for k, v in c.params}, "status": "ok", "n_samples": samples} for c in cs]
    smp = [{"run_id": run_id, "case_id": c.case_id, "attempt": 1, "iteration": i, "latency_ns": 1000 + i,
            "throttled": False, "device_kind": "gpu"} for c in cs for i in range(samples)]
    return {"runs": [run], "case_results": results, "samples": smp}


FILENAMES = {"runs": "run.parquet", "case_results": "case_results.parquet", "samples": "samples.parquet"}
TABLES = {"runs": RUNS, "case_results": CASE_RESULTS, "samples": SAMPLES}


def write_shard(directory: Path, rows: dict | None = None, **kw) -> Path:
    """A harness output directory, as `python -m kernels_bench run --out` writes it."""
    rows = rows or shard_rows(**kw)
    directory.mkdir(parents=True, exist_ok=True)
    for kind, data in rows.items():
        schema = TABLES[kind].arrow_schema(with_partitions=False)
        pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in data], schema=schema),
                       directory / FILENAMES[kind])
    return directory


def landed(lake: Lake, kind: str, dt_: str = "2032-03-01") -> pa.Table | None:
    files = sorted((lake.landing / kind / f"dt={dt_}").glob("pool=*/run_id=*/shard-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else None


def run_ingest(paths, lake, **kw):
    kw.setdefault("pool", "dq-a")
    return ingest(paths, lake, registry=REGISTRY, now=NOW, **kw)


@pytest.fixture
def tmp_lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


# --------------------------------------------------------------------------- harness Parquet

def test_a_harness_directory_lands_as_one_shard_with_reason_import(tmp_path, tmp_lake):
    report = run_ingest([write_shard(tmp_path / "out")], tmp_lake)
    assert report.ok, report.issues
    assert report.landed == [{"source": str(tmp_path / "out"), "run_id": "imp-1", "shard": 0, "attempt": 1, "dt": "2032-03-01",
                              "pool": "dq-a", "samples": 10, "case_results": 2, "runs": 1}]
    run_file = tmp_lake.landing_file("runs", "2032-03-01", "dq-a", "imp-1", 0)
    assert pq.read_table(run_file).column("reason").to_pylist() == ["import"]
    assert landed(tmp_lake, "samples").num_rows == 10


def test_single_files_of_one_directory_form_one_shard(tmp_path, tmp_lake):
    d = write_shard(tmp_path / "out")
    report = run_ingest([d / "run.parquet", d / "case_results.parquet", d / "samples.parquet"], tmp_lake)
    assert report.ok and report.landed[0]["samples"] == 10


def test_pool_is_inferred_from_the_runs_gpu_sku_and_date_from_its_start(tmp_path, tmp_lake):
    report = ingest([write_shard(tmp_path / "out")], tmp_lake, registry=REGISTRY, now=NOW)
    assert (report.landed[0]["pool"], report.landed[0]["dt"]) == ("dq-a", "2032-03-01")


def test_date_option_overrides_the_run_date(tmp_path, tmp_lake):
    report = run_ingest([write_shard(tmp_path / "out")], tmp_lake, date="2032-03-02")
    assert report.landed[0]["dt"] == "2032-03-02"
    assert landed(tmp_lake, "runs", "2032-03-02").num_rows == 1


def test_the_manifest_records_each_landed_file_by_sha256(tmp_path, tmp_lake):
    run_ingest([write_shard(tmp_path / "out")], tmp_lake)
    entries = [json.loads(p.read_text()) for p in (tmp_lake.landing / "_ingested").glob("*.json")]
    assert len(entries) == 3 and {e["run_id"] for e in entries} == {"imp-1"}


def test_the_manifest_names_the_bytes_that_were_read_even_if_the_file_changes_during_the_ingest(
        tmp_path, tmp_lake, monkeypatch):
    """A writer still at work (or a second upload over the same name) must not leave a
    manifest entry whose hash is of bytes that never landed."""
    import hashlib

    from pipelines.landing import reading

    src = write_shard(tmp_path / "out")
    before = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in src.glob("*.parquet")}
    read = reading.read_member  # the ingest's reading of one member file

    def read_then_rewrite(shard, path, kind):
        why = read(shard, path, kind)
        path.write_bytes(path.read_bytes() + b"appended later")  # the file changes once it was read
        return why

    monkeypatch.setattr(reading, "read_member", read_then_rewrite)
    assert run_ingest([src], tmp_lake).ok
    entries = [json.loads(p.read_text()) for p in (tmp_lake.landing / "_ingested").glob("*.json")]
    assert {Path(e["source"]).name: e["sha256"] for e in entries} == before


# --------------------------------------------------------------------------- nvbench JSON

def nvbench_doc(states: list[dict]) -> dict:
    return {"meta": {"version": {"nvbench": {"string": "0.1.0", "git_sha": "abc"}}},
            "devices": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "number_of_sms": 132}],
            "benchmarks": [{"name": "copy_sweep", "index": 0, "devices": [0], "states": states}]}


def nv_state(name: str, mean_s: float, n: int, samples_file: str | None = None, size: int | None = None) -> dict:
    def summary(tag, **data):
        return {"tag": tag, "name": tag, "data": [{"name": k, "type": "x", "value": str(v)} for k, v in data.items()]}

    summaries = [summary("nv/cold/sample_size", value=n), summary("nv/cold/time/gpu/mean", value=mean_s),
                 summary("nv/cold/time/gpu/stdev/relative", value=0.01)]
    if samples_file:
        summaries.append(summary("nv/json/bin:nv/cold/sample_times", filename=samples_file, size=size or n))
    return {"name": f"Device=0 Elements={name}", "device": 0, "is_skipped": False, "summaries": summaries,
            "axis_values": [{"name": "Elements", "type": "int64", "value": name},
                            {"name": "T", "type": "type", "value": "F32"}]}


def test_nvbench_json_with_sample_times_lands_samples_and_summary_only_states_land_as_results(tmp_path, tmp_lake):
    d = tmp_path / "nv"
    d.mkdir()
    np.array([1e-6, 1.1e-6, 1.2e-6], dtype="<f4").tofile(d / "s0.bin")
    (d / "result.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1.1e-6, 3, "s0.bin"),
                                                           nv_state("2048", 2e-6, 500)])))
    report = run_ingest([d], tmp_lake)
    assert report.ok, report.issues
    assert report.landed[0]["samples"] == 3 and report.landed[0]["case_results"] == 2
    results = landed(tmp_lake, "case_results").to_pylist()
    summary_only = next(r for r in results if r["n_samples"] == 500)
    assert "raw samples not available" in summary_only["stop_reason"]
    assert {r["dtype"] for r in results} == {"fp32"}
    lat = landed(tmp_lake, "samples").column("latency_ns").to_pylist()
    assert lat == [1000, 1100, 1200]
    assert landed(tmp_lake, "runs").column("reason").to_pylist() == ["import"]


def test_an_nvbench_sample_file_that_is_missing_is_reported_and_the_state_lands_without_samples(tmp_path, tmp_lake):
    (tmp_path / "r.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1e-6, 3, "gone.bin")])))
    report = run_ingest([tmp_path / "r.json"], tmp_lake)
    assert any("gone.bin is missing" in i.reason for i in report.issues)
    assert report.landed[0]["case_results"] == 1 and report.landed[0]["samples"] == 0


# --------------------------------------------------------------------------- the CLI and the mining job

def test_register_adds_the_ingest_subcommand():
    ap = argparse.ArgumentParser()
    register(ap.add_subparsers(dest="cmd"))
    args = ap.parse_args(["ingest", "a", "b", "--pool", "dq-a", "--date", "2032-03-01"])
    assert (args.paths, args.pool, args.date, args.func.__name__) == (["a", "b"], "dq-a", "2032-03-01", "_cmd_ingest")


def test_ingested_files_pass_the_mining_jobs_file_checks_and_read_in_spark(tmp_path, lake, spark):
    # The whole mining job takes about a minute; its inputs (file checks, Spark read
    # with dt and pool from the path) are what ingest must satisfy.
    from pipelines.landing.checks import split_files
    from jobs.mine import landed_files, read_landed

    report = ingest([write_shard(tmp_path / "out", run_id="imp-mine")], lake, registry=REGISTRY, pool="dq-a",
                    date="2032-03-03", now=NOW)
    assert report.ok, report.issues
    for kind, table in TABLES.items():
        good, bad = split_files(landed_files(lake, kind, "2032-03-03", ["dq-a"]), table)
        assert bad == [] and len(good) == 1
        df = read_landed(spark, good, table)
        assert df.select("dt", "pool").distinct().collect() == [("2032-03-03", "dq-a")]
    assert read_landed(spark, landed_files(lake, "samples", "2032-03-03", ["dq-a"]), SAMPLES).count() == 10


def test_perflake_ingest_is_reachable_from_the_cli_and_its_help_has_examples(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    assert "examples:\n  perflake ingest" in capsys.readouterr().out
    (tmp_path / "pools.yaml").write_text("dq-a: {sku: H100-SXM5-80GB, device_kind: gpu, slots: 1}\n")
    monkeypatch.setenv("PERFLAKE_POOLS", str(tmp_path / "pools.yaml"))
    monkeypatch.setenv("PERFLAKE_HOME", str(tmp_path / "lake"))
    shard = write_shard(tmp_path / "out", started=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
    assert main(["ingest", str(shard), "--pool", "dq-a", "--date", "2032-03-04"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["issues"] == [] and report["landed"][0]["samples"] == 10
    # the counts, then what publishes the landed rows
    assert err.splitlines()[-3:] == ["3 landed, 0 skipped, 0 quarantined, 0 conflict; exit 0", "next:",
                                     "  perflake mine --date 2032-03-04 --pool dq-a   publishes what landed (the perf "
                                     "tables show it once mined)"]
    assert landed(Lake(tmp_path / "lake"), "samples", "2032-03-04").num_rows == 10
