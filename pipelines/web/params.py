"""What a URL or a form may say, checked before any query runs.

Values are bound as SQL parameters in any case; these checks exist so that a mistyped or
hostile link answers a clear 400 page naming the parameter, instead of an empty page or
an error deep in a query. Names (kernels, pools, SKUs, run ids) keep to the characters
such names have; free text (search, notes) keeps to printable text of a bounded length.
"""
from __future__ import annotations

import datetime
import re
import unicodedata

from starlette.exceptions import HTTPException

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+\-:]{0,127}$")
_SHAPE = re.compile(r"^[A-Za-z0-9_]+=[A-Za-z0-9_.\-]+(,[A-Za-z0-9_]+=[A-Za-z0-9_.\-]+)*$")
_SEARCH = re.compile(r"^[A-Za-z0-9_.+\-:=, ]{0,64}$")
_SERIES_KEY = re.compile(r"^[0-9a-f]{16}$")
_REGRESSION_ID = re.compile(r"^[0-9a-f]{10}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\- ]{0,63}$")


class BadParameter(HTTPException):
    """A 400 answer naming the parameter and what is wrong with it."""

    def __init__(self, name: str, value, why: str, status: int = 400):
        shown = value if isinstance(value, str) and len(value) <= 80 else f"{str(value)[:80]}..."
        super().__init__(status, f"parameter {name!r} = {shown!r}: {why}")


class NotFound(HTTPException):
    def __init__(self, what: str):
        super().__init__(404, what)


def name(value: str | None, param: str) -> str | None:
    """A kernel, family, backend, dtype, pool, SKU, device kind or run id, or None if empty."""
    if value is None or value == "":
        return None
    if not _NAME.match(value) or ".." in value:
        raise BadParameter(param, value, "not a valid name (letters, digits and _ . + - : only)")
    return value


MAX_SHAPE_PAIRS = 16  # a kernel's shape has a handful of parameters (m, n, k, heads, seq, ...)


def shape(value: str | None, param: str = "shape") -> list[tuple[str, str]]:
    """`m=4096,n=4096` as [(key, value), ...]; [] if empty. At most MAX_SHAPE_PAIRS pairs:
    each pair is a condition of the query, whose cost grows with their square (measured:
    3,900 pairs in a 16 KB link took 35 s and 14.6 GB of the server's memory)."""
    if not value:
        return []
    value = value.replace(" ", "")
    if len(value) > 1024 or value.count(",") >= MAX_SHAPE_PAIRS:
        raise BadParameter(param, value, f"at most {MAX_SHAPE_PAIRS} key=value pairs")
    if not _SHAPE.match(value):
        raise BadParameter(param, value, "not a list of key=value pairs, e.g. m=4096,n=4096")
    return [tuple(item.split("=", 1)) for item in value.split(",")]


def search(value: str | None, param: str = "q") -> str | None:
    if not value:
        return None
    if not _SEARCH.match(value):
        raise BadParameter(param, value, "search text is at most 64 letters, digits, spaces and _ . + - : = ,")
    return value.strip() or None


def date(value: str | None, param: str = "date") -> str | None:
    """A real calendar date YYYY-MM-DD, or None if empty."""
    if not value:
        return None
    if not _DATE.match(value):
        raise BadParameter(param, value, "not a date YYYY-MM-DD")
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise BadParameter(param, value, "not a calendar date") from None
    return value


def series_key(value: str) -> str:
    if not _SERIES_KEY.match(value or ""):
        raise BadParameter("series", value, "a series key is 16 lowercase hex digits (see the explorer)")
    return value


def regression_id(value: str) -> str:
    if not _REGRESSION_ID.match(value or ""):
        raise BadParameter("regression_id", value, "a regression id is 10 lowercase hex digits")
    return value


def choice(value: str | None, param: str, allowed: tuple[str, ...], default: str) -> str:
    if not value:
        return default
    if value not in allowed:
        raise BadParameter(param, value, f"use one of {', '.join(allowed)}")
    return value


def page(value: str | None, param: str = "page") -> int:
    if not value:
        return 1
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 100_000:  # "²".isdigit() is true
        raise BadParameter(param, value, "a page number from 1")
    return int(value)


def person(value: str | None, param: str = "by") -> str:
    """Who acknowledges or closes: required."""
    value = (value or "").strip()
    if not value:
        raise BadParameter(param, value, "say who you are (a name is required)", status=422)
    if not _PERSON.match(value):
        raise BadParameter(param, value, "a name of letters, digits, spaces and _ . @ -", status=422)
    return value


def note(value: str | None, param: str = "note") -> str:
    """Why: required, printable, at most 500 characters."""
    value = (value or "").strip()
    if not value:
        raise BadParameter(param, value, "a note is required: what is being done, or why", status=422)
    if len(value) > 500 or any(ord(c) < 32 and c not in "\t" for c in value):
        raise BadParameter(param, value, "a note is one line of at most 500 characters", status=422)
    if any(unicodedata.category(c) == "Cf" for c in value):  # U+202E and kin make a note read otherwise
        raise BadParameter(param, value, "a note of visible characters (no direction overrides or other "
                                         "invisible format characters)", status=422)
    return value
