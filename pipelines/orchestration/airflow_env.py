"""A local Airflow home under the lake: SQLite metadata, this repo's dags/, no examples.
Must run before airflow is imported in the process (or exported for child processes)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.config.lake import Lake

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


def airflow_env(lake: Lake) -> dict[str, str]:
    home = lake.root / "airflow"
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "PERFLAKE_HOME": str(lake.root),
    }


def prepare_airflow(lake: Lake) -> None:
    """Point this process at the lake's Airflow home and migrate its database once."""
    # Variables already set (by the Makefile, or a team's own Airflow) win.
    for k, v in airflow_env(lake).items():
        os.environ.setdefault(k, v)
    home = Path(os.environ["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    marker = home / ".migrated"
    if not marker.exists():
        airflow = Path(sys.executable).parent / "airflow"
        subprocess.run([str(airflow), "db", "migrate"], check=True, env={**os.environ},
                       stdout=subprocess.DEVNULL)
        marker.touch()


def sync_pools() -> list[str]:
    """Create or update one Airflow pool per registry pool (slots = devices)."""
    from airflow.models.pool import Pool

    from pipelines.config.pools import load_pools

    names = []
    for p in load_pools().values():
        Pool.create_or_update_pool(name=p.name, slots=p.slots, description=f"{p.device_kind} pool, sku {p.sku}",
                                   include_deferred=False)
        names.append(p.name)
    return names
