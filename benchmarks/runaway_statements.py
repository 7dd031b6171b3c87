"""Statements that ignore their cancel, against the JDBC SQL service (docs/security.md,
layer 4; tests/test_hostile_sql.py is the bounded check). On a small lake of its own
(three rows, loopback, a free port), for each grace given:

1. the service is started with that `runaway_grace_s` (a huge one stands for the service
   without perflake.gate.RunawayTasks: nothing is stopped within the run);
2. the runaway statements of tests/hostile.py (two one-task rows and one folded constant,
   each minutes of work that never looks for an interrupt) are sent at once; each times
   out after --timeout seconds;
3. then a light statement (`count(*)` of three rows) is sent every --every seconds for
   --watch seconds: whether it was answered, and how long it took;
4. the service's CPU seconds per wall second over the watch (2.0 = both cores busy).

    python benchmarks/runaway_statements.py [--grace 5 100000] [--timeout 15] [--watch 90]

Prints one JSON document (also written to --out) with the machine's load average: on a
shared machine the latencies move with the neighbours' load.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from hostile import RUNAWAYS, at_once  # noqa: E402
from kernels_bench.collectives import free_port  # noqa: E402
from pipelines.config.lake import Lake  # noqa: E402
from pipelines.query import server as sqlserver  # noqa: E402

LIGHT = "SELECT count(*) FROM perf.dq_results"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_one(lake: Lake, grace_s: int, timeout_s: int, watch_s: float, every_s: float) -> dict:
    port = free_port()
    audit = sqlserver.audit_log(lake)
    seen = len(audit.read_text().splitlines()) if audit.exists() else 0  # earlier runs' lines
    sqlserver.start(lake, port=port, timeout_s=300, query_timeout_s=timeout_s, runaway_grace_s=grace_s)
    try:
        pid = sqlserver.status(lake).pid
        t0 = time.monotonic()
        answers = at_once(lambda sql: sqlserver.query_via_jdbc([sql], port=port, timeout_s=timeout_s + 120)[0],
                          RUNAWAYS, timeout_s + 180)
        runaways_s = time.monotonic() - t0
        cpu0, w0 = _cpu_s(pid), time.monotonic()
        light = []
        while time.monotonic() - w0 < watch_s:
            t1 = time.monotonic()
            a = sqlserver.query_via_jdbc([LIGHT], port=port, timeout_s=timeout_s + 120)[0]
            light.append({"at_s": round(t1 - t0, 1), "ok": a["ok"], "s": round(time.monotonic() - t1, 2)})
            time.sleep(max(0.0, every_s - (time.monotonic() - t1)))
        busy = (_cpu_s(pid) - cpu0) / (time.monotonic() - w0)
        lines = audit.read_text().splitlines()[seen:]
        return {"grace_s": grace_s, "runaways_answered_after_s": round(runaways_s, 1),
                "runaways_ok": [a["ok"] for a in answers.values()],
                "light": light, "light_answered": sum(x["ok"] for x in light), "light_sent": len(light),
                "service_cpu_per_wall_s": round(busy, 2),
                "stopped": sum(" runaway-stopped " in ln for ln in lines)}
    finally:
        sqlserver.stop(lake)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grace", type=int, nargs="+", default=[5, 100000], help="runaway_grace_s values, one run each")
    p.add_argument("--timeout", type=int, default=15, help="the service's statement timeout (s)")
    p.add_argument("--watch", type=float, default=90.0, help="how long light statements are sent after (s)")
    p.add_argument("--every", type=float, default=10.0, help="seconds between light statements")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="perflake-runaway-") as tmp:
        root = Path(tmp) / "lake"
        subprocess.run([sys.executable, "-c", f"from tests.hostile import _build_lake; _build_lake({str(root)!r})"],
                       check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        results = []
        for grace in args.grace:
            load = os.getloadavg()[0]
            results.append({**run_one(Lake(root), grace, args.timeout, args.watch, args.every),
                            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)})
    doc = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "statements": RUNAWAYS, "timeout_s": args.timeout, "runs": results}
    text = json.dumps(doc, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
