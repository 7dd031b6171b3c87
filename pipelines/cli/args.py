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
