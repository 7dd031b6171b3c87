"""DAG integrity: every DAG file imports cleanly, fast, without heavy libraries, and
every task carries retries, an execution timeout and tags."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parent.parent / "dags"
HEAVY = {"torch", "pyspark", "pandas", "great_expectations", "duckdb", "numpy"}
DAG_FILES = sorted(DAGS.glob("*.py"))


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    # The DAG processor puts the DAGs folder on sys.path; so does this test.
    if str(DAGS) not in sys.path:
        sys.path.insert(0, str(DAGS))

    return DagBag(dag_folder=str(DAGS))


def test_dag_files_import_without_errors(dagbag):
    assert dagbag.import_errors == {}
    assert "nightly_sweep" in dagbag.dags


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_dag_file_has_no_heavy_import_at_module_top(path):
    tree = ast.parse(path.read_text())
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            top.add(node.module.split(".")[0])
    assert not top & HEAVY


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.name)
def test_dag_file_parses_in_under_two_seconds(path):
    # A fresh interpreter, as the DAG processor has: time the file's own import after
    # airflow.sdk (which every DAG shares) is loaded, and check nothing heavy came in.
    # CPU time of the process, not wall time: a busy machine stretches the wall clock,
    # while an import that pulls in torch or pyspark costs seconds of CPU on any machine.
    code = (
        f"import sys, time, importlib.util; import airflow.sdk; sys.path.insert(0, {str(DAGS)!r})\n"
        f"spec = importlib.util.spec_from_file_location('d', {str(path)!r})\n"
        "m = importlib.util.module_from_spec(spec); t = time.process_time(); spec.loader.exec_module(m)\n"
        "print(time.process_time() - t); print(sorted(k for k in {'torch','pyspark','pandas'} if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, heavy = out.stdout.strip().splitlines()[-2:]
    assert float(seconds) < 2.0
    assert heavy == "[]"


def test_every_task_has_retries_timeout_and_every_dag_tags(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.tags, f"{dag_id} has no tags"
        for t in dag.tasks:
            verdict = t.trigger_rule == "one_failed"  # fails the run when a task did: nothing to retry
            assert t.retries >= 1 or verdict, f"{dag_id}.{t.task_id} has no retries"
            assert t.execution_timeout is not None, f"{dag_id}.{t.task_id} has no execution timeout"


def test_shard_tasks_hold_a_slot_of_their_pool(dagbag):
    dag = dagbag.dags["nightly_sweep"]
    from pipelines.config.pools import load_pools

    for name in load_pools():
        task = dag.get_task(f"run_{name.replace('-', '_')}")
        assert task.pool == name


@pytest.mark.parametrize("change, said", [
    ({"suite": ["llm-gemm"]}, "unknown run parameter 'suite' (did you mean 'suites'?)"),
    ({"suites": ["nosuch"]}, "no suite 'nosuch'"),
    ({"suites": ["gemm-demo", "gemm-demo"]}, "each once"),
    ({"suites": ["../pipelines/config/pools.yaml"]}, "is not a suite name"),
    ({"kernel": "matmull"}, "kernel 'matmull' matches no case"),
    ({"stopping": {"max_samples": 0}}, "stopping.max_samples is 0"),
    ({"stopping": {"timeout_s": float("nan")}}, "stopping.timeout_s is nan"),
    ({"inject": [{"match": {}, "since": "2020-01-01", "factor": 5}]}, "measure real devices"),
    ({"pools": []}, "pools is empty"),
    ({"pools": ["h100"], "inject_failure": {"shard": 0, "attempts": 1}}, "hold real GPUs"),
])
def test_a_sweeps_parameters_are_checked_before_anything_is_planned(change, said):
    from pipelines.orchestration.tasks import check_params

    good = {"pools": ["cpu"], "suites": ["gemm-demo"], "kernel": None, "stopping": None, "inject": None,
            "reason": "manual", "inject_failure": None}
    check_params(good)
    with pytest.raises(ValueError, match=re.escape(said)):
        check_params({**good, **change})


@pytest.mark.parametrize("run_type, conf, default, recorded", [
    ("scheduled", {}, "nightly", "nightly"),
    ("manual", {}, "nightly", "manual"),      # a hand trigger of nightly_sweep is not a night
    ("backfill", {}, "nightly", "backfill"),  # `airflow backfill create` over past nights
    ("manual", {"reason": "nightly"}, "nightly", "nightly"),  # asked for: it stands
    ("manual", {}, "backfill", "backfill"),   # backfill_hardware's own default
])
def test_the_recorded_reason_says_how_the_run_was_started(run_type, conf, default, recorded):
    from types import SimpleNamespace

    from airflow.utils.types import DagRunType

    from pipelines.orchestration.tasks import run_reason

    dag_run = SimpleNamespace(run_type=DagRunType(run_type), conf=conf)
    assert run_reason({"reason": conf.get("reason", default)}, dag_run) == recorded
