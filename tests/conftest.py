"""Shared fixtures. One Spark session and one lake serve the whole test run (a cold
session with the Hive metastore takes ~20 s): tests that write to the lake use their
own dates, pools or run ids so that they never read each other's rows.

The lake and the Airflow home are temporary and set before anything imports airflow.

Two tiers. `make test` runs the fast tier (minutes), which keeps at least one test on
each real component: Spark (test_sql, test_quality, test_mining_transforms), Great
Expectations (test_quality), the Airflow scheduler and PostgreSQL (test_services: the
services soak, a three-pool night and a backfill through the services' Airflow while
clients query), the Thrift/JDBC server (test_hostile_sql), Spark Connect
on the shared services (test_hostile_connect), Chromium (test_report, and the dashboard
in test_web_browser), killed processes (test_isolation).
`make test-full` runs the end-to-end tier: the modules in SLOW_MODULES (whole DAG runs,
scenario histories, a Spark cluster) and single tests marked `slow`. CI runs both."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from launchers.short_jvms import SHORT_JVMS
from pipelines.orchestration.airflow_env import airflow_env
from pipelines.config.lake import Lake

SLOW_MODULES = {
    "test_nightly_e2e", "test_sweep_retries_and_reruns", "test_multi_suite_run",
    "test_regressions", "test_triage", "test_notify", "test_projections", "test_mine_gates",
    "test_publish_faults", "test_faults", "test_spark_cluster", "test_sqlserver",
    "test_energy_accuracy", "test_airflow_real",
}


def pytest_collection_modifyitems(items):
    for item in items:
        if item.module.__name__ in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


_ROOT = Path(tempfile.mkdtemp(prefix="perflake-test-lake-"))
os.environ.update(airflow_env(Lake(_ROOT)))
# Spark settings for kilobyte lakes in JVMs that live for one command (tests/spark-conf/
# spark-defaults.conf says which and why), and two shuffle partitions instead of the
# product's eight, for every JVM a test starts. Not for the shared session below: it
# lives for the whole tier, and there C2 and adaptive execution repay their cost
# (benchmarks/NOTES-services.md).
os.environ.update(SHORT_JVMS)


@pytest.fixture(scope="session")
def lake() -> Lake:
    yield Lake(_ROOT)
    shutil.rmtree(_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def spark(lake):
    from pipelines.warehouse.session import get_spark

    # One JVM serves the whole tier (an hour of mines for `make test-full`; after full GCs
    # 150-350 MB stayed live, and G1 wants room above that): 2g instead of Spark's default
    # 1g, for this session only (not the tests' child processes).
    before = os.environ.get("PERFLAKE_DRIVER_MEMORY")
    os.environ["PERFLAKE_DRIVER_MEMORY"] = before or "2g"
    for name in SHORT_JVMS:
        os.environ.pop(name, None)  # this long-lived JVM takes the product's settings
    try:
        session = get_spark(lake, app="perflake-tests")
    finally:
        os.environ.update(SHORT_JVMS)
        if before is None:
            del os.environ["PERFLAKE_DRIVER_MEMORY"]
    yield session
    session.stop()


def pytest_sessionfinish(session, exitstatus):
    # py4j logs from finalizers after pytest has closed the captured streams.
    import logging

    logging.getLogger("py4j").setLevel(logging.ERROR)
