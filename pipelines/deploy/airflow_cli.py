"""Any `airflow` command against the lake's services (their database, home and secrets):

    PERFLAKE_HOME=data .venv/bin/python -m pipelines.deploy.airflow_cli dags unpause nightly_sweep
"""
from __future__ import annotations

import os
import sys

from pipelines.config.lake import Lake
from pipelines.config.services import ServicesNotConfigured, configured
from pipelines.deploy.airflow import environment, venv_bin


def main(argv: list[str]) -> int:
    lake = Lake.from_env()
    if configured(lake) is None:
        raise ServicesNotConfigured(f"the lake {lake.root} has no services: run `make up` first")
    airflow = str(venv_bin() / "airflow")
    os.execve(airflow, [airflow, *argv], environment(lake))
    return 1  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
