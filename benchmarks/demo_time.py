"""How long `make demo` takes from a fresh lake, and how many lines it prints (issue #20:
under 120 s and 40 lines on a 2-core machine, venv built).

    .venv/bin/python benchmarks/demo_time.py [--repeats 1] [--history] [--out /tmp/demo-time.json]

Each repeat runs `perflake demo` (what `make demo` runs) in a fresh lake under a
temporary directory, with the Makefile's Airflow variables, and reports: wall time,
the CPU time of the demo's whole process tree, JVM included, polled (a lower bound; steadier than wall time
under load: on an idle 2-core machine the wall time cannot be under CPU / 2), the lines printed, each task line's seconds,
and the load average before and after. With --history it then runs `perflake
demo-history` in the same lake. Figures go to benchmarks/NOTES-demo.md by hand, with
the machine, the date and the load: on a shared machine the load decides the wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PERFLAKE = REPO / ".venv" / "bin" / "perflake"
TASK_LINE = re.compile(r"^\s+\[\s*\d+/\d+\] (\S+)\s.*\(([\d.]+) s;")


def tree_cpu_s(root: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds so far of `root` and each descendant (the JVM that pyspark
    starts is never waited for, so rusage of children misses it): polled, the last value
    of each process counts."""
    import psutil

    try:
        procs = [psutil.Process(root)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return
    for p in procs:
        try:
            t = p.cpu_times()
            seen[p.pid] = t.user + t.system
        except psutil.Error:
            pass


def timed(cmd: list[str], env: dict) -> dict:
    """Run `cmd`; wall seconds, CPU seconds of its whole process tree (polled every
    0.5 s: a process living under 0.5 s may be missed), its output lines."""
    load = os.getloadavg()
    t0 = time.monotonic()
    cpu: dict[int, float] = {}
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        while proc.poll() is None:
            tree_cpu_s(proc.pid, cpu)
            time.sleep(0.5)
        wall = time.monotonic() - t0
        out.seek(0)
        lines = out.read().splitlines()
    return {"cmd": " ".join(cmd[1:]), "rc": proc.returncode, "wall_s": round(wall, 1),
            "cpu_s": round(sum(cpu.values()), 1),
            "lines": len(lines), "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "tasks": [(m.group(1), float(m.group(2))) for m in map(TASK_LINE.match, lines) if m],
            "output": lines}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--history", action="store_true", help="also time `perflake demo-history` (after the last demo)")
    ap.add_argument("--nights", type=int, default=None, help="demo-history --nights")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the lakes (printed)")
    args = ap.parse_args(argv)
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()},
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": []}
    for i in range(args.repeats):
        root = Path(tempfile.mkdtemp(prefix="perflake-demo-time-"))
        lake = root / "data"
        env = {**os.environ, "PERFLAKE_HOME": str(lake), "AIRFLOW_HOME": str(lake / "airflow"),
               "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{lake}/airflow/airflow.db"}
        run = timed([str(PERFLAKE), "demo"], env)
        results["runs"].append(run)
        print(f"demo {i + 1}: rc {run['rc']}, {run['wall_s']} s wall, {run['cpu_s']} s CPU, {run['lines']} lines, "
              f"load {run['load_before'][0]} -> {run['load_after'][0]}")
        for task, seconds in run["tasks"]:
            print(f"    {task:<16} {seconds:>7.1f} s")
        if args.history and i == args.repeats - 1:
            cmd = [str(PERFLAKE), "demo-history"] + (["--nights", str(args.nights)] if args.nights else [])
            hist = timed(cmd, env)
            results["history"] = hist
            print(f"demo-history: rc {hist['rc']}, {hist['wall_s']} s wall, {hist['cpu_s']} s CPU, "
                  f"{hist['lines']} lines, load {hist['load_before'][0]} -> {hist['load_after'][0]}")
        if args.keep:
            print(f"    lake kept: {lake}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0 if all(r["rc"] == 0 for r in results["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
