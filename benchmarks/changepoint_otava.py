"""Apache Otava 0.8 as the peer of the change detector's evaluations: it runs in its own
virtual environment as a subprocess, so the project environment stays clean
($PERFLAKE_OTAVA_PYTHON, else otava-venv/bin/python in the system's temporary
directory; how to make it: `changepoint_eval`'s docstring). Without it, `run_otava`
returns None and the reports print "n/a"."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

OTAVA_PYTHON = Path(os.environ.get("PERFLAKE_OTAVA_PYTHON")
                    or Path(tempfile.gettempdir()) / "otava-venv" / "bin" / "python")
# Reads {"series": [[...], ...], "min_magnitude": m, "max_pvalue": p} on stdin; writes the change indices
# (first point of each new segment) of every series, one list per series, as JSON.
OTAVA_RUNNER = """
import json, sys
from otava.analysis import compute_change_points
job = json.load(sys.stdin)
out = []
for s in job["series"]:
    cps, _ = compute_change_points(list(s), min_magnitude=job["min_magnitude"], max_pvalue=job["max_pvalue"])
    out.append(sorted(int(c.index) for c in cps))
json.dump(out, sys.stdout)
"""


# Otava 0.8's default significance level (compute_change_points' max_pvalue).
OTAVA_DEFAULT_PVALUE = 0.001


def run_otava(series: list[np.ndarray], min_magnitude: float = 0.0,
              max_pvalue: float = OTAVA_DEFAULT_PVALUE) -> list[list[int]] | None:
    """Otava's change indices for each series (its defaults but for max_pvalue), or None
    if Otava is not installed."""
    if not OTAVA_PYTHON.exists():
        return None
    job = json.dumps({"series": [list(map(float, s)) for s in series], "min_magnitude": min_magnitude,
                      "max_pvalue": max_pvalue})
    done = subprocess.run([str(OTAVA_PYTHON), "-c", OTAVA_RUNNER], input=job, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Otava runner failed (rc {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)
