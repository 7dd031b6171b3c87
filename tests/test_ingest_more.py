"""Ingest attacked a second time (2026-11-27, round 2): nvbench states that repeat a case,
a lake that cannot be written, and the other edges found then. The same promise as
test_ingest_integrity.py (never lose, double or mislabel a row; every file one outcome
and a one-line reason), whose helpers these tests share. pyarrow only: no Spark.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipelines.config.lake import Lake
from test_ingest import nv_state, nvbench_doc, shard_rows, write_shard
from test_ingest_integrity import lake_rows, run


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(tmp_path / "lake")


def landed_table(lake: Lake, kind: str):
    files = sorted((lake.landing / kind).glob("dt=*/pool=*/run_id=*/shard-*.parquet"))
    assert len(files) == 1, files
    return pq.read_table(files[0])


def test_two_nvbench_states_of_one_case_never_mix_their_samples(tmp_path, lake):
    # The second state of the same case (same axes) is set aside as a repeated key; its
    # samples went through wherever their iteration numbers were new (3..5 here) and
    # landed under the first state's result, which claims 3.
    d = tmp_path / "nv"
    d.mkdir()
    np.array([1e-6] * 3, dtype="<f4").tofile(d / "s0.bin")
    np.array([5e-6] * 6, dtype="<f4").tofile(d / "s1.bin")
    (d / "r.json").write_text(json.dumps(nvbench_doc([nv_state("1024", 1e-6, 3, "s0.bin"),
                                                      nv_state("1024", 5e-6, 6, "s1.bin")])))
    report = run([d], lake)
    assert landed_table(lake, "case_results").column("n_samples").to_pylist() == [3]
    assert landed_table(lake, "samples").column("latency_ns").to_pylist() == [1000] * 3
    assert sum(i.rows for i in report.issues if "which was set aside; its samples go with it" in i.reason) == 6

