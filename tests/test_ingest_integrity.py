"""Ingest never loses, doubles or mislabels a landed row, and names each file's outcome (#25).

Every test counts the landed rows before and after. pyarrow only: no Spark.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.config.lake import Lake
from pipelines.config.pools import Pool
from pipelines.landing.files import LandingRefused, land_shard
from pipelines.landing.ingest import ingest
from test_ingest import NOW, nv_state, nvbench_doc, shard_rows, write_shard

REGISTRY = {"dq-a": Pool("dq-a", "H100-SXM5-80GB", "gpu", 1, "default"),
            "dq-a2": Pool("dq-a2", "H100-SXM5-80GB", "gpu", 1, "default"),
            "dq-c": Pool("dq-c", "A100-SXM4-80GB", "gpu", 1, "default"),
            "sim-a": Pool("sim-a", "H100-SXM5-80GB", "simulated", 1, "default")}


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def run(paths, lake, **kw):
    kw.setdefault("pool", "dq-a")
    return ingest(paths if isinstance(paths, list) else [paths], lake, registry=REGISTRY, now=NOW, **kw)


def lake_rows(lake: Lake, kind: str) -> dict[tuple, int]:
    """{(dt, pool, run_id, shard): rows} of every landed file of `kind`."""
    out = {}
    for f in (lake.landing / kind).glob("dt=*/pool=*/run_id=*/shard-*.parquet"):
        key = (f.parents[2].name[3:], f.parents[1].name[5:], f.parents[0].name[7:], int(f.stem[6:]))
        out[key] = pq.ParquetFile(f).metadata.num_rows
    return out


def outcomes(report) -> dict[str, str]:
    return {Path(f.path).name if Path(f.path).parent.name != "" else f.path: f.outcome for f in report.files}


def by_path(report) -> dict[str, str]:
    return {f.path: f.outcome for f in report.files}


# --------------------------------------------------------------------------- 1. never replaced by less

def test_a_re_export_with_a_short_samples_file_is_refused_and_the_landed_copy_keeps_its_rows(tmp_path, lake):
    assert run(write_shard(tmp_path / "a", run_id="r1", samples=600), lake).ok
    before = lake_rows(lake, "samples")
    rows = shard_rows("r1", samples=600)
    rows["samples"] = rows["samples"][:100]  # cut short, still valid Parquet
    report = run(write_shard(tmp_path / "b", rows), lake)
    assert not report.ok and set(by_path(report).values()) == {"quarantined"}
    assert "claims n_samples 600" in report.issues[0].reason and "(field n_samples)" in report.issues[0].reason
    assert lake_rows(lake, "samples") == before == {("2032-03-01", "dq-a", "r1", 0): 1200}


def test_a_truncated_re_upload_in_the_same_call_as_the_good_copy_leaves_the_good_copy(tmp_path, lake):
    good = write_shard(tmp_path / "good", run_id="r1", samples=50)
    bad = write_shard(tmp_path / "bad", run_id="r1", samples=50)
    data = (bad / "samples.parquet").read_bytes()
    (bad / "samples.parquet").write_bytes(data[:-200])
    report = run([bad, good], lake)
    assert by_path(report)[str(good / "samples.parquet")] == "landed"
    assert by_path(report)[str(bad / "samples.parquet")] == "quarantined"
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 100}


def test_the_same_attempt_with_other_rows_is_a_conflict_kept_aside_naming_both(tmp_path, lake):
    run(write_shard(tmp_path / "a", run_id="r1"), lake)
    rows = shard_rows("r1")
    rows["samples"][0]["latency_ns"] = 5_000
    report = run(write_shard(tmp_path / "b", rows), lake)
    assert not report.ok and set(by_path(report).values()) == {"conflict"}
    c = report.conflicts[0]
    assert c["source"] == str(tmp_path / "b") and "run_id=r1" in c["landed"][0]
    assert pq.read_table(Path(c["kept"]) / "samples.parquet").column("latency_ns")[0].as_py() == 5_000
    assert pq.read_table(lake.landing_file("samples", "2032-03-01", "dq-a", "r1", 0)).column(
        "latency_ns")[0].as_py() == 1000
    # the documented resolution: delete the landed shard's files, ingest the kept folder
    for kind in ("samples", "case_results", "runs"):
        lake.landing_file(kind, "2032-03-01", "dq-a", "r1", 0).unlink()
    resolved = run(Path(c["kept"]), lake)
    assert resolved.ok and len(resolved.files) == 3, resolved.issues  # conflict.json is a note, not data
    assert pq.read_table(lake.landing_file("samples", "2032-03-01", "dq-a", "r1", 0)).column(
        "latency_ns")[0].as_py() == 5_000


def test_a_fuller_copy_of_the_same_attempt_completes_a_landed_subset(tmp_path, lake):
    # A shard whose samples were partly quarantined (an impossible value) lands the rest;
    # the corrected copy later carries every landed row and more: it completes the landing.
    rows = shard_rows("r1")
    rows["samples"][3]["latency_ns"] = -1
    run(write_shard(tmp_path / "a", rows), lake)
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 9}
    report = run(write_shard(tmp_path / "b", run_id="r1"), lake)
    assert report.ok and lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 10}
    assert any("completes the copy" in n for n in report.notices)


def test_a_later_attempt_replaces_the_earlier_where_it_landed_and_an_older_one_is_skipped(tmp_path, lake):
    run(write_shard(tmp_path / "a1", run_id="r1", samples=8), lake)
    rows2 = shard_rows("r1", samples=3)
    for kind in rows2.values():
        for r in kind:
            r["attempt"] = 2
    report = run(write_shard(tmp_path / "a2", rows2), lake, date="2032-03-05")
    assert report.ok and report.landed[0]["dt"] == "2032-03-01"  # where attempt 1 was
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 6}
    late = run(tmp_path / "a1", lake)
    assert set(by_path(late).values()) == {"skipped"} and "superseded" in late.files[0].reason
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 6}


# --------------------------------------------------------------------------- 2. identity by content

@pytest.mark.parametrize("rewrite", ["compression", "pandas", "renamed"])
def test_the_same_rows_under_another_date_name_or_encoding_are_skipped_with_a_notice(tmp_path, lake, rewrite):
    src = write_shard(tmp_path / "a", run_id="r1")
    assert run(src, lake).ok
    copy = tmp_path / "deep" / "export" / "b"
    copy.mkdir(parents=True)
    for f in src.iterdir():
        t = pq.read_table(f)
        if rewrite == "compression":
            pq.write_table(t, copy / f.name, compression="zstd", row_group_size=3)
        elif rewrite == "pandas":
            pq.write_table(pa.Table.from_pandas(t.to_pandas(), preserve_index=True), copy / f.name)
        else:
            pq.write_table(t, copy / {"run.parquet": "runs.parquet"}.get(f.name, f.name))
    report = run(tmp_path / "deep", lake, date="2032-03-09")
    assert report.ok, report.issues
    assert set(by_path(report).values()) == {"skipped"} and len(report.files) == 3
    assert "already landed" in report.files[0].reason and "dt=2032-03-01" in report.files[0].reason
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "r1", 0): 10}


def test_an_nvbench_json_re_encoded_and_renamed_is_the_same_run(tmp_path, lake):
    d = tmp_path / "nv"
    d.mkdir()
    np.array([1e-6, 1.1e-6], dtype="<f4").tofile(d / "s0.bin")
    doc = nvbench_doc([nv_state("1024", 1.05e-6, 2, "s0.bin")])
    (d / "result.json").write_text(json.dumps(doc))
    first = run(d, lake)
    assert first.ok and by_path(first)[str(d / "s0.bin")] == "landed"
    e = tmp_path / "again"
    e.mkdir()
    np.array([1e-6, 1.1e-6], dtype="<f4").tofile(e / "times.bin")
    doc["benchmarks"][0]["states"][0]["summaries"][-1]["data"][0]["value"] = "times.bin"
    (e / "other-name.json").write_text(json.dumps(doc, indent=4))
    second = ingest([e], lake, registry=REGISTRY, pool="dq-a", now=NOW + dt.timedelta(days=2))
    assert second.ok and set(by_path(second).values()) == {"skipped"}
    assert sum(lake_rows(lake, "samples").values()) == 2


# --------------------------------------------------------------------------- 3. hardware checked

@pytest.mark.parametrize("pool, message", [("dq-c", "sku 'H100-SXM5-80GB', pool's sku 'A100-SXM4-80GB'"),
                                           ("sim-a", "device_kind 'gpu', pool's 'simulated'")])
def test_a_pool_of_other_hardware_is_refused_naming_both(tmp_path, lake, pool, message):
    report = run(write_shard(tmp_path / "a", run_id="r1"), lake, pool=pool)
    assert not report.ok and message in report.issues[0].reason
    assert set(by_path(report).values()) == {"quarantined"} and lake_rows(lake, "samples") == {}


def test_force_pool_lands_a_mismatch_and_logs_the_override(tmp_path, lake):
    report = run(write_shard(tmp_path / "a", run_id="r1"), lake, pool="dq-c", force_pool=True)
    assert report.ok and any("OVERRIDE (--force-pool)" in n for n in report.notices)
    manifest = [json.loads(p.read_text()) for p in (lake.landing / "_ingested").glob("*.json")]
    assert all("pool's sku 'A100-SXM4-80GB'" in m["override"] for m in manifest) and len(manifest) == 3
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-c", "r1", 0): 10}


def test_a_shard_landed_in_one_pool_is_not_landed_again_in_another_pool_of_the_same_gpu(tmp_path, lake):
    run(write_shard(tmp_path / "a", run_id="r1"), lake)
    report = run(tmp_path / "a", lake, pool="dq-a2")
    assert set(by_path(report).values()) == {"skipped"}
    assert list(lake_rows(lake, "runs")) == [("2032-03-01", "dq-a", "r1", 0)]


# --------------------------------------------------------------------------- 4. batches

def test_shard_folders_are_found_at_any_depth_beside_junk_and_each_file_has_one_outcome(tmp_path, lake):
    out = tmp_path / "out"
    for i in range(3):
        write_shard(out / f"night-{i}" / f"shard-{i}", run_id=f"r{i}", shard=i)
    (out / "README.txt").write_text("results of the night\n")
    (out / "night-0" / "notes.json").write_text('{"who": "me"}')
    report = run(out, lake)
    files = by_path(report)
    assert len(files) == 11 and report.counts == {"landed": 9, "skipped": 0, "quarantined": 2, "conflict": 0}
    assert files[str(out / "README.txt")] == "quarantined" and not report.ok
    assert "not nvbench output" in next(f.reason for f in report.files if f.path.endswith("notes.json"))
    assert sum(lake_rows(lake, "samples").values()) == 30


def test_a_call_that_finds_nothing_says_so_and_is_not_ok(tmp_path, lake):
    (tmp_path / "empty").mkdir()
    report = run(tmp_path / "empty", lake)
    assert not report.ok and "nothing to ingest" in report.issues[0].reason


def test_the_cli_exits_1_on_any_refusal_lists_every_file_and_never_prints_a_traceback(tmp_path, monkeypatch,
                                                                                        capsys):
    from pipelines.cli import main

    (tmp_path / "pools.yaml").write_text("dq-a: {sku: H100-SXM5-80GB, device_kind: gpu, slots: 1}\n")
    monkeypatch.setenv("PERFLAKE_POOLS", str(tmp_path / "pools.yaml"))
    monkeypatch.setenv("PERFLAKE_HOME", str(tmp_path / "lake"))
    good = write_shard(tmp_path / "in" / "good", started=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
    (tmp_path / "in" / "bad.json").write_text(json.dumps({"benchmarks": [{"name": "x", "states": [
        {"device": "cuda:0", "summaries": "nope"}]}]}))
    assert main(["ingest", str(tmp_path / "in"), "--pool", "dq-a"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["counts"] == {"landed": 3, "skipped": 0, "quarantined": 1, "conflict": 0}
    bad = next(f for f in report["files"] if f["path"].endswith("bad.json"))
    assert "benchmarks[0].states[0].device is 'cuda:0'" in bad["reason"]
    assert "Traceback" not in out + err and str(good / "samples.parquet") in err
    assert main(["ingest", str(tmp_path / "nowhere")]) == 1


# --------------------------------------------------------------------------- 5. nvbench by structure

@pytest.mark.parametrize("doc, expected", [
    ({"context": {"date": "x"}, "benchmarks": [{"name": "BM_x", "iterations": 10, "real_time": 1.0}]},
     "not nvbench output: this is Google Benchmark JSON"),
    ([1, 2, 3], "not nvbench output"),
    ({"benchmarks": [{"name": "x", "states": [{"device": 0, "summaries": [{"tag": "t", "data": "oops"}]}]}]},
     "benchmarks[0].states[0].summaries[].data is not a list of objects"),
    ({"benchmarks": [{"name": "x", "states": ["state"]}]}, "benchmarks[0].states[0] is str"),
    ({"benchmarks": []}, "no benchmarks"),
], ids=["google-benchmark", "array", "data-string", "state-string", "empty"])
def test_json_that_is_not_nvbench_or_is_malformed_is_refused_naming_where(tmp_path, lake, doc, expected):
    (tmp_path / "r.json").write_text(json.dumps(doc))
    report = run([tmp_path / "r.json", write_shard(tmp_path / "good", run_id="g")], lake)
    assert expected in by_reason(report, "r.json")
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "g", 0): 10}


def by_reason(report, name: str) -> str:
    return next(f.reason for f in report.files if f.path.endswith(name))


# --------------------------------------------------------------------------- shared with test_ingest_rows.py

def pandas_style(d: Path) -> None:
    """Rewrite a shard as pandas would: all-null columns typed null, maps as lists of
    pairs, timestamps in ns without a zone, latencies as integer strings."""
    for f in d.iterdir():
        t = pq.read_table(f)
        cols = {}
        for name in t.column_names:
            c = t.column(name)
            if c.null_count == len(c):
                c = pa.nulls(len(c))
            elif pa.types.is_map(c.type):
                c = pa.array([[list(p) for p in v] for v in c.to_pylist()], pa.list_(pa.list_(pa.string())))
            elif pa.types.is_timestamp(c.type):
                c = c.cast(pa.timestamp("ns"))
            elif name == "latency_ns":
                c = pa.array([str(v) for v in c.to_pylist()])
            cols[name] = c
        pq.write_table(pa.table(cols), f)


# --------------------------------------------------------------------------- the pipeline's own landing

def staged(d: Path, run_id="p1", attempt=1, samples=6) -> Path:
    rows = shard_rows(run_id, samples=samples)
    for kind in rows.values():
        for r in kind:
            r["attempt"] = attempt
    return write_shard(d, rows)


def test_land_shard_retry_replaces_its_own_attempt_but_never_with_less_or_older(tmp_path, lake):
    kw = dict(dt="2032-03-01", pool="dq-a", run_id="p1", shard=0)
    assert land_shard(staged(tmp_path / "a1"), lake, **kw)["samples"] == 12
    assert land_shard(staged(tmp_path / "a1b"), lake, **kw)["samples"] == 12  # the same attempt again
    with pytest.raises(LandingRefused, match="holds fewer samples rows"):
        land_shard(staged(tmp_path / "short", samples=2), lake, **kw)
    assert land_shard(staged(tmp_path / "a2", attempt=2, samples=2), lake, **kw)["samples"] == 4
    with pytest.raises(LandingRefused, match="is an older attempt"):
        land_shard(staged(tmp_path / "late1"), lake, **kw)
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "p1", 0): 4}


def test_land_shard_refuses_a_staged_file_that_does_not_read_whole(tmp_path, lake):
    kw = dict(dt="2032-03-01", pool="dq-a", run_id="p1", shard=0)
    land_shard(staged(tmp_path / "a1"), lake, **kw)
    bad = staged(tmp_path / "bad", attempt=2)
    data = bytearray((bad / "samples.parquet").read_bytes())
    data[8:40] = b"\x00" * 32  # a data page garbled, footer intact
    (bad / "samples.parquet").write_bytes(bytes(data))
    with pytest.raises(LandingRefused, match="not a readable Parquet file"):
        land_shard(bad, lake, **kw)
    assert lake_rows(lake, "samples") == {("2032-03-01", "dq-a", "p1", 0): 12}


# --------------------------------------------------------------------------- property: any sequence

CORRUPTIONS = ("truncate", "zero", "garbage", "drop_run", "short_samples", "other_run_id", "flip_footer",
               "csv_named_parquet", "schema_drift")


def corrupt(d: Path, how: str) -> None:
    f = d / "samples.parquet"
    if how == "truncate":
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    elif how == "zero":
        f.write_bytes(b"")
    elif how == "garbage":
        f.write_bytes(b"PAR1" + bytes(range(256)) * 3 + b"PAR1")
    elif how == "drop_run":
        (d / "run.parquet").unlink()
    elif how == "short_samples":
        pq.write_table(pq.read_table(f).slice(0, 3), f)
    elif how == "other_run_id":
        t = pq.read_table(d / "case_results.parquet")
        pq.write_table(t.set_column(0, t.schema.field(0), pa.array(["zz"] * t.num_rows)), d / "case_results.parquet")
    elif how == "flip_footer":
        data = bytearray(f.read_bytes())
        data[-30:-10] = b"\x7f" * 20
        f.write_bytes(bytes(data))
    elif how == "csv_named_parquet":
        f.write_text("run_id,latency_ns\nr,1\n")
    elif how == "schema_drift":
        pq.write_table(pq.read_table(f).drop(["iteration"]), f)


@pytest.mark.parametrize("seed", [int(s) for s in os.environ.get("INGEST_SEEDS", "1,2,3").split(",")])
def test_any_sequence_of_uploads_leaves_one_best_complete_copy_of_each_shard(tmp_path, seed):
    """Good uploads, corrupt copies, re-exports under other dates and encodings, wrong
    pools, later attempts and stale retries in a random order: after every step each
    shard is landed at most once, under a pool of its own hardware, whole, and holds
    exactly the rows of the best (highest) attempt uploaded whole so far."""
    rng = random.Random(seed)
    lake = Lake(tmp_path / "lake")
    shards = [("p-a", 0), ("p-a", 1), ("p-b", 0)]
    best: dict[tuple, int] = {}  # (run_id, shard) -> highest attempt uploaded whole
    landed_before: dict[tuple, int] = {}

    def rows_of(rid, sh, attempt):
        rows = shard_rows(rid, shard=sh, samples=2 + attempt, cases=2)
        for kind in rows.values():
            for r in kind:
                r["attempt"] = attempt
        return rows

    whole: list[tuple] = []  # (run_id, shard, attempt) of every upload whose files are whole
    for step in range(24):
        rid, sh = rng.choice(shards)
        attempt = rng.choice([1, 1, 2, 3])
        d = tmp_path / "up" / f"s{step}" / rng.choice(["", "nested/deeper"]) / "out"
        write_shard(d, rows_of(rid, sh, attempt))
        action = rng.choice(["good", "good", "reexport", "corrupt", "corrupt", "wrong_pool", "retry_all"])
        kw = {"pool": "dq-a", "date": rng.choice([None, "2032-02-27", "2032-02-28"])}
        target = d
        if action == "reexport":
            pandas_style(d)
        elif action == "corrupt":
            corrupt(d, rng.choice(CORRUPTIONS))
        elif action == "wrong_pool":
            kw["pool"] = rng.choice(["dq-c", "sim-a"])
        elif action == "retry_all":  # everything uploaded so far, again, under the right pool
            target = tmp_path / "up"
        report = ingest([target], lake, registry=REGISTRY, now=NOW, **kw)
        assert report.files, f"step {step}: no outcomes"
        assert all(f.outcome in ("landed", "skipped", "quarantined", "conflict") for f in report.files)
        if action != "corrupt":
            whole.append((rid, sh, attempt))
        landed_now = whole if action == "retry_all" else whole[-1:] if action in ("good", "reexport") else []
        for r, s_, a in landed_now:
            best[(r, s_)] = max(best.get((r, s_), 0), a)
        check_lake(lake, best, landed_before, step, action)


def check_lake(lake: Lake, best: dict, landed_before: dict, step: int, action: str) -> None:
    where: dict[tuple, list] = {}
    for kind in ("runs", "case_results", "samples"):
        for f in (lake.landing / kind).glob("dt=*/pool=*/run_id=*/shard-*.parquet"):
            key = (f.parents[0].name[7:], int(f.stem[6:]))
            where.setdefault(key, []).append((f.parents[2].name, f.parents[1].name, kind))
    assert set(where) <= set(best), f"step {step} ({action}): a shard landed from a bad upload: {where}"
    for (rid, sh), attempt in best.items():
        locs = where.get((rid, sh), [])
        assert len({loc[:2] for loc in locs}) == 1 and len(locs) == 3, f"step {step}: {rid}/{sh} at {locs}"
        dt_dir, pool_dir, _ = locs[0]
        assert pool_dir == "pool=dq-a", f"step {step}: {rid}/{sh} mislabelled {pool_dir}"
        files = {k: lake.landing_file(k, dt_dir[3:], "dq-a", rid, sh) for k in ("runs", "case_results", "samples")}
        samples = pq.read_table(files["samples"])
        assert set(samples.column("attempt").to_pylist()) == {attempt}, f"step {step}: not the best attempt"
        assert samples.num_rows == 2 * (2 + attempt), f"step {step}: {rid}/{sh} holds {samples.num_rows} samples"
        keys = {(r["case_id"], r["iteration"]) for r in samples.to_pylist()}
        assert len(keys) == samples.num_rows
        assert pq.read_table(files["runs"]).column("attempt").to_pylist() == [attempt]
        assert pq.read_table(files["case_results"]).num_rows == 2
        assert landed_before.get((rid, sh), (0, 0)) <= (attempt, samples.num_rows), "a landing went backwards"
        landed_before[(rid, sh)] = (attempt, samples.num_rows)
    shutil.rmtree(lake.landing / "_conflicts", ignore_errors=True)  # a person resolved them


def test_a_shard_s_rows_compare_alike_in_any_order_and_unlike_on_one_changed_value():
    """identity.compare decides the usual re-ingest in Arrow (sorted, then compared) and
    falls back to row-by-row only where that cannot tell: both must say the same."""
    from pipelines.landing.identity import _same_rows, compare

    run = pa.table({"run_id": ["r"], "attempt": [1], "reason": ["nightly"]})
    samples = pa.table({"run_id": ["r"] * 4, "case_id": ["a", "a", "b", "b"], "attempt": [1] * 4,
                        "iteration": [0, 1, 0, 1], "latency_ns": [10, 11, 20, 21]})
    results = pa.table({"run_id": ["r", "r"], "case_id": ["a", "b"], "attempt": [1, 1],
                        "params": pa.array([[("m", "1"), ("n", "2")], [("m", "3")]], pa.map_(pa.string(), pa.string()))})
    landed = {"runs": run, "samples": samples, "case_results": results}
    shuffled = {"runs": run, "samples": samples.take([3, 1, 2, 0]), "case_results": results.take([1, 0]),
                # another writer's types and map order: the same rows still
                }
    shuffled["samples"] = shuffled["samples"].cast(pa.schema([f.with_type(pa.int32()) if f.name == "iteration" else f
                                                              for f in samples.schema]))
    reordered_map = pa.array([[("n", "2"), ("m", "1")], [("m", "3")]], pa.map_(pa.string(), pa.string()))
    assert compare(shuffled, landed) == "same"
    assert _same_rows(shuffled["samples"], samples) and _same_rows(shuffled["case_results"], results)  # in Arrow
    assert compare({**landed, "case_results": results.set_column(3, "params", reordered_map)}, landed) == "same"
    changed = samples.set_column(4, "latency_ns", pa.array([10, 11, 20, 22]))
    assert compare({**landed, "samples": changed}, landed) == "other"
    assert compare({**landed, "samples": samples.slice(0, 3)}, landed) == "less"
    more = pa.concat_tables([samples, samples.slice(0, 1).set_column(3, "iteration", pa.array([2]))])
    assert compare({**landed, "samples": more}, landed) == "more"

