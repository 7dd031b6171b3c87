"""The Spark session: local mode by default, any master via $PERFLAKE_SPARK_MASTER, with
the Hive catalog so tables outlive the session: the lake's embedded Derby metastore, or
in services mode (`make up`, pipelines/config/services.py) the shared one on PostgreSQL."""
from __future__ import annotations

from pathlib import Path

import os
import shlex
import sys

from pipelines.config.lake import Lake
from pipelines.config.services import WRITER_ROLE, Services, configured

DATABASE = "perf"
# Spark's logging: its defaults less the metastore's repeated, harmless warnings.
LOG4J2 = Path(__file__).with_name("log4j2.properties")


def spark_conf(lake: Lake, role: str = WRITER_ROLE) -> dict[str, str]:
    """The lake's Spark settings; in services mode the shared metastore as `role` (its
    password is not among them: `metastore_properties`)."""
    services = configured(lake)
    ms = lake.metastore
    if services is None:
        metastore = {
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={ms}/metastore_db;create=true",
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={ms} -Dderby.stream.error.file={ms}/derby.log "
                                             f"-Dlog4j2.configurationFile={LOG4J2}",
        }
    else:
        metastore = {**services.metastore_conf(role),
                     "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2}"}
    # In local mode (no cluster master) the driver's own ports (its RPC endpoint and block
    # manager, unauthenticated) are for this machine only: left alone, Spark binds them to
    # the host's address, reachable from the network (seen by a newcomer walking the docs).
    # Under spark-submit (a job submitted to a cluster) its --master and --conf decide.
    local_mode = not os.environ.get("PERFLAKE_SPARK_MASTER") and "PYSPARK_GATEWAY_PORT" not in os.environ
    local = {"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"} if local_mode else {}
    return {
        "spark.sql.warehouse.dir": str(lake.warehouse),
        **metastore,
        **local,
        # perflake publishes partitions as snapshots (catalog.write_partitions); an
        # INSERT OVERWRITE outside it replaces only the partitions it writes.
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": os.environ.get("PERFLAKE_SHUFFLE_PARTITIONS", "8"),
        "spark.ui.enabled": "false",
        # perflake's commands print their own progress lines; Spark's stage bars would
        # overwrite them on a terminal and fill a log with carriage returns.
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.parquet.compression.codec": "zstd",
        "spark.sql.files.maxRecordsPerFile": "5000000",
        # An aggregation whose input is already sorted by its keys (the mining chain sorts
        # the samples once, by case, after its one shuffle) streams through a sort
        # aggregate instead of hashing every key: the natural-key deduplication and the
        # per-case statistics neither hash 10^7-10^8 keys nor fall back to a second sort.
        "spark.sql.execution.replaceHashWithSortAgg": "true",
        # The mining job reads landing files by name (already listed); past 32 paths Spark
        # would start a job of one task per path just to stat them (0.5-2 s for a 64-file
        # night against 0.1 s on the driver, NOTES-scale.md). Listing thousands of paths
        # (years of partitions on object storage) still goes parallel.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1024",
    }


# Settings that hold lists: merging two configurations joins them instead of replacing.
_LISTS = {"spark.driver.extraClassPath": ":", "spark.executor.extraClassPath": ":",
          "spark.driver.extraJavaOptions": " ", "spark.sql.extensions": ","}


def merged_conf(*confs: dict[str, str]) -> dict[str, str]:
    """Spark configurations combined left to right; class paths, Java options and
    extensions are joined, other settings replaced."""
    out: dict[str, str] = {}
    for conf in confs:
        for k, v in conf.items():
            sep = _LISTS.get(k)
            if sep and out.get(k):
                parts = out[k].split(sep)
                out[k] = out[k] if v in parts else f"{out[k]}{sep}{v}"
            else:
                out[k] = v
    return out


def get_spark(lake: Lake, app: str = "perflake"):
    """The process's session for this lake (created once, then reused)."""
    from pyspark.sql import SparkSession

    lake.metastore.mkdir(parents=True, exist_ok=True)
    active = SparkSession.getActiveSession()
    if active is not None:
        current = active.conf.get("spark.sql.warehouse.dir")
        if current.removeprefix("file:") != str(lake.warehouse):
            raise RuntimeError(f"a Spark session for lake {current} is already running in this process; "
                               f"cannot switch to {lake.warehouse}")
        return active
    from pipelines.warehouse.preflight import check_spark_can_start

    check_spark_can_start(lake)  # Java, the metastore's lock: a sentence, not a JVM trace
    # Python workers (pandas UDFs, e.g. change detection) run this interpreter, whose
    # environment has pandas and pyarrow, unless the deployment names another.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    use_metastore_properties(lake)
    builder = SparkSession.builder.appName(app)
    master = os.environ.get("PERFLAKE_SPARK_MASTER")
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Under spark-submit (which starts the JVM and sets the gateway port), its
        # --master decides; otherwise $PERFLAKE_SPARK_MASTER or local mode.
        builder = builder.master(master or "local[2]")
    for k, v in spark_conf(lake).items():
        builder = builder.config(k, v)
    if os.environ.get("PERFLAKE_DRIVER_MEMORY") and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # The JVM this process starts (local mode: driver and executors): Spark's default
        # heap is 1g. Under spark-submit its --driver-memory decides.
        builder = builder.config("spark.driver.memory", os.environ["PERFLAKE_DRIVER_MEMORY"])
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    return spark


def reader_session(lake: Lake):
    """A session for reading the lake's tables: in services mode a Spark Connect session
    on the shared Spark SQL service (no JVM in this process; read-only, behind the gate,
    and it runs no user code: a job with Python UDFs uses `get_spark`), which presents the
    service's Connect token; else `get_spark`, as in a process that runs Spark itself
    already (a job, `perflake demo`'s DAG): one process, one kind of session."""
    from pyspark import SparkContext

    services = configured(lake)
    if services is None or SparkContext._active_spark_context is not None:
        return get_spark(lake)
    import socket

    from pyspark.sql.connect.client import ChannelBuilder, DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    from pipelines.config.services import HOST
    from pipelines.warehouse.preflight import SparkUnavailable

    try:
        socket.create_connection((HOST, services.connect_port), timeout=2.0).close()
    except OSError:
        raise SparkUnavailable(f"the Spark SQL service ({services.connect_url}) does not answer: start the services "
                               f"with `make up` (`make status` shows each one's state and log)") from None
    channel = DefaultChannelBuilder(services.connect_url)  # the token goes in no URL (errors quote URLs)
    channel.set(ChannelBuilder.PARAM_TOKEN, connect_token(services))
    # What pyspark's own builder does for every Connect session (`SparkSession.builder.remote`):
    # mark this process a Connect client, so that pyspark.sql.functions build Connect
    # columns; without it F.col asserted a local SparkContext (`perflake regressions`,
    # `perflake triage list` after `make up`).
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    # pyspark logs every failed statement's error, as a JSON line of several kB with the
    # service's stack, before the exception reaches perflake, which says it in one line
    # (with the traceback under -v).
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True
    return RemoteSparkSession.builder.channelBuilder(channel).getOrCreate()


def connect_token(services: Services) -> str:
    """The Spark SQL service's Connect token: the lake's token file where this user may
    read it (the services' owner), else $SPARK_CONNECT_AUTHENTICATE_TOKEN (the operator
    hands the token to the users who may query)."""
    from pipelines.config.services import CONNECT_TOKEN_ENV
    from pipelines.warehouse.preflight import SparkUnavailable

    try:
        return services.connect_token()
    except PermissionError:
        if os.environ.get(CONNECT_TOKEN_ENV):
            return os.environ[CONNECT_TOKEN_ENV]
        raise SparkUnavailable(f"the Spark SQL service admits Spark Connect clients with its token only, and this "
                               f"user may not read {services.connect_token_file}: set {CONNECT_TOKEN_ENV} to the "
                               f"token the lake's operator gives you, or query over JDBC with a user "
                               f"(docs/security.md)") from None


def use_metastore_properties(lake: Lake, role: str = WRITER_ROLE) -> None:
    """In services mode, hand the metastore password to the JVM this process is about to
    start through a properties file (pyspark passes builder settings to spark-submit as
    --conf arguments, which `ps` shows to every user of the machine)."""
    services = configured(lake)
    if services is None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return  # embedded, or under spark-submit (its --properties-file decides)
    props = services.spark_properties(role)
    if not props.exists():
        from pipelines.config.services import ServicesNotConfigured

        raise ServicesNotConfigured(f"{props} is missing: run `make up` to (re)create the services' credentials")
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if "--properties-file" not in args:
        # --load-spark-defaults: the machine's spark-defaults.conf ($SPARK_CONF_DIR) still
        # applies below the file, as it does to an embedded session.
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(str(props))} --load-spark-defaults {args}"


def spark_home() -> Path:
    """The Spark distribution inside the pip-installed pyspark (bin/spark-submit, jars/)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-submit").exists():
        raise FileNotFoundError(f"{home}/bin/spark-submit is missing; reinstall pyspark in this venv")
    return home
