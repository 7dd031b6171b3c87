"""One triage write (acknowledge or close) in a process of its own, for a long-lived
process that must not keep a Spark JVM: the dashboard. A Spark session holds the lake's
embedded metastore until its process ends, so a write made inside the dashboard would
keep every later mine of the lake out until the dashboard stopped. The child starts
Spark, writes through pipelines.triage.status (the path `perflake triage` takes), and
ends, releasing the metastore.

`apply(lake, action, regression_id, by, note)` returns None when written, or (HTTP
status, sentence): 404 no such regression, 409 its state forbids it, 503 Spark cannot
start now (a mine holds the metastore, services down). The child reads its request as
JSON on stdin and prints its answer as one JSON line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from pipelines.config.lake import Lake

TIMEOUT_S = 600  # a JVM's start and one snapshot of perf.regressions on a loaded machine


def apply(lake: Lake, action: str, regression_id: str, by: str, note: str) -> tuple[int, str] | None:
    request = json.dumps({"action": action, "regression_id": regression_id, "by": by, "note": note})
    env = {**os.environ, "PERFLAKE_HOME": str(lake.root)}
    try:
        done = subprocess.run([sys.executable, "-m", "pipelines.triage.apply"], input=request, env=env, text=True,
                              capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 503, f"the triage write did not finish in {TIMEOUT_S} s; it may or may not have been written: reload and check"
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = " ".join(done.stderr.strip().splitlines()[-1:])
        raise RuntimeError(f"the triage write ended with status {done.returncode} and no answer: {tail}") from None
    return None if answer.get("status") == 200 else (int(answer["status"]), str(answer["detail"]))


def write_here(lake: Lake, action: str, regression_id: str, by: str, note: str) -> tuple[int, str] | None:
    """The write in this process (its Spark session, started if need be): None, or
    (HTTP status, sentence) as `apply` returns."""
    from pipelines.triage import status as triage
    from pipelines.warehouse.preflight import SparkUnavailable
    from pipelines.warehouse.session import get_spark

    change = triage.acknowledge if action == "ack" else triage.close
    try:
        change(get_spark(lake, app="perflake-triage"), lake, regression_id, by=by, note=note)
    except KeyError as e:
        return 404, str(e).strip("'\"")
    except SparkUnavailable as e:
        return 503, str(e)
    except ValueError as e:
        return 409, str(e)
    return None


def main() -> int:
    request = json.loads(sys.stdin.read())
    refused = write_here(Lake.from_env(), request["action"], request["regression_id"], request["by"], request["note"])
    status, detail = refused or (200, "written")
    print(json.dumps({"status": status, "detail": detail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
