"""The services' PostgreSQL 15: one cluster under `<lake>/services/postgres/`, on
127.0.0.1 only, password (SCRAM) authentication, one line of pg_hba per database and role.

Databases and roles (pipelines/config/services.py):
- `metastore`: the Hive metastore's 45 tables, owned by perflake_admin, created once
  (pipelines/deploy/metastore.py); perflake_rw may change rows (mining, triage),
  perflake_ro may only read them (the SQL service).
- `airflow`: Airflow's metadata, owned by perflake_airflow (its migrations change the schema).

PostgreSQL refuses to run as root; started by root, the cluster belongs to an
unprivileged OS user (Debian's `postgres`, else a system user `perflake-pg` created here).
"""
from __future__ import annotations

import os
import secrets
import subprocess
import time
from contextlib import closing
from pathlib import Path

from pipelines.config.services import (ADMIN_ROLE, AIRFLOW_DB, AIRFLOW_ROLE, HOST, METASTORE_DB, PG_BIN, READER_ROLE,
                                       ROLES, WRITER_ROLE, ServiceError, Services)
from pipelines.config import accounts


def data_dir(services: Services) -> Path:
    return services.root / "postgres" / "data"


def log_file(services: Services) -> Path:
    return services.root / "postgres" / "postgres.log"


def installed() -> bool:
    return (PG_BIN / "pg_ctl").exists()


def ensure_passwords(services: Services) -> None:
    """One random password per role, created once (0600 files owned by the caller)."""
    services.secrets.mkdir(parents=True, exist_ok=True)
    os.chmod(services.secrets, 0o700)
    for role in ROLES:
        path = services.password_file(role)
        if not path.exists():
            accounts.write_private(path, secrets.token_urlsafe(24) + "\n")


def initialise(services: Services) -> bool:
    """Create the cluster if it does not exist (False if it did)."""
    data = data_dir(services)
    if (data / "PG_VERSION").exists():
        return False
    home = data.parent
    home.mkdir(parents=True, exist_ok=True)
    accounts.give(home, services.pg_user, mode=0o700)
    # initdb reads the superuser's password from a file the cluster's user can read.
    pwfile = home / ".initdb-password"
    pwfile.write_text(services.password(ADMIN_ROLE) + "\n")
    accounts.give(pwfile, services.pg_user, mode=0o600)
    try:
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-U", ADMIN_ROLE, f"--pwfile={pwfile}",
              "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8"], services, "initdb")
    finally:
        pwfile.unlink(missing_ok=True)
    _write_hba(services)
    _append_settings(services)
    return True


def _write_hba(services: Services) -> None:
    lines = [
        "# perflake services: loopback TCP only, SCRAM passwords, each role to its own database.",
        "# TYPE  DATABASE     USER                                   ADDRESS        METHOD",
        f"host    {METASTORE_DB}    {ADMIN_ROLE},{WRITER_ROLE},{READER_ROLE}  127.0.0.1/32   scram-sha-256",
        f"host    {AIRFLOW_DB}      {AIRFLOW_ROLE},{ADMIN_ROLE}                 127.0.0.1/32   scram-sha-256",
        f"host    postgres     {ADMIN_ROLE}                         127.0.0.1/32   scram-sha-256",
        f"local   all          {ADMIN_ROLE}                         scram-sha-256",
    ]
    path = data_dir(services) / "pg_hba.conf"
    path.write_text("\n".join(lines) + "\n")
    accounts.give(path, services.pg_user, mode=0o600)


def _append_settings(services: Services) -> None:
    path = data_dir(services) / "postgresql.conf"
    with open(path, "a") as f:
        f.write(f"""
# --- perflake services (pipelines/deploy/postgres.py) ---
listen_addresses = '{HOST}'
port = {services.pg_port}
unix_socket_directories = '{data_dir(services).parent}'
password_encryption = scram-sha-256
max_connections = 200          # each Spark process pools up to ~20 metastore connections
shared_buffers = 64MB
""")
    accounts.give(path, services.pg_user, mode=0o600)


def start(services: Services, timeout_s: float = 60.0) -> bool:
    """Start the cluster (False if it already ran)."""
    if running(services):
        return False
    log = log_file(services)
    _run([str(PG_BIN / "pg_ctl"), "-D", str(data_dir(services)), "-l", str(log), "-w", "-t", str(int(timeout_s)),
          "start"], services, "PostgreSQL", log=log)
    return True


def stop(services: Services) -> bool:
    if not running(services):
        return False
    _run([str(PG_BIN / "pg_ctl"), "-D", str(data_dir(services)), "-m", "fast", "-w", "stop"], services,
         "PostgreSQL (stop)", log=log_file(services))
    return True


def running(services: Services) -> bool:
    if not (data_dir(services) / "PG_VERSION").exists():
        return False
    proc = subprocess.run(accounts.as_user([str(PG_BIN / "pg_ctl"), "-D", str(data_dir(services)), "status"],
                                           services.pg_user), capture_output=True, text=True)
    return proc.returncode == 0


def pid(services: Services) -> int | None:
    try:
        return int((data_dir(services) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def connect(services: Services, database: str = "postgres", role: str = ADMIN_ROLE, *, timeout_s: float = 10.0):
    """A psycopg2 connection as `role` (the password from the services' secrets)."""
    import psycopg2

    return psycopg2.connect(host=HOST, port=services.pg_port, dbname=database, user=role,
                            password=services.password(role), connect_timeout=int(timeout_s))


def wait_ready(services: Services, timeout_s: float = 30.0) -> None:
    import psycopg2

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            connect(services).close()
            return
        except psycopg2.OperationalError as e:
            if time.monotonic() > deadline:
                raise ServiceError(f"PostgreSQL on {HOST}:{services.pg_port} does not accept connections: "
                                   f"{str(e).strip()}; its log is {log_file(services)}:\n{tail(log_file(services))}")
            time.sleep(0.5)


def ensure_roles_and_databases(services: Services) -> None:
    """The roles (passwords from the secrets, reset every time) and the two databases."""
    conn = connect(services)
    conn.autocommit = True  # CREATE DATABASE runs outside a transaction
    with closing(conn), conn.cursor() as cur:
        for role in (WRITER_ROLE, READER_ROLE, AIRFLOW_ROLE):
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
            verb = "ALTER" if cur.fetchone() else "CREATE"
            # Role names are constants of this module; the password is bound by the driver.
            cur.execute(f"{verb} ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s",
                        (services.password(role),))
        cur.execute(f"ALTER ROLE {ADMIN_ROLE} PASSWORD %s", (services.password(ADMIN_ROLE),))
        for db, owner in ((METASTORE_DB, ADMIN_ROLE), (AIRFLOW_DB, AIRFLOW_ROLE)):
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,))
            if not cur.fetchone():
                cur.execute(f"CREATE DATABASE {db} OWNER {owner} ENCODING 'UTF8'")
            cur.execute(f"REVOKE ALL ON DATABASE {db} FROM PUBLIC")
        cur.execute(f"GRANT CONNECT ON DATABASE {METASTORE_DB} TO {WRITER_ROLE}, {READER_ROLE}")
        cur.execute(f"GRANT CONNECT ON DATABASE {AIRFLOW_DB} TO {AIRFLOW_ROLE}")


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty log)"
    except OSError:
        return "(no log)"


def _run(cmd: list[str], services: Services, what: str, log: Path | None = None) -> None:
    proc = subprocess.run(accounts.as_user(cmd, services.pg_user), capture_output=True, text=True,
                          cwd=data_dir(services).parent)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise ServiceError(f"{what} failed (exit {proc.returncode}): {detail[-800:]}"
                           + (f"\nthe last lines of its log {log}:\n{tail(log)}" if log else ""))
