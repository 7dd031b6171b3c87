"""The harness's YAML fallback (for workers without PyYAML) reads every shipped suite,
the hardware catalog and the pool registry exactly as PyYAML does, and says where it
cannot."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernels_bench.yaml_subset import YamlSubsetError, _Parser, scalar

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted([*(ROOT / "kernels_bench" / "suites").glob("*.yaml"), ROOT / "kernels_bench" / "hardware.yaml",
                  ROOT / "pipelines" / "pools.yaml"])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_file_parses_as_pyyaml_does(path):
    text = path.read_text()
    assert _Parser(text, str(path)).document() == yaml.safe_load(text)


@pytest.mark.parametrize("token", ["12", "-3", "1.5", ".5", "1.0e-4", "1e-4", "1.5e3", "true", "False", "null",
                                   "~", "'07'", '"x: y"', "sdpa-flash", "H100-SXM5-80GB", "2026-11-22x"])
def test_scalars_resolve_as_pyyaml_resolves_them(token):
    assert scalar(token) == yaml.safe_load(f"v: {token}")["v"]


def test_nested_blocks_and_flow_collections():
    text = "a:\n  - x: 1\n    y: [1, {b: 2, c: [3, 4]}]\n  -\n    - z\nd:\n- e\n"
    assert _Parser(text, "t").document() == yaml.safe_load(text)


def test_an_unsupported_construct_names_the_file_and_line():
    with pytest.raises(YamlSubsetError, match=r"t.yaml:2: expected 'key: value'"):
        _Parser("a: 1\njust text\n", "t.yaml").document()


def test_the_harness_runs_a_suite_on_a_worker_with_only_torch_and_pyarrow(tmp_path):
    import subprocess
    import sys

    import pyarrow.parquet as pq

    blocked = ("yaml", "numpy", "pandas", "scipy", "pyspark", "duckdb", "great_expectations", "airflow")
    code = (f"import sys, runpy\nfor m in {blocked!r}: sys.modules[m] = None\n"
            f"sys.argv = ['kernels_bench', 'run', '--suite', 'cpu-smoke', '--kernel', 'copy', '--device', 'cpu', "
            f"'--out', {str(tmp_path)!r}]\nrunpy.run_module('kernels_bench', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    results = pq.read_table(tmp_path / "case_results.parquet").to_pylist()
    assert [(r["kernel"], r["status"]) for r in results] == [("copy", "ok")]
