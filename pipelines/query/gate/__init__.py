"""The gate: the JVM side of perflake's read-only SQL endpoints, built from the Java
sources in `src/` with javac against pyspark's own jars (nothing is downloaded).

- `perflake.gate.Extension` (spark.sql.extensions): judges every parsed and analyzed
  plan inside the Spark process (docs/security.md) and caps result rows.
- `perflake.gate.PasswordFile`: HiveServer2 CUSTOM authentication against a file of
  salted PBKDF2 hashes.
- `perflake.gate.AuditListener` (spark.extraListeners): the audit log of the JDBC server.
- `perflake.gate.JdbcTimeout` (spark.extraListeners): stops a JDBC statement that outlives
  the service's statement timeout (spark.perflake.gate.statementTimeout) and tells its
  client so in one sentence.
- `perflake.gate.MemoryGuard` (spark.extraListeners): stops the running statements when
  the service's heap stays nearly full after a garbage collection.
- `perflake.gate.ConnectGuard` (spark.connect.grpc.interceptor.classes): Spark Connect's
  gRPC interceptor in services mode; refuses artifacts, user code, cache calls and reads
  by path in the parsed request before Spark's planner builds a plan, and writes every
  ExecutePlan to the same audit log. It starts `perflake.gate.ConnectTimeout`, which
  interrupts a Connect operation that outlives the same statement timeout.
- `perflake.gate.SqlClient`: a minimal JDBC client (tests, scripts).

`make setup` builds the jar (`python -m pipelines.query.gate`); `gate_jar()` builds it
when it is missing or older than its sources, so a checkout without `make setup` works
as long as a JDK is installed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
JAR = HERE / "build" / "perflake-gate.jar"
EXTENSION = "perflake.gate.Extension"
AUTHENTICATOR = "perflake.gate.PasswordFile"
AUDIT_LISTENER = "perflake.gate.AuditListener"
JDBC_TIMEOUT = "perflake.gate.JdbcTimeout"
MEMORY_GUARD = "perflake.gate.MemoryGuard"
SCRATCH_BOUND = "perflake.gate.ScratchBound"
RUNAWAY_TASKS = "perflake.gate.RunawayTasks"
CONNECT_GUARD = "perflake.gate.ConnectGuard"
CLIENT = "perflake.gate.SqlClient"


def sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def spark_jars() -> Path:
    from pipelines.warehouse.session import spark_home

    return spark_home() / "jars"


def is_current() -> bool:
    """The jar exists and is newer than every source file."""
    return JAR.exists() and all(JAR.stat().st_mtime >= s.stat().st_mtime for s in sources())


def build(force: bool = False) -> Path:
    """Compile the sources into the jar (only when stale, unless `force`); returns its path.
    Raises RuntimeError with javac's output when there is no JDK or compilation fails."""
    if not force and is_current():
        return JAR
    javac = shutil.which("javac") or (Path(os.environ["JAVA_HOME"]) / "bin" / "javac"
                                      if os.environ.get("JAVA_HOME") else None)
    if not javac or not Path(javac).exists():
        raise RuntimeError("javac is missing: perflake's SQL gate is built from source with a JDK (17 or later); "
                           "install one (Debian: openjdk-17-jdk-headless) and run `make setup`")
    JAR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="perflake-gate-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [str(javac), "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", f"{spark_jars()}/*",
               "-d", str(classes), *map(str, sources())]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac could not build the SQL gate:\n{proc.stdout}{proc.stderr}")
        partial = JAR.with_suffix(".jar.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: perflake\n\n")
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        partial.replace(JAR)  # a reader never sees half a jar
    return JAR


def gate_jar() -> Path:
    """The built jar, building it first if it is missing or stale."""
    return build()


def session_conf() -> dict[str, str]:
    """What a Spark session needs to run behind the gate (before its JVM starts)."""
    return {
        "spark.driver.extraClassPath": str(gate_jar()),
        "spark.sql.extensions": EXTENSION,
        # Defence in depth: the gate refuses path-based reads itself; Spark's switch too.
        "spark.sql.runSQLOnFiles": "false",
        "spark.sql.scripting.enabled": "false",
        # Spark substitutes ${env:NAME}, ${system:name} and ${spark.some.setting} in SQL
        # text before parsing it: any user would read the service's environment (Spark
        # Connect's token among it) and JVM properties. Off: the text is what is parsed.
        "spark.sql.variable.substitute": "false",
        # Spark's parser keeps a cache (ANTLR's DFA) that grows with every new shape of
        # statement and is never emptied: flushed once it passes 10 % of the driver's heap.
        "spark.sql.parser.manageParserCaches": "true",
        "spark.sql.parser.parserDfaCacheFlushRatio": "10",
    }
