"""Errors in what the harness was asked to do (an unknown suite, GPU SKU or device, a
malformed option), as opposed to bugs. `python -m kernels_bench` prints a UsageError as
one line and exits 2 (with -v, after its traceback); any other exception is a bug and
keeps its traceback."""
from __future__ import annotations


class UsageError(Exception):
    """Bad input from whoever runs the harness; its message says what and how to fix it.
    Subclasses also derive from the built-in error their callers catch (SuiteError is a
    ValueError, hardware.UnknownSku a KeyError), so that this adds a meaning and
    changes no `except` elsewhere."""
