"""`perflake info`: what the lake holds, at a glance, read through embedded DuckDB (no
JVM): nights, pools, GPUs, runs, samples, the tables and their sizes on disk, open
regressions, the report, the SQL server; and the pools and suites one can run.

  perflake info
  perflake info --format json
"""
from __future__ import annotations

import json
from pathlib import Path

from pipelines.config.lake import Lake


def register(sub) -> None:
    p = sub.add_parser("info", help="what the lake holds: nights, pools, GPUs, runs, samples, tables and sizes")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=_cmd_info)


def lake_info(lake: Lake) -> dict:
    """The lake's contents as plain values (tables read through DuckDB views)."""
    from pipelines.warehouse.duck import duckdb_connection, published_tables

    tables = {name: {"files": len(files), "bytes": sum(Path(f).stat().st_size for f in files)}
              for name, files in published_tables(lake).items()}
    info: dict = {"lake": str(lake.root), "tables": tables, "nights": None, "pools": [], "runs": 0,
                  "samples": 0, "regressions": {}}
    if tables.get("runs", {}).get("files"):
        con = duckdb_connection(lake)
        first, last, nights = con.execute("SELECT min(dt), max(dt), count(DISTINCT dt) FROM perf.runs").fetchone()
        info["nights"] = {"first": first, "last": last, "count": nights}
        info["pools"] = [{"pool": p, "device_kind": k, "gpu_sku": s, "gpu_name": g, "nights": n, "runs": r}
                         for p, k, s, g, n, r in con.execute(
                             "SELECT pool, device_kind, gpu_sku, any_value(gpu_name), count(DISTINCT dt), "
                             "count(DISTINCT run_id) FROM perf.runs GROUP BY ALL ORDER BY pool, gpu_sku").fetchall()]
        info["runs"] = con.execute("SELECT count(DISTINCT run_id) FROM perf.runs").fetchone()[0]
        if tables.get("samples", {}).get("files"):
            info["samples"] = con.execute("SELECT count(*) FROM perf.samples").fetchone()[0]
        if tables.get("regressions", {}).get("files"):
            info["regressions"] = dict(con.execute(
                "SELECT status, count(*) FROM perf.regressions GROUP BY status ORDER BY status").fetchall())
    reports = sorted(lake.reports.glob("nightly-*.html")) if lake.reports.is_dir() else []
    info["newest_report"] = str(reports[-1]) if reports else None
    info["sql_server"] = _sql_server(lake)
    info["services"] = _services(lake)
    return info


def _services(lake: Lake) -> dict[str, str] | None:
    """Each shared service's state (`make status` has pids, addresses and logs), or None
    when the lake is not in services mode."""
    from pipelines.config.services import configured
    from pipelines.deploy import services

    if configured(lake) is None:
        return None
    return {s.name: s.state for s in services.status(lake)}


def _sql_server(lake: Lake) -> str:
    from pipelines.query.server import status

    try:
        s = status(lake)
    except RuntimeError as e:
        return str(e)
    return f"running (pid {s.pid}) on {s.url}" if s.running else "not running (make sql-server)"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _catalogue() -> list[str]:
    """The pools of the registry and the suites one can sweep (no lake needed)."""
    from kernels_bench.suite import SUITES_DIR
    from pipelines.config.pools import load_pools

    pools = ", ".join(f"{p.name} ({p.device_kind} {p.sku}, {p.slots} slot{'s' if p.slots > 1 else ''})"
                      for p in load_pools().values())
    suites = ", ".join(sorted(p.stem for p in SUITES_DIR.glob("*.yaml")))
    return [f"pools:   {pools}", f"suites:  {suites}  (python -m kernels_bench list)"]


def _cmd_info(args) -> int:
    lake = Lake.from_env()
    info = lake_info(lake)
    if args.format == "json":
        print(json.dumps(info, indent=2, default=str))
        return 0
    print(f"lake:    {info['lake']}")
    for line in _catalogue():
        print(line)
    if not info["nights"]:
        print("nothing published yet: `make demo` (one night on this CPU) or `make demo-history` (simulated weeks)")
    else:
        n = info["nights"]
        print(f"nights:  {n['count']} from {n['first']} to {n['last']}; {info['runs']} runs, "
              f"{info['samples']:,} samples")
        for p in info["pools"]:
            kind = "SIMULATED" if p["device_kind"] == "simulated" else p["device_kind"]
            print(f"  {p['pool']:<10} {p['gpu_sku']:<16} {kind}: {p['nights']} night{'s' * (p['nights'] != 1)}, "
                  f"{p['runs']} run{'s' * (p['runs'] != 1)}")
        if info["regressions"]:
            print("changes: " + ", ".join(f"{n} {s}" for s, n in info["regressions"].items())
                  + "  (perflake regressions, perflake triage list)")
    if info["tables"]:
        print("tables:  " + ", ".join(f"perf.{t} {_size(v['bytes'])}" for t, v in info["tables"].items()
                                      if v["files"]))
    if info["newest_report"]:
        print(f"report:  {info['newest_report']}")
    if info["services"] is None:
        print(f"sql:     {info['sql_server']}")
        print("services: not set up on this lake (make up: PostgreSQL, the SQL service, Airflow; docs/deploy.md)")
    else:
        print("services: " + ", ".join(f"{name} {state}" for name, state in info["services"].items())
              + "  (make status)")
    return 0
