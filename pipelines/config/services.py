"""Which deployment a lake runs on, and where its shared services listen.

Two modes, one code base (docs/deploy.md):

- **embedded** (the default, `make demo`, most tests): every Spark process opens the
  lake's own Derby metastore (one process at a time), Airflow keeps its metadata in
  SQLite, and `perflake sql` starts a JVM per command.
- **services** (`make up`): PostgreSQL holds the Hive metastore and Airflow's metadata,
  every Spark process of every user shares that metastore, one long-running Spark SQL
  service answers JDBC (HiveServer2) and Spark Connect, and Airflow's scheduler,
  dag-processor, triggerer and API server run on PostgreSQL.

`make up` writes `<lake>/services/services.json` (the ports and OS users it chose); from
then on the lake is in services mode. `PERFLAKE_SERVICES=off` forces embedded mode for
one command (`on` insists on services and fails if `make up` never ran). The ports can be
chosen before the first `make up` with PERFLAKE_PG_PORT, PERFLAKE_SQL_PORT,
PERFLAKE_CONNECT_PORT and PERFLAKE_AIRFLOW_PORT; so can the Spark SQL service's bounds on
every statement, JDBC's and Spark Connect's alike, with PERFLAKE_SQL_QUERY_TIMEOUT_S and
PERFLAKE_SQL_MAX_ROWS (else the server's defaults; services.json keeps them, and the
service reads them whenever it starts).

Passwords live in `<lake>/services/secrets/` (one file per role, mode 0600), never in
services.json, on a command line or in a log; so does Spark Connect's token
(`spark-connect-token`), which every Connect client must present.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from pipelines.config.lake import Lake

HOST = "127.0.0.1"           # every service listens on loopback only
JDBC_DRIVER_JAR = Path("/usr/share/java/postgresql.jar")   # Debian's libpostgresql-jdbc-java
PG_BIN = Path("/usr/lib/postgresql/15/bin")                   # Debian's postgresql (15)
METASTORE_DB = "metastore"
AIRFLOW_DB = "airflow"
# PostgreSQL roles: the owner (schema changes, created by `make up` only), the writers'
# role (mining, triage: rows of the metastore, no DDL) and the readers' role (the SQL
# service: SELECT only).
ADMIN_ROLE = "perflake_admin"
WRITER_ROLE = "perflake_rw"
READER_ROLE = "perflake_ro"
AIRFLOW_ROLE = "perflake_airflow"
ROLES = (ADMIN_ROLE, WRITER_ROLE, READER_ROLE, AIRFLOW_ROLE)
# Spark Connect's pre-shared token: the Spark SQL service reads it from this variable of
# its own environment (spark.connect.authenticate.token would put it in the session's
# configuration); pyspark's Connect client sends it from the same variable when it is set.
CONNECT_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"


class ServiceError(RuntimeError):
    """A service did not start or stop; the message names it, says why and quotes its log."""


class ServicesNotConfigured(ServiceError):
    """The lake's services are not (fully) set up: `make up` never ran, or a file of theirs is missing."""


@dataclass(frozen=True)
class Services:
    """Where a lake's services listen and which OS users run them (services.json)."""
    root: Path                          # <lake>/services
    pg_port: int = 55432
    sql_port: int = 10000               # HiveServer2 (JDBC, beeline, BI tools)
    connect_port: int = 15002           # Spark Connect (perflake sql, compare, the dashboard)
    airflow_port: int = 8088            # Airflow's API server and UI
    # The OS users the processes run as when `make up` runs as root ("" = the caller).
    pg_user: str = ""
    sql_user: str = ""
    # The Spark SQL service's statement timeout, result-row cap, shuffle/spill bytes per
    # statement and how long a cancelled statement's task may run on (None: the server's
    # defaults, pipelines.query.server.QUERY_TIMEOUT_S, MAX_ROWS, MAX_SCRATCH_MB and
    # RUNAWAY_GRACE_S).
    query_timeout_s: int | None = None
    max_rows: int | None = None
    max_scratch_mb: int | None = None
    runaway_grace_s: int | None = None

    def limits(self) -> dict[str, int]:
        """The bounds this lake sets for the Spark SQL service (server.start's keywords)."""
        return {k: v for k, v in (("query_timeout_s", self.query_timeout_s), ("max_rows", self.max_rows),
                                  ("max_scratch_mb", self.max_scratch_mb),
                                  ("runaway_grace_s", self.runaway_grace_s)) if v is not None}

    @property
    def file(self) -> Path:
        return self.root / "services.json"

    @property
    def secrets(self) -> Path:
        return self.root / "secrets"

    def password_file(self, role: str) -> Path:
        return self.secrets / role

    def password(self, role: str) -> str:
        try:
            return self.password_file(role).read_text().strip()
        except FileNotFoundError:
            raise ServicesNotConfigured(f"{self.password_file(role)} is missing: run `make up` to (re)create the "
                                        f"services' roles") from None

    def jdbc_url(self, database: str) -> str:
        return f"jdbc:postgresql://{HOST}:{self.pg_port}/{database}"

    def sqlalchemy_url(self, database: str, role: str) -> str:
        return f"postgresql+psycopg2://{role}:{self.password(role)}@{HOST}:{self.pg_port}/{database}"

    @property
    def connect_url(self) -> str:
        # "localhost", not HOST: pyspark sends a token without TLS only to a URL that names
        # localhost (gRPC's local credentials, which accept a loopback peer only); to any
        # other name it sends it over TLS, which the service does not speak.
        return f"sc://localhost:{self.connect_port}"

    @property
    def connect_token_file(self) -> Path:
        return self.secrets / "spark-connect-token"

    def connect_token(self) -> str:
        """The token a Spark Connect client must present (created by `make up`)."""
        try:
            return self.connect_token_file.read_text().strip()
        except FileNotFoundError:
            raise ServicesNotConfigured(f"{self.connect_token_file} is missing: run `make up` to (re)create the "
                                        f"Spark SQL service's Connect token") from None

    def metastore_conf(self, role: str) -> dict[str, str]:
        """Spark settings for the shared metastore as `role`, all but the password (which
        goes through a properties file: `spark_properties`)."""
        return {
            "spark.hadoop.javax.jdo.option.ConnectionURL": self.jdbc_url(METASTORE_DB),
            "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "spark.hadoop.javax.jdo.option.ConnectionUserName": role,
            # The schema is created once by `make up` (DataNucleus' lazy creation hangs on
            # PostgreSQL); nobody else may create or change it.
            "spark.hadoop.datanucleus.schema.autoCreateAll": "false",
            "spark.hadoop.hive.metastore.schema.verification": "true",
            # The JDBC driver must be on the driver's own class path: Spark's isolated
            # Hive client does not see jars added with spark.jars.
            "spark.driver.extraClassPath": str(JDBC_DRIVER_JAR),
        }

    def spark_properties(self, role: str) -> Path:
        """A Spark properties file holding `role`'s metastore password (mode 0600), for
        `spark-submit --properties-file`: the password never reaches a command line."""
        return self.secrets / f"spark-{role}.properties"

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        data = {k: v for k, v in asdict(self).items() if k != "root"}
        tmp = self.file.with_suffix(".partial")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.file)


def services_root(lake: Lake) -> Path:
    return lake.root / "services"


def planned(lake: Lake) -> Services:
    """The services this lake has (services.json), or the ones `make up` would create
    (defaults, or the PERFLAKE_*_PORT variables)."""
    root = services_root(lake)
    found = _load(root)
    if found is not None:
        return found
    ports = {"pg_port": "PERFLAKE_PG_PORT", "sql_port": "PERFLAKE_SQL_PORT",
             "connect_port": "PERFLAKE_CONNECT_PORT", "airflow_port": "PERFLAKE_AIRFLOW_PORT"}
    limits = {"query_timeout_s": "PERFLAKE_SQL_QUERY_TIMEOUT_S", "max_rows": "PERFLAKE_SQL_MAX_ROWS",
              "max_scratch_mb": "PERFLAKE_SQL_MAX_SCRATCH_MB", "runaway_grace_s": "PERFLAKE_SQL_RUNAWAY_GRACE_S"}
    chosen = {}
    for key, var in {**ports, **limits}.items():
        if os.environ.get(var):
            try:
                chosen[key] = int(os.environ[var])
            except ValueError:
                what = "a port number" if key in ports else "a whole number"
                raise ValueError(f"{var}={os.environ[var]!r} is not {what}") from None
    return Services(root, **chosen)


def configured(lake: Lake) -> Services | None:
    """The lake's services when it runs in services mode, else None (embedded)."""
    switch = os.environ.get("PERFLAKE_SERVICES", "").strip().lower()
    if switch in ("off", "0", "no", "embedded"):
        return None
    found = _load(services_root(lake))
    if found is None and switch in ("on", "1", "yes", "services"):
        raise ServicesNotConfigured(f"PERFLAKE_SERVICES={switch} but the lake {lake.root} has no services: "
                                    f"run `make up` (or `perflake services up`) first")
    return found


def _load(root: Path) -> Services | None:
    path = root / "services.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ServicesNotConfigured(f"{path} is not valid JSON ({e}); fix it or remove it and run `make up`") from None
    known = {f for f in Services.__dataclass_fields__ if f != "root"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ServicesNotConfigured(f"{path}: unknown field(s) {unknown}; expected {sorted(known)}")
    return Services(root, **data)
