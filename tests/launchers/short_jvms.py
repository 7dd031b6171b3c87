"""The Spark settings of the JVMs the tests start: kilobyte lakes, one command each
(tests/spark-conf/spark-defaults.conf says which settings and why). tests/conftest.py puts
them in the environment of every child process; the tier's shared session, and a test
that writes millions of rows on purpose, take the product's settings instead."""
from __future__ import annotations

from pathlib import Path

SHORT_JVMS = {"SPARK_CONF_DIR": str(Path(__file__).resolve().parent.parent / "spark-conf"),
              "PERFLAKE_SHUFFLE_PARTITIONS": "2"}


def product_settings(env: dict[str, str]) -> dict[str, str]:
    """`env` without the tests' Spark settings: a JVM started with it runs as the product does."""
    return {k: v for k, v in env.items() if k not in SHORT_JVMS}
