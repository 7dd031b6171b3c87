"""perflake web in a real browser (Debian's chromium driven by Playwright, no browser
download) on a mined history: open the overview, filter the explorer to one kernel, open
a series and find its change point, acknowledge a regression from the page and find it
in perf.regressions and in `perflake triage list`, compare two runs. Each step saves a
screenshot under the test's temporary directory and prints its path.

The history (pool sim-web, dates in 2037): 8 quiet nights, then from the change night
on one copy kernel is 15 % slower and torch moves from 2.12.0 to 2.13.0; a fp32 GEMM
never changes. Published in one pass with the mining job's transformations
(tests/sim_history.py), then perf.series, perf.cases and perf.regressions as a mine ends.
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from kernels_bench.case import Case
from kernels_bench.collectives import free_port
from kernels_bench.sim import Injection
from sim_history import at, land_night, publish
from test_report import _chromium  # one way to find the browser, and one CI rule

POOL = "sim-web"
NIGHTS = [f"2037-04-{d:02d}" for d in range(1, 11)]
CHANGE = NIGHTS[8]
SLOWER = Case.make("memory", "copy", "torch", "fp32", numel=1 << 22)
STEADY = Case.make("gemm", "matmul", "torch", "fp32", m=1024, n=1024, k=1024)
INJECTIONS = (Injection(match={"kernel": "copy", "numel": 1 << 22}, since=CHANGE, factor=1.15),)


@pytest.fixture(scope="module")
def history(spark, lake, tmp_path_factory):
    from jobs.mine import _cases, landed_files, read_landed, update_history
    from pipelines.mining.clean import latest_attempt
    from pipelines.mining.regressions import update_regressions
    from pipelines.warehouse import catalog
    from schemas.tables import CASE_RESULTS, CASES

    tmp = tmp_path_factory.mktemp("web-history")
    for dt in NIGHTS:
        land_night(lake, tmp, dt, POOL, [SLOWER, STEADY], INJECTIONS, prefix="web",
                   torch_version="2.13.0" if dt >= CHANGE else "2.12.0")
    publish(spark, lake, NIGHTS, POOL)
    results = read_landed(spark, [f for dt in NIGHTS for f in landed_files(lake, "case_results", dt, [POOL])],
                          CASE_RESULTS)
    catalog.replace_by_key(spark, lake, _cases(latest_attempt(results.drop("_source"))), CASES)
    # As the last night's mine: only this pool's series (the session's lake holds other tests' pools too).
    update_history(spark, lake, night=NIGHTS[-1], pools=[POOL])
    update_regressions(spark, lake, now=at(NIGHTS[-1]), night=NIGHTS[-1], pools=[POOL])
    return {"runs": [f"web-{dt}-{POOL}" for dt in NIGHTS]}


@pytest.fixture(scope="module")
def server(history, lake):
    import uvicorn

    from pipelines.web.app import create_app

    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(lake), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the web server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    path = _chromium()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("web-screenshots")


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert errors == [], errors  # no script failed on any page


def screenshot(page, shots, name: str) -> None:
    path = shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    print(f"screenshot: {path}")


def wait_for_charts(page) -> None:
    page.wait_for_function("() => [...document.querySelectorAll('.chart')].every(c => c.dataset.ready === '1')",
                           timeout=20_000)


def test_the_overview_shows_the_pool_and_the_explorer_filters_to_one_kernel(server, page, shots):
    page.goto(server + "/")
    row = page.locator("#coverage tr", has_text=POOL)
    assert row.count() == 1 and NIGHTS[-1] in row.inner_text()
    screenshot(page, shots, "1-overview")

    page.goto(f"{server}/explorer?pool={POOL}")
    assert page.locator("a.series-link").count() == 2
    page.select_option("select[name=kernel]", "copy")
    page.click("#filters button")
    page.wait_for_url("**kernel=copy**")
    kernels = page.locator("a.series-link").all_inner_texts()
    assert kernels == ["copy"]
    assert page.locator("td.spark svg polyline").count() == 1
    screenshot(page, shots, "2-explorer-copy")


def test_the_series_page_marks_the_change_point(server, page, shots):
    page.goto(f"{server}/explorer?pool={POOL}&kernel=copy")
    page.click("a.series-link")
    page.wait_for_url("**/series/**")
    wait_for_charts(page)
    step = page.locator(f"tr.change-point[data-change-dt='{CHANGE}']").filter(has_text="latency")
    assert step.count() == 1
    assert "torch 2.12.0 -> 2.13.0" in step.inner_text() and "+1" in step.inner_text()  # +15 % slower
    chart = page.locator("#history-chart")
    assert int(chart.get_attribute("data-change-points")) >= 1
    assert int(chart.get_attribute("data-provenance-changes")) == 1
    assert int(chart.get_attribute("data-points")) == len(NIGHTS)
    assert "torch: 2.12.0 -> 2.13.0" in page.locator("#provenance").inner_text()
    screenshot(page, shots, "3-series-change-point")


def test_acknowledging_from_the_page_writes_through_the_triage_path(server, page, shots, spark, capsys):
    from pipelines.cli import main

    page.goto(f"{server}/regressions?pool={POOL}")
    row = page.locator("tr[data-regression]", has_text="copy").filter(has_text="latency")
    assert row.count() == 1
    rid = row.get_attribute("data-regression")
    row.locator("input[name=by]").fill("web-tester")
    row.locator("input[name=note]").fill("bisecting the copy slowdown")
    row.locator("button", has_text="Acknowledge").click()
    page.wait_for_selector("#done")
    assert rid in page.locator("#done").inner_text()
    screenshot(page, shots, "4-regression-acknowledged")

    (stored,) = spark.sql("SELECT status, acknowledged_by, note FROM perf.regressions WHERE regression_id = ?",
                          args=[rid]).collect()
    assert (stored.status, stored.acknowledged_by, stored.note) == (
        "acknowledged", "web-tester", "bisecting the copy slowdown")
    capsys.readouterr()
    assert main(["triage", "list", "--status", "acknowledged", "--format", "json"]) == 0
    listed = {r["regression_id"]: r for r in json.loads(capsys.readouterr().out)["regressions"]}
    assert listed[rid]["acknowledged_by"] == "web-tester"

    page.goto(f"{server}/regressions?state=acknowledged&pool={POOL}")
    assert page.locator(f"tr[data-regression='{rid}']").count() == 1


def test_comparing_two_runs_finds_the_slower_copy(server, page, shots, history):
    first, last = history["runs"][0], history["runs"][-1]
    page.goto(server + "/compare")
    page.fill("input[name=a]", first)
    page.fill("input[name=b]", last)
    page.click("#compare-form button")
    page.wait_for_url("**/compare?**")
    wait_for_charts(page)
    verdicts = dict(zip(page.locator("#cases td:first-child").all_inner_texts(),
                        page.locator("#cases td.verdict").all_inner_texts()))
    assert verdicts["copy"] == "slower" and verdicts["matmul"] in ("same", "ambiguous")
    assert page.locator("#families tr").count() == 3  # header + memory + gemm
    screenshot(page, shots, "5-compare")
