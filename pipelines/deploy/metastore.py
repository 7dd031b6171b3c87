"""The Hive metastore's schema on PostgreSQL, created once, up front.

DataNucleus' lazy `autoCreateAll` on an empty PostgreSQL database hangs at the first
CREATE TABLE (an ALTER TABLE ... ADD CONSTRAINT waits on the same JVM's open
transaction). Instead, DataNucleus' SchemaTool (in pyspark's jars) writes the complete DDL
for the model in `package.jdo` (inside the hive-metastore jar Spark uses), and it is
applied in one transaction together with the `SEQUENCE_TABLE` DataNucleus allocates ids
from and the `VERSION` row Hive verifies (2.3.0, the metastore client in Spark 4.1). Every
Spark process then runs with autoCreateAll=false and schema verification on.
"""
from __future__ import annotations

import subprocess
import tempfile
import zipfile
from contextlib import closing
from pathlib import Path

from pipelines.config import accounts
from pipelines.config.services import ADMIN_ROLE, JDBC_DRIVER_JAR, METASTORE_DB, READER_ROLE, WRITER_ROLE, Services
from pipelines.config.services import ServiceError
from pipelines.deploy.postgres import connect
from pipelines.warehouse.preflight import java_binary
from pipelines.warehouse.session import spark_home

SCHEMA_VERSION = "2.3.0"
SCHEMA_TOOL = "org.datanucleus.store.schema.SchemaTool"
_EXTRA_DDL = f"""
CREATE TABLE "SEQUENCE_TABLE" ("SEQUENCE_NAME" varchar(255) NOT NULL, "NEXT_VAL" bigint NOT NULL,
                               CONSTRAINT "SEQUENCE_TABLE_PK" PRIMARY KEY ("SEQUENCE_NAME"));
INSERT INTO "VERSION" ("VER_ID", "SCHEMA_VERSION", "VERSION_COMMENT")
VALUES (1, '{SCHEMA_VERSION}', 'Hive release version {SCHEMA_VERSION}, created by perflake services up');
"""


def metastore_jar() -> Path:
    found = sorted((spark_home() / "jars").glob("hive-metastore-*.jar"))
    if not found:
        raise ServiceError(f"no hive-metastore jar in {spark_home() / 'jars'}; reinstall pyspark")
    return found[-1]


def exists(services: Services) -> bool:
    with closing(connect(services, METASTORE_DB)) as conn, conn.cursor() as cur:
        cur.execute("SELECT to_regclass('public.\"VERSION\"') IS NOT NULL")
        return bool(cur.fetchone()[0])


def schema_ddl(services: Services) -> str:
    """The complete DDL of the metastore's model, as SchemaTool writes it (about 6 s)."""
    if not JDBC_DRIVER_JAR.exists():
        raise ServiceError(f"{JDBC_DRIVER_JAR} is missing: install Debian's libpostgresql-jdbc-java")
    java = java_binary()
    if java is None:
        raise ServiceError("Java is not installed (Spark needs Java 17)")
    with tempfile.TemporaryDirectory(prefix="perflake-schematool-") as tmp:
        with zipfile.ZipFile(metastore_jar()) as jar:
            jar.extract("package.jdo", tmp)
        props = Path(tmp) / "datanucleus.properties"
        # The same identifier and id settings Hive's own metastore client uses.
        accounts.write_private(props, "datanucleus.ConnectionDriverName=org.postgresql.Driver\n"
                                      f"datanucleus.ConnectionURL={services.jdbc_url(METASTORE_DB)}\n"
                                      f"datanucleus.ConnectionUserName={ADMIN_ROLE}\n"
                                      f"datanucleus.ConnectionPassword={services.password(ADMIN_ROLE)}\n"
                                      "datanucleus.identifierFactory=datanucleus1\n"
                                      "datanucleus.rdbms.useLegacyNativeValueStrategy=true\n")
        ddl = Path(tmp) / "schema.sql"
        cmd = [str(java), "-cp", f"{spark_home() / 'jars'}/*:{JDBC_DRIVER_JAR}:{tmp}", SCHEMA_TOOL, "-create",
               "-api", "JDO", "-props", str(props), "-completeDdl", "-ddlFile", str(ddl), str(Path(tmp) / "package.jdo")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0 or not ddl.exists():
            raise ServiceError(f"DataNucleus SchemaTool could not write the metastore's DDL (exit {proc.returncode}):\n"
                               f"{(proc.stdout + proc.stderr)[-2000:]}")
        return ddl.read_text()


def create(services: Services) -> bool:
    """Create the schema if the database has none (False if it had one), then grant the
    writers' and readers' roles their rights (every time: cheap and idempotent)."""
    created = False
    if not exists(services):
        ddl = schema_ddl(services) + _EXTRA_DDL
        with closing(connect(services, METASTORE_DB)) as conn:
            with conn, conn.cursor() as cur:  # one transaction: all of it or nothing
                cur.execute(ddl)
        created = True
    with closing(connect(services, METASTORE_DB)) as conn:
        with conn, conn.cursor() as cur:
            cur.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            cur.execute(f"GRANT USAGE ON SCHEMA public TO {WRITER_ROLE}, {READER_ROLE}")
            cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {WRITER_ROLE}")
            cur.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER_ROLE}")
    return created


def has_database(services: Services, name: str) -> bool:
    """Whether the metastore holds database `name` (a read of its DBS table)."""
    with closing(connect(services, METASTORE_DB)) as conn, conn.cursor() as cur:
        cur.execute('SELECT 1 FROM "DBS" WHERE "NAME" = %s', (name,))
        return cur.fetchone() is not None


def table_count(services: Services) -> int:
    with closing(connect(services, METASTORE_DB)) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        return int(cur.fetchone()[0])
