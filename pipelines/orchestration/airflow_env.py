"""The lake's Airflow home, this repo's dags/, no examples: SQLite metadata under the lake
(embedded), or in services mode (`make up`) the services' PostgreSQL with the
LocalExecutor. Must run before airflow is imported in the process (or exported for child
processes)."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from pipelines.config.accounts import write_private
from pipelines.config.lake import Lake
from pipelines.config.pools import load_pools
from pipelines.config.services import AIRFLOW_DB, AIRFLOW_ROLE, HOST, configured

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


def airflow_env(lake: Lake) -> dict[str, str]:
    services = configured(lake)
    home = lake.root / "airflow" if services is None else services.root / "airflow"
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "PERFLAKE_HOME": str(lake.root),
    }
    if services is None:
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home}/airflow.db"
        return env
    # Secrets are read from files by Airflow itself (the `_CMD` variants), so that no
    # password is in an environment or on a command line.
    secret = services.secrets
    env.update({
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD": f"cat {secret / 'airflow-sql-alchemy-conn'}",
        "AIRFLOW__API_AUTH__JWT_SECRET_CMD": f"cat {secret / 'airflow-jwt-secret'}",
        "AIRFLOW__API__SECRET_KEY_CMD": f"cat {secret / 'airflow-api-secret-key'}",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # Every pool's every slot can run at once, plus the mining and reporting tasks.
        "AIRFLOW__CORE__PARALLELISM": str(sum(p.slots for p in load_pools().values()) + 8),
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(services.airflow_port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{HOST}:{services.airflow_port}/execution/",
        # The task and trigger log servers: the two ports after the API server's.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(services.airflow_port + 1),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(services.airflow_port + 2),
    })
    return env


def airflow_secrets(lake: Lake) -> dict[str, str]:
    """The contents of the secret files that airflow_env's `_CMD` settings read."""
    services = configured(lake)
    if services is None:
        return {}
    return {
        "airflow-sql-alchemy-conn": services.sqlalchemy_url(AIRFLOW_DB, AIRFLOW_ROLE),
    }


PASSWORDS = "simple_auth_manager_passwords.json.generated"


def private_passwords(home: Path | None = None) -> Path:
    """The UI's password file (Airflow's simple auth manager, user `admin`) in `home`
    (default $AIRFLOW_HOME), written here, readable by its owner only, before Airflow
    starts: Airflow would create it with the default umask (readable by every local
    user, found by a newcomer walking the docs) and print the password in its log.
    One left by an earlier Airflow is made private."""
    path = Path(home or os.environ["AIRFLOW_HOME"]) / PASSWORDS
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o600)
    else:
        write_private(path, json.dumps({"admin": secrets.token_urlsafe(16)}) + "\n")
    return path


def prepare_airflow(lake: Lake) -> None:
    """Point this process at the lake's Airflow home and migrate its database once.
    ServiceError where that database is the shared services' and they are down."""
    from pipelines.config.services import ServiceError
    from pipelines.warehouse.preflight import services_down

    down = services_down(lake)
    if down:
        raise ServiceError(down)
    # Variables already set (by a team's own Airflow) win; in services mode the database
    # is the services' and no SQLite setting may hide it.
    env = airflow_env(lake)
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD" in env:
        os.environ.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", None)
    for k, v in env.items():
        os.environ.setdefault(k, v)
    home = Path(os.environ["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    private_passwords(home)
    marker = home / ".migrated"
    if not marker.exists():
        airflow = Path(sys.executable).parent / "airflow"
        subprocess.run([str(airflow), "db", "migrate"], check=True, env={**os.environ},
                       stdout=subprocess.DEVNULL)
        marker.touch()


def sync_pools() -> list[str]:
    """Create or update one Airflow pool per registry pool (slots = devices)."""
    from airflow.models.pool import Pool

    names = []
    for p in load_pools().values():
        Pool.create_or_update_pool(name=p.name, slots=p.slots, description=f"{p.device_kind} pool, sku {p.sku}",
                                   include_deferred=False)
        names.append(p.name)
    return names
