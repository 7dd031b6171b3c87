"""The layers of the codebase (docs/layout.md): every import, at module top or inside a
function, goes to a lower layer or stays inside its own package. A test that fails on an
upward import, so the layering cannot erode unnoticed."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A package may import from its own package and from any lower layer;
# packages on one line are peers and do not import each other.
LAYERS = [
    ["schemas"],
    ["kernels_bench"],
    ["pipelines.config"],
    ["pipelines.changepoint", "pipelines.warehouse", "pipelines.landing"],
    ["pipelines.sweep", "pipelines.mining", "pipelines.query"],
    ["pipelines.triage", "pipelines.projection"],
    ["pipelines.report"],
    ["jobs"],
    ["pipelines.orchestration"],
    ["pipelines.web", "pipelines.deploy"],
    ["pipelines.cli"],
    ["dags"],
]
RANK = {pkg: i for i, line in enumerate(LAYERS) for pkg in line}
# The DAG folder is on Airflow's path as a top-level folder: its modules import each other bare.
DAG_MODULES = {p.stem for p in (ROOT / "dags").glob("*.py")}


def package_of(module: str) -> str | None:
    """The layered package a dotted module name belongs to (None: third-party or stdlib)."""
    parts = module.split(".")
    if parts[0] in DAG_MODULES:
        return "dags"
    for n in (2, 1):
        name = ".".join(parts[:n])
        if name in RANK:
            return name
    return None


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, including those inside functions."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pipelines":  # `from pipelines import x` names a package
                out += [(node.lineno, f"pipelines.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
    return out


def source_files():
    for top in ("kernels_bench", "schemas", "pipelines", "jobs", "dags"):
        yield from sorted((ROOT / top).rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def violations() -> list[str]:
    found = []
    for path in source_files():
        if module_name(path) == "pipelines":  # the namespace's own (empty) __init__
            continue
        own = package_of(module_name(path))
        if own is None:
            found.append(f"{path.relative_to(ROOT)}: not in any layer (add its package to LAYERS)")
            continue
        for line, target in imports(path):
            dep = package_of(target)
            if dep is None or dep == own:
                continue
            if RANK[dep] >= RANK[own]:
                found.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {target} ({dep}): "
                             f"{'a peer' if RANK[dep] == RANK[own] else 'an upper layer'}")
    return found


def test_every_import_goes_down_the_layers():
    assert violations() == []


def test_the_layer_check_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from pipelines.cli import main\n")
    assert imports(bad) == [(2, "pipelines.cli")]
    assert RANK[package_of("pipelines.cli")] > RANK[package_of("pipelines.mining.regressions")]


@pytest.mark.parametrize("top", ["pipelines"])
def test_the_library_has_no_loose_modules(top):
    # Every module lives in a domain package: the top of pipelines/ holds packages only.
    assert sorted(p.name for p in (ROOT / top).glob("*.py")) == ["__init__.py"]


def test_the_command_line_starts_without_spark_pandas_or_scipy():
    # Every `perflake` command builds the whole parser first; a heavy import there (pandas,
    # scipy and pyspark took 3-4 s on two cores) is paid by each command, even `--help`.
    code = ("import sys; from pipelines.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('pyspark', 'pandas', 'scipy', 'duckdb', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
