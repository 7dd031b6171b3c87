"""Where the SQL server keeps its files: the run folder (pid, log, properties) under
`<lake>/run/`, and its own state (users, audit log, scheduler pools, TLS keystore) under
`<lake>/services/sql-server/`."""
from __future__ import annotations

from pathlib import Path

from pipelines.config.lake import Lake


def run_dir(lake: Lake) -> Path:
    return lake.root / "run"


def pid_file(lake: Lake) -> Path:
    return run_dir(lake) / "sql-server.json"


def log_file(lake: Lake) -> Path:
    return run_dir(lake) / "sql-server.log"


def service_dir(lake: Lake) -> Path:
    """The server's own files: users (password hashes), audit log, scheduler pools."""
    return lake.root / "services" / "sql-server"


def password_file(lake: Lake) -> Path:
    return service_dir(lake) / "passwd"


def audit_log(lake: Lake) -> Path:
    return service_dir(lake) / "audit.log"


def pools_file(lake: Lake) -> Path:
    return service_dir(lake) / "fairscheduler.xml"


def tls_dir(lake: Lake) -> Path:
    """A certificate for the JDBC endpoint: keystore.p12 (PKCS#12, the server's key and
    certificate) and keystore.password (0600). With both present the server speaks TLS."""
    return service_dir(lake) / "tls"


def tls_configured(lake: Lake) -> bool:
    return (tls_dir(lake) / "keystore.p12").is_file() and (tls_dir(lake) / "keystore.password").is_file()


def properties_file(lake: Lake) -> Path:
    return run_dir(lake) / "sql-server.properties"
