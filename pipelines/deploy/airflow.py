"""Airflow 3 on the services' PostgreSQL: scheduler, dag-processor, triggerer and API
server as four processes (LocalExecutor), each with a pid file under
`<lake>/services/run/` and a log under `<lake>/services/airflow/logs/`."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from pipelines.config import accounts
from pipelines.config import processes
from pipelines.config.lake import Lake
from pipelines.config.services import HOST, Services
from pipelines.config.services import ServiceError
from pipelines.deploy.postgres import tail
from pipelines.orchestration.airflow_env import airflow_env, airflow_secrets, private_passwords

COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")


def venv_bin() -> Path:
    return Path(sys.executable).parent


def environment(lake: Lake) -> dict[str, str]:
    """The Airflow processes' environment: this one without any Airflow setting of its
    own (a SQLite URL exported by a shell would hide the services' database), then the
    lake's, with the venv first on PATH (Airflow starts its task runners as `airflow`)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    base["PATH"] = f"{venv_bin()}{os.pathsep}{base.get('PATH', '')}"
    return {**base, **airflow_env(lake)}


def write_secrets(lake: Lake, services: Services) -> None:
    """The files airflow_env's `_CMD` settings read (0600): the database URL, and a JWT and
    session secret shared by all four processes (each would invent its own otherwise,
    and the scheduler's task tokens would not be accepted by the API server)."""
    wanted = dict(airflow_secrets(lake))
    for name in ("airflow-jwt-secret", "airflow-api-secret-key"):
        path = services.secrets / name
        wanted[name] = path.read_text().strip() if path.exists() else secrets.token_urlsafe(32)
    for name, value in wanted.items():
        accounts.write_private(services.secrets / name, value)  # no newline: Airflow takes a `_CMD` output as it is


def home(lake: Lake) -> Path:
    return Path(airflow_env(lake)["AIRFLOW_HOME"])


def log_file(lake: Lake, component: str) -> Path:
    return home(lake) / "logs" / f"{component}.log"


def pid_file(services: Services, component: str) -> Path:
    return services.root / "run" / f"airflow-{component}.pid"


def migrate(lake: Lake) -> None:
    """`airflow db migrate` on the services' database, then the pools from the registry."""
    env = environment(lake)
    private_passwords(home(lake))
    for what, cmd in (("airflow db migrate", [str(venv_bin() / "airflow"), "db", "migrate"]),
                      ("the Airflow pools", [sys.executable, "-c",
                                             "from pipelines.orchestration.airflow_env import sync_pools; sync_pools()"])):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise ServiceError(f"Airflow: {what} failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-2500:]}")


def start(lake: Lake, services: Services, component: str) -> int | None:
    """Start one component detached (None if it already runs); its pid."""
    if pid(services, component) is not None:
        return None
    log = log_file(lake, component)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(venv_bin() / "airflow"), component]
    if component == "api-server":
        cmd += ["--host", HOST, "--port", str(services.airflow_port)]
    with open(log, "ab") as out:
        out.write(f"\n--- perflake services up {time.strftime('%Y-%m-%dT%H:%M:%S')} ---\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, env=environment(lake), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=home(lake), start_new_session=True)
    path = pid_file(services, component)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{proc.pid}\n")
    return proc.pid


def _recorded_pid(services: Services, component: str) -> int:
    try:
        return int(pid_file(services, component).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1


def pid(services: Services, component: str) -> int | None:
    """The component's pid when it is alive and is that component (not a reused pid)."""
    value = _recorded_pid(services, component)
    if value <= 0:
        return None
    cmdline = processes.cmdline(value)
    # Airflow retitles its processes ("airflow api_server -- host:..."): either spelling.
    named = component.encode() in cmdline or component.replace("-", "_").encode() in cmdline
    return value if processes.alive(value) and b"airflow" in cmdline and named else None


def healthy(lake: Lake, services: Services) -> dict[str, str]:
    """Each component's state from the API server's health endpoint (and pid files)."""
    states = {c: ("running" if pid(services, c) else "stopped") for c in COMPONENTS}
    try:
        import json

        with urllib.request.urlopen(f"http://{HOST}:{services.airflow_port}/api/v2/monitor/health", timeout=5) as r:
            health = json.loads(r.read())
        for key, component in (("scheduler", "scheduler"), ("dag_processor", "dag-processor"),
                               ("triggerer", "triggerer"), ("metadatabase", "api-server")):
            status = (health.get(key) or {}).get("status")
            if status and states[component] == "running":
                states[component] = status
    except (OSError, ValueError):
        if states["api-server"] == "running":
            states["api-server"] = "not answering"
    return states


def wait_up(lake: Lake, services: Services, timeout_s: float = 240.0) -> None:
    """Wait until the API server answers and reports the scheduler healthy; a component
    that exits meanwhile is named with its log's tail."""
    deadline = time.monotonic() + timeout_s
    while True:
        for component in COMPONENTS:
            # Alive by the pid it was started with: while Airflow retitles a process its
            # command line is briefly neither name, and that is not an exit.
            if not processes.alive(_recorded_pid(services, component)):
                log = log_file(lake, component)
                raise ServiceError(f"Airflow's {component} exited while starting; the last lines of {log}:\n{tail(log)}")
        states = healthy(lake, services)
        if states["scheduler"] == "healthy" and states["api-server"] == "healthy":
            return
        if time.monotonic() > deadline:
            raise ServiceError(f"Airflow did not become healthy within {timeout_s:.0f} s ({states}); logs under "
                               f"{log_file(lake, 'scheduler').parent}:\n{tail(log_file(lake, 'api-server'))}")
        time.sleep(2)


def stop(services: Services, component: str, timeout_s: float = 30.0) -> bool:
    value = pid(services, component)
    if value is None:
        pid_file(services, component).unlink(missing_ok=True)
        return False
    processes.stop_group(value, timeout_s=timeout_s)
    pid_file(services, component).unlink(missing_ok=True)
    return True
