"""Speed of perflake web on a year-long lake (not a timed test; figures in NOTES-web.md).

Serves the app on the simulated lake of benchmarks/web_lake.py (uvicorn in a process of
its own, loopback) and measures, per page:
- server time: wall time of HTTP GETs of the page (p50 and p95 over REPEATS, after one
  warm-up request);
- first views: pages whose answer is computed once per copy of the lake and then kept
  (compare, roofline), each asked for a view no one asked for before;
- first paint and charts drawn: headless Chromium (Debian's, through Playwright), the
  page's `first-contentful-paint` and the time until every chart marked itself ready.

With `--baseline REV` a second server runs git revision REV's code on the same lake and
every measurement alternates between the two (the same request, one after the other), so
the ratio after/before holds on a loaded machine where the absolute figures do not; the
1-minute load average is recorded with each page's figures.

  python benchmarks/web_pages.py                         # 365 nights, 2,000 series, 4 pools
  python benchmarks/web_pages.py --nights 60 --series 400 --lake /tmp/web-bench
  python benchmarks/web_pages.py --lake /tmp/web-bench --reuse --baseline 8151fde --json out.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_lake import POOLS, TARGET, build_lake  # noqa: E402  (tests/test_web.py builds its lake through here)

__all__ = ["build_lake", "pages", "main"]
# A server process: the code tree, the lake and the port are its arguments.
SERVE = """
import sys
sys.path.insert(0, sys.argv[1])
import uvicorn
from pipelines.config.lake import Lake
from pipelines.web.app import create_app
uvicorn.run(create_app(Lake.from_env(sys.argv[2])), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
"""
FIRST_VIEWS = 5  # new views asked of each page that keeps its answers


@dataclass
class Server:
    """One running dashboard: `name` (after, before), the code it runs, its process."""

    name: str
    code: Path
    port: int
    process: subprocess.Popen
    started: float
    load_s: float = float("nan")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def pages(info: dict) -> dict[str, str]:
    """Page name -> path (with the query string of a typical view)."""
    return {
        "overview": "/",
        "explorer": "/explorer",
        "explorer (kernel filter, sorted by change)": f"/explorer?kernel={info['kernel']}&sort=change&order=desc",
        "series": f"/series/{info['series_key']}",
        "regressions": "/regressions",
        "compare (two runs)": f"/compare?a={info['run_a']}&b={info['run_b']}",
        "roofline": "/roofline?sku=H100-SXM5-80GB",
        "roofline (projections)": f"/roofline?sku={TARGET}",
    }


def first_views(info: dict, n: int) -> dict[str, list[str]]:
    """Page name -> `n` views not asked for by `pages` nor by each other."""
    last = datetime.date.fromisoformat(info["last_dt"])
    skus = sorted(set(POOLS.values()))
    return {
        "compare, first view of a new pair": [
            "/compare?a={}&b={}".format(*(f"nightly-{last - datetime.timedelta(days=k + d)}-sim-h100-b" for d in (1, 0)))
            for k in range(n)],
        "roofline, first view of a night": [
            f"/roofline?sku={skus[k % len(skus)]}&date={last - datetime.timedelta(days=k + 1)}" for k in range(n)],
    }


def start(name: str, code: Path, lake: str, port: int) -> Server:
    process = subprocess.Popen([sys.executable, "-c", SERVE, str(code), lake, str(port)], cwd=code)
    return Server(name, code, port, process, time.perf_counter())


def wait_ready(server: Server, timeout_s: float = 900) -> None:
    """Until the server answers (it loads the lake before it does)."""
    import httpx

    while time.perf_counter() - server.started < timeout_s:
        if server.process.poll() is not None:
            raise RuntimeError(f"the {server.name} server ({server.code}) exited with {server.process.returncode}")
        try:
            if httpx.get(server.base + "/healthz", timeout=5).status_code == 200:
                server.load_s = time.perf_counter() - server.started
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the {server.name} server did not answer within {timeout_s:.0f} s")


def export(rev: str, into: Path) -> Path:
    """Revision `rev` of this repository's files under `into` (git archive)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _alternating(servers: list[Server], i: int) -> list[Server]:
    return servers if i % 2 == 0 else servers[::-1]


def server_times(clients: dict, servers: list[Server], path: str, repeats: int) -> dict[str, list[float]]:
    """Per server, the wall times of `repeats` GETs of `path` after one warm-up, alternating."""
    for s in servers:
        r = clients[s.name].get(path)
        assert r.status_code == 200, (s.name, path, r.status_code, r.text[:300])
    times = {s.name: [] for s in servers}
    for i in range(repeats):
        for s in _alternating(servers, i):
            t = time.perf_counter()
            r = clients[s.name].get(path)
            times[s.name].append((time.perf_counter() - t) * 1e3)
            assert r.status_code == 200, (s.name, path, r.status_code)
    return times


def first_view_times(clients: dict, servers: list[Server], paths: list[str]) -> dict[str, list[float]]:
    """Per server, the wall time of one GET of each path (each new to every server)."""
    times = {s.name: [] for s in servers}
    for i, path in enumerate(paths):
        for s in _alternating(servers, i):
            t = time.perf_counter()
            r = clients[s.name].get(path)
            times[s.name].append((time.perf_counter() - t) * 1e3)
            assert r.status_code == 200, (s.name, path, r.status_code, r.text[:300])
    return times


def paint_times(servers: list[Server], paths: dict[str, str], browser_path: str, repeats: int) -> dict:
    """Page name -> server name -> median first paint and charts-drawn times."""
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        tabs = {}
        for s in servers:  # the static files are cached, as in a session
            tabs[s.name] = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            tabs[s.name].goto(s.base + "/static/style.css")
            tabs[s.name].goto(s.base + "/static/vendor/echarts.min.js")
        for name, path in paths.items():
            fcp, charts = {s.name: [] for s in servers}, {s.name: [] for s in servers}
            for i in range(repeats):
                for s in _alternating(servers, i):
                    page = tabs[s.name]
                    t = time.perf_counter()
                    page.goto(s.base + path, wait_until="load")
                    page.wait_for_function(
                        "() => performance.getEntriesByName('first-contentful-paint').length > 0", timeout=10_000)
                    fcp[s.name].append(page.evaluate(
                        "() => performance.getEntriesByName('first-contentful-paint')[0].startTime"))
                    expected = page.evaluate("() => document.querySelectorAll('.chart').length")
                    page.wait_for_function(
                        f"() => document.querySelectorAll('.chart[data-ready=\"1\"]').length >= {expected}",
                        timeout=60_000)
                    charts[s.name].append((time.perf_counter() - t) * 1e3)
            out[name] = {s.name: {"first_paint_ms": statistics.median(fcp[s.name]),
                                  "charts_ready_ms": statistics.median(charts[s.name])} for s in servers}
        browser.close()
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def measure(servers: list[Server], info: dict, args) -> dict:
    """Page name -> {server name -> figures, 'load': 1-minute load average before and after}."""
    import httpx

    results = {}
    clients = {s.name: httpx.Client(base_url=s.base, timeout=300) for s in servers}
    try:
        measured = [(name, path, server_times, args.repeats) for name, path in pages(info).items()]
        measured += [(name, paths, first_view_times, None) for name, paths in first_views(info, FIRST_VIEWS).items()]
        for name, path, how, repeats in measured:
            load = os.getloadavg()[0]
            times = how(clients, servers, path, repeats) if repeats else how(clients, servers, path)
            results[name] = {"path": path if repeats else f"{path[0]} ... ({len(path)} views)",
                             "load": [load, os.getloadavg()[0]],
                             **{s: {"p50_ms": pct(t, 50), "p95_ms": pct(t, 95)} for s, t in times.items()}}
    finally:
        for c in clients.values():
            c.close()
    if args.paint_repeats:
        for name, by_server in paint_times(servers, pages(info), args.browser, args.paint_repeats).items():
            for s, figures in by_server.items():
                results[name][s].update(figures)
    return results


def report(results: dict, servers: list[Server], info: dict) -> None:
    print(f"\n{platform.node()} {os.cpu_count()} cores, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} "
          f"UTC; {info['nights']} nights, {info['series']} series, {info['pools']} pools; lake loaded in "
          + ", ".join(f"{s.load_s:.1f} s ({s.name})" for s in servers))
    names = [s.name for s in servers]
    cols = "".join(f" {n + ' p50':>12} {'p95':>7} {'paint':>6} {'charts':>6}" for n in names)
    print(f"{'page':44}{cols}" + (f" {'p95 ' + names[0] + '/' + names[1]:>15}" if len(names) == 2 else "")
          + f" {'load':>11}")
    for page, r in results.items():
        line = f"{page:44}"
        for n in names:
            f = r[n]
            line += (f" {f['p50_ms']:10.0f}ms {f['p95_ms']:5.0f}ms {f.get('first_paint_ms', float('nan')):6.0f}"
                     f" {f.get('charts_ready_ms', float('nan')):6.0f}")
        if len(names) == 2:
            line += f" {r[names[0]]['p95_ms'] / r[names[1]]['p95_ms']:15.3f}"
        print(line + f" {r['load'][0]:5.1f}-{r['load'][1]:<5.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lake", default="/tmp/perflake-web-bench")
    ap.add_argument("--nights", type=int, default=365)
    ap.add_argument("--series", type=int, default=2000)
    ap.add_argument("--sample-nights", type=int, default=14, help="newest nights that keep raw samples")
    ap.add_argument("--reuse", action="store_true", help="measure the lake already built at --lake")
    ap.add_argument("--baseline", metavar="REV", help="also serve git revision REV's code and alternate with it")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--paint-repeats", type=int, default=3, help="0: no browser")
    ap.add_argument("--port", type=int, default=8765, help="this checkout's server; the baseline's is the next")
    ap.add_argument("--browser", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    info_path = Path(args.lake) / "bench-info.json"
    if args.reuse and info_path.exists():
        info = json.loads(info_path.read_text())
    else:
        t = time.perf_counter()
        info = build_lake(Path(args.lake), args.nights, args.series, args.sample_nights)
        info["build_s"] = round(time.perf_counter() - t, 1)
        info_path.write_text(json.dumps(info))
        print(f"built {info['nights']} nights x {info['series']} series in {info['build_s']} s at {args.lake}")
    with tempfile.TemporaryDirectory(prefix="web-bench-") as tmp:
        servers = [start("after" if args.baseline else "server", ROOT, args.lake, args.port)]
        if args.baseline:
            servers.append(start("before", export(args.baseline, Path(tmp) / "baseline"), args.lake, args.port + 1))
        try:
            for s in servers:  # both load at once: each load time is an upper bound
                wait_ready(s)
            results = measure(servers, info, args)
        finally:
            for s in servers:
                s.process.terminate()
                s.process.wait(timeout=60)
    report(results, servers, info)
    if args.json:
        Path(args.json).write_text(json.dumps({"info": info, "baseline": args.baseline, "results": results,
                                               "load_s": {s.name: s.load_s for s in servers}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
