"""Argument types shared by the `perflake` commands: a bad value is refused when the
command line is parsed, before any work starts (a Spark session, a report's first
steps), with argparse's usage line and exit status 2."""
from __future__ import annotations

import argparse

from pipelines.config.lake import safe_date


def date_arg(text: str) -> str:
    """A night, YYYY-MM-DD and a real calendar date (`safe_date`)."""
    try:
        return safe_date(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def port_arg(text: str) -> int:
    """A TCP port to listen on, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port {text!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is not between 1 and 65535")
    return port


def positive_int(text: str) -> int:
    """A count of something (sequences, tokens, GPUs): a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value
