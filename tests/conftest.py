"""Shared fixtures. One Spark session and one lake serve the whole test run (a cold
session with the Hive metastore takes ~20 s): tests that write to the lake use their
own dates, pools or run ids so that they never read each other's rows.

The lake and the Airflow home are temporary and set before anything imports airflow."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from pipelines.orchestration.airflow_env import airflow_env
from pipelines.config.lake import Lake

_ROOT = Path(tempfile.mkdtemp(prefix="perflake-test-lake-"))
os.environ.update(airflow_env(Lake(_ROOT)))


@pytest.fixture(scope="session")
def lake() -> Lake:
    yield Lake(_ROOT)
    shutil.rmtree(_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def spark(lake):
    from pipelines.warehouse.session import get_spark

    session = get_spark(lake, app="perflake-tests")
    yield session
    session.stop()


def pytest_sessionfinish(session, exitstatus):
    # py4j logs from finalizers after pytest has closed the captured streams.
    import logging

    logging.getLogger("py4j").setLevel(logging.ERROR)
