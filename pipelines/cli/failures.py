"""Known failures of `perflake` commands, each as one sentence: what went wrong and what
to do. `main()` prints the sentence and exits non-zero; `-v` shows the traceback too.

A failure is known when its exception type says so (a bad value, an unknown name, a
path that is missing, a folder or unreadable, Spark unable to start, a port in use) or
when a JVM error carries a message we recognise (the metastore held by another process)."""
from __future__ import annotations

import errno
import socket

# Texts inside Java exceptions that mean a known condition, and the sentence for each.
_JVM_MESSAGES = (
    ("Another instance of Derby may have already booted the database",
     "the lake's metastore is held by another process (a running demo, `perflake sql-server`, a mine); the "
     "embedded metastore admits one process at a time: let it finish or stop it, or use --engine duckdb"),
    ("Failed to create database 'metastore_db'",
     "the lake's metastore could not be created; check that the lake's metastore/ folder is writable"),
)


# A published table that is not there: DuckDB's and Spark's words for it.
_NO_TABLE = ("Catalog Error: Table with name", "TABLE_OR_VIEW_NOT_FOUND", "UnresolvedRelation")


class PortInUse(OSError):
    """A port a command would listen on is taken."""


def check_port_free(host: str, port: int, hint: str) -> None:
    """PortInUse naming the port and what to do (`hint`), when something listens there."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise PortInUse(errno.EADDRINUSE, f"port {port} on {host} is in use by another program; {hint}") \
                    from None
            raise


def known_failure(exc: BaseException) -> str | None:
    """The one-sentence message of a known failure, or None for a bug (show the traceback)."""
    from pipelines.config.services import ServiceError
    from pipelines.warehouse.preflight import SparkUnavailable

    if isinstance(exc, PortInUse):
        return exc.strerror
    if isinstance(exc, OSError) and exc.filename is not None:  # a path given that is missing, a folder, unreadable
        return f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, KeyError):  # str() of a KeyError quotes its message
        return str(exc.args[0]) if exc.args else "unknown key"
    if isinstance(exc, (ValueError, FileNotFoundError, SparkUnavailable, ServiceError)):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"a port this command listens on is in use ({exc}); choose another port (--port)"
    text = str(exc)
    if any(n in text for n in _NO_TABLE):
        from pipelines.config.lake import Lake

        return (f"the lake {Lake.from_env().root} has not published a table this needs (nothing mined there yet, or "
                f"another PERFLAKE_HOME meant?); `perflake info` says what it holds ({text.splitlines()[0][:160]})")
    for needle, sentence in _JVM_MESSAGES:
        if needle in text or any(needle in str(c) for c in _causes(exc)):
            return sentence
    return None


def _causes(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
