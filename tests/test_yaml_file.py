"""The harness reads its YAML with PyYAML; a broken file is named with its line."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernels_bench.yaml_file import load_yaml

SHIPPED = sorted(Path(__file__).resolve().parent.parent.glob("**/*.yaml"))


@pytest.mark.parametrize("path", [p for p in SHIPPED if ".venv" not in p.parts], ids=lambda p: p.name)
def test_every_shipped_yaml_file_loads(path):
    assert load_yaml(path) is not None


def test_a_syntax_error_names_the_file_and_the_line(tmp_path):
    bad = tmp_path / "suite.yaml"
    bad.write_text("groups:\n  - kernel: gemm\n    dtypes: [fp32, bf16\n")
    with pytest.raises(ValueError, match=r"suite\.yaml, line \d+, column \d+: not valid YAML"):
        load_yaml(bad)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_yaml(tmp_path / "nope.yaml")
