"""What one big shard costs `perflake ingest`: seconds and peak memory to land it, and to
recognise it as already landed on a second ingest, beside the I/O floor (the same three
Parquet files read and written by pyarrow, nothing checked).

The shard is SYNTHETIC (the tests' shard generator: `cases` cases x `samples` samples,
an H100 run row), landed in a fresh lake under a temporary folder. Each phase runs in a
child process of its own, so that each peak (ru_maxrss) is that phase's alone.

    .venv/bin/python benchmarks/ingest_size.py --cases 100 --samples 12000   # 1.2 M rows
    .venv/bin/python benchmarks/ingest_size.py --cases 100 --samples 12000 --bad 10   # 10 of them impossible
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PHASE = r"""
import datetime as dt, json, resource, sys, time
from pathlib import Path
sys.path[:0] = [{repo!r}, {tests!r}]
what, root, cases, samples, bad = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
t = time.perf_counter()
if what == "make":
    from test_ingest import shard_rows, write_shard
    rows = shard_rows("big-1", cases=cases, samples=samples,
                      started=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1))
    for k in range(bad):  # impossible latencies spread over the shard: set aside, row by row
        rows["samples"][k * (len(rows["samples"]) // bad)]["latency_ns"] = 0
    write_shard(root / "in" / "big-1", rows)
    out = {{}}
elif what == "floor":
    import pyarrow.parquet as pq
    (root / "floor").mkdir(exist_ok=True)
    for f in sorted((root / "in" / "big-1").glob("*.parquet")):
        pq.write_table(pq.read_table(f), root / "floor" / f.name)
    out = {{}}
else:
    from pipelines.config.lake import Lake
    from pipelines.config.pools import load_pools
    from pipelines.landing.ingest import ingest
    report = ingest([root / "in"], Lake(root / "lake"), pool="h200", registry=load_pools(), force_pool=True)
    out = {{"counts": report.counts}}
print(json.dumps({{**out, "s": round(time.perf_counter() - t, 2),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}}))
"""


def phase(what: str, root: Path, cases: int, samples: int, bad: int = 0) -> dict:
    code = PHASE.format(repo=str(REPO), tests=str(REPO / "tests"))
    out = subprocess.run([sys.executable, "-c", code, what, str(root), str(cases), str(samples), str(bad)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--samples", type=int, default=12000, help="samples per case")
    ap.add_argument("--bad", type=int, default=0, help="sample rows made impossible (latency 0), spread evenly")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        phase("make", root, args.cases, args.samples, args.bad)
        size = sum(f.stat().st_size for f in (root / "in").rglob("*.parquet"))
        floor = phase("floor", root, args.cases, args.samples)
        first = phase("ingest", root, args.cases, args.samples)
        again = phase("ingest", root, args.cases, args.samples)
    rows = args.cases * args.samples
    print(f"SYNTHETIC shard: {rows:,} sample rows ({args.bad} impossible), {size / 2**20:.1f} MiB of Parquet")
    print("| phase | s | peak MB | x floor (s) | outcome |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| I/O floor: read and write the 3 files (pyarrow) | {floor['s']} | {floor['peak_mb']} | 1.0 | |")
    for name, r in (("ingest, first", first), ("ingest again (already landed)", again)):
        print(f"| {name} | {r['s']} | {r['peak_mb']} | {r['s'] / max(floor['s'], 1e-3):.0f} | {r['counts']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
