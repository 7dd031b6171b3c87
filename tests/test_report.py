"""The nightly report and the comparison report: built from a small simulated night
(tests/report_data.py), checked as HTML, and rendered by a real headless browser
(Debian's chromium) whose DOM and screenshot are checked too."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from report_data import DT, FAILED_ERROR, H100, H200, TORCH_A, TORCH_B, sim_night

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Dom(HTMLParser):
    """Every element of a page with its attributes, its text and its ancestors' ids."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "col", "area", "base", "source"}

    def __init__(self, text: str):
        super().__init__()
        self.stack, self.elements = [], []
        self.feed(text)
        self.close()

    def _open(self, tag, attrs, push):
        el = {"tag": tag, "attrs": dict(attrs), "text": "", "ancestors": [e["attrs"].get("id") for e in self.stack]}
        self.elements.append(el)
        if push and tag not in self.VOID:
            self.stack.append(el)

    def handle_starttag(self, tag, attrs):
        self._open(tag, attrs, True)

    def handle_startendtag(self, tag, attrs):
        self._open(tag, attrs, False)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for el in self.stack:
            el["text"] += data

    def find(self, cls: str | None = None, tag: str | None = None, within: str | None = None) -> list[dict]:
        return [e for e in self.elements
                if (cls is None or cls in e["attrs"].get("class", "").split())
                and (tag is None or e["tag"] == tag) and (within is None or within in e["ancestors"])]

    def by_id(self, id_: str) -> dict:
        found = [e for e in self.elements if e["attrs"].get("id") == id_]
        assert found, f"no element with id {id_!r}"
        return found[0]


@pytest.fixture(scope="module")
def night(spark, lake, tmp_path_factory):
    from pipelines.config.progress import Progress
    from pipelines.projection.roofline import project_job
    from pipelines.report.nightly import build_nightly

    info = sim_night(spark, lake, tmp_path_factory.mktemp("rpt-staging"))
    project_job(lake, H200, source=H100, device_kind="simulated", source_dates=[DT], source_pools=["sim-h100"],
                measured_dates=[DT], measured_pools=["sim-h200"], spark=spark, progress=Progress(5, quiet=True))
    path = build_nightly(lake, DT, quiet=True)
    return {**info, "path": path, "html": path.read_text(), "dom": Dom(path.read_text())}


def _ok_placed(spark, sku: str) -> int:
    """Successful cases with flops and bytes on `sku` that night (latest attempt)."""
    return spark.sql(f"SELECT count(DISTINCT case_id) FROM perf.case_stats WHERE dt = '{DT}' AND gpu_sku = '{sku}' "
                     f"AND status = 'ok' AND median_ns > 0 AND flops_per_call > 0 AND bytes_per_call > 0 "
                     f"AND run_id LIKE 'rpt-%'").collect()[0][0]


# --- the nightly report as written ---------------------------------------------------------

def test_report_lands_under_the_lake_and_names_the_data_it_was_built_from(night, lake):
    assert night["path"] == lake.reports / f"nightly-{DT}.html"
    prov = night["dom"].by_id("provenance")["text"]
    assert str(lake.root) in prov and DT in prov
    for run_id in night["run_ids"]:
        assert run_id in prov
    assert "perf.case_stats" in prov and "perf.runs" in prov and "perf.projections" in prov


def test_simulated_data_is_labelled_as_simulated(night):
    banner = night["dom"].by_id("simulated-banner")["text"]
    assert "Simulated data" in banner and "sim-h100" in banner and "sim-h200" in banner
    assert "(simulated)" in night["dom"].by_id("roofline")["text"]


def test_the_report_is_self_contained(night):
    html = night["html"]
    assert "<script" not in html and "<link" not in html and " src=" not in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html


def test_roofline_places_every_case_with_work_under_the_roofs(night, spark):
    dom = night["dom"]
    for sku in (H100, H200):
        chart = f"roofline-{sku.lower()}-simulated"
        points = dom.find("case-point", within=chart)
        assert len(points) == _ok_placed(spark, sku) >= 20
        assert len(dom.find("roof-memory", within=chart)) == 1
        peaks = {float(e["attrs"]["data-peak-tflops"]) for e in dom.find("roof-compute", within=chart)}
        assert peaks == {989.4, 66.9}  # bf16 and fp32 on the spec sheet


def test_heat_map_cells_carry_the_percent_of_peak_of_their_case(night, spark):
    dom = night["dom"]
    cells = dom.find("heat-cell", within="heatmap-gemm")
    values = sorted(float(c["attrs"]["data-value"]) for c in cells if "data-value" in c["attrs"])
    expected = [r[0] for r in spark.sql(
        f"SELECT pct_of_peak FROM perf.case_stats WHERE dt = '{DT}' AND family = 'gemm' AND status = 'ok' "
        f"AND run_id IN ('rpt-{DT}-sim-h100-torch-b', 'rpt-{DT}-sim-h200')").collect()]
    assert values == pytest.approx(sorted(expected), rel=1e-3)
    heatmaps = {e["attrs"].get("id") for e in dom.find("heatmap")}
    assert {"heatmap-memory", "heatmap-norm", "heatmap-attention"} <= heatmaps


def test_coverage_shows_the_failed_case_with_its_error_and_the_pools_that_did_not_run(night):
    dom = night["dom"]
    failed = dom.by_id("not-ok-cases")["text"]
    assert FAILED_ERROR in failed and "sim-h200" in failed
    pools = dom.by_id("coverage-pools")["text"]
    assert "sim-h100" in pools and "sim-h200" in pools
    assert "cpu" in dom.by_id("pools-not-run")["text"]


def test_the_noisy_case_is_listed_as_unstable(night, spark):
    unstable = spark.sql(f"SELECT count(*) FROM perf.case_stats WHERE dt = '{DT}' AND run_id LIKE 'rpt-%' "
                         f"AND status = 'ok' AND NOT stable").collect()[0][0]
    assert unstable >= 1
    rows = night["dom"].find(tag="tr", within="unstable-cases")
    assert len(rows) == unstable + 1  # the header row


def test_regressions_section_says_honestly_what_it_has(night, lake):
    from pipelines.warehouse.duck import published_tables

    text = night["dom"].by_id("regressions")["text"]
    if published_tables(lake).get("regressions"):
        assert "No regression table yet" not in text
    else:
        assert "No regression table yet" in text


def test_projections_section_shows_the_error_once_the_target_was_measured(night):
    dom = night["dom"]
    chart = "projection-h200-sxm-141gb-h100-sxm5-80gb-simulated"
    assert len(dom.find("projection-point", within=chart)) >= 20
    assert "median |error|" in dom.by_id(f"projection-errors-h200-sxm-141gb-h100-sxm5-80gb-simulated")["text"]


def test_a_regression_is_drawn_with_points_band_change_point_and_levels():
    from pipelines.report.regressions import section

    runs = [f"r{i}" for i in range(12)]
    history = pd.DataFrame({"series_key": "s1", "run_id": runs, "dt": [f"2035-01-{i + 1:02d}" for i in range(12)],
                            "median_ns": [100.0] * 8 + [110.0] * 4, "median_ci_low_ns": [98.0] * 8 + [108.0] * 4,
                            "median_ci_high_ns": [102.0] * 8 + [112.0] * 4})
    regressions = pd.DataFrame([{"series_key": "s1", "case_id": "c1", "kernel": "matmul", "dtype": "bf16",
                                 "gpu_sku": H100, "device_kind": "simulated", "change_run_id": "r8",
                                 "change_dt": "2035-01-09", "last_good_run_id": "r7", "before_ns": 100.0,
                                 "after_ns": 110.0, "change_pct": 10.0, "q_value": 0.001, "direction": "regression",
                                 "status": "confirmed", "cause": "torch 2.12 -> 2.13"}])
    dom = Dom(section(regressions, "2035-01-09", runs, pd.DataFrame(), history))
    chart = "history-s1"
    assert len(dom.find("history-point", within=chart)) == 12
    assert dom.find("ci-band", within=chart) and dom.find("change-point", within=chart)
    assert dom.find("level-before", within=chart) and dom.find("level-after", within=chart)
    assert "torch 2.12 -> 2.13" in dom.find("regressions", tag="table")[0]["text"]
    absent = Dom(section(None, DT, [], pd.DataFrame(), pd.DataFrame()))
    assert "No regression table yet" in absent.find("no-regression-table")[0]["text"]


# --- comparisons ---------------------------------------------------------------------------

def test_comparing_h100_with_h200_shows_the_h200_faster_on_memory_bound_kernels(night, lake):
    from pipelines.report.versus import build_compare

    path = build_compare(lake, "gpu_sku", H100, "gpu_sku", H200, dt_a=DT, dt_b=DT, quiet=True)
    dom = Dom(path.read_text())
    memory = dom.find("speedup-point", within="speedup-memory")
    assert len(memory) == 11  # every memory case of the suite, measured on both
    # The simulated H200 has 4.8 TB/s against 3.35: every streaming kernel is faster, beyond its CI.
    assert all("verdict-faster" in p["attrs"]["class"] for p in memory)
    assert len(dom.find("speedup-ci", within="speedup-memory")) == 11
    assert "Simulated data" in dom.by_id("simulated-banner")["text"]
    assert "gemm" in dom.by_id("compare-summary")["text"]


def test_comparing_two_torch_versions_on_one_simulated_gpu_finds_them_the_same(night, lake, capsys):
    from pipelines.cli import main
    from pipelines.report.versus import family_summary, match_keys, select, speedups
    from pipelines.warehouse.frames import Frames

    os.environ["PERFLAKE_HOME"], old = str(lake.root), os.environ.get("PERFLAKE_HOME")
    try:
        assert main(["report", "compare", "--torch-a", TORCH_A, "--torch-b", TORCH_B, "--date", DT]) == 0
    finally:
        os.environ.pop("PERFLAKE_HOME") if old is None else os.environ.update(PERFLAKE_HOME=old)
    path = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert path.exists() and len(Dom(path.read_text()).find("speedup-point", within="speedup-gemm")) == 12
    with Frames(lake) as frames:
        a, b = select(frames, "torch_version", TORCH_A, DT), select(frames, "torch_version", TORCH_B, DT)
    pairs = speedups(a.stats, b.stats, match_keys("torch_version"))
    assert set(pairs["gpu_sku"]) == {H100}  # software compared on the same GPU only, never across GPUs
    gemm = family_summary(pairs).set_index("family").loc["gemm"]
    assert gemm["speedup"] == pytest.approx(1.0, abs=0.05)  # same simulated hardware: no real difference


def test_compare_refuses_a_field_that_is_not_a_runs_column(lake):
    from pipelines.warehouse.frames import Frames
    from pipelines.report.versus import select

    with Frames(lake) as frames, pytest.raises(ValueError, match="perf.runs column"):
        select(frames, "median_ns; DROP TABLE x", "1")


def test_compare_refuses_a_gpu_side_of_real_and_simulated_runs_but_not_a_software_side():
    """Matched by case id alone, a side holding the real H200 and the simulated one kept
    whichever run sorted last: a real median set against a simulated one, unsaid."""
    from pipelines.report.versus import select

    class ReadsStats(Exception):
        pass

    class Frames:  # perf.runs as the selection reads it; reading case_stats next means it was accepted
        def table(self, name, where=None, columns="*", params=()):
            if name != "runs":
                raise ReadsStats(name)
            return pd.DataFrame({"run_id": ["real", "sim"], "dt": [DT, DT], "pool": ["h200", "sim-h200"],
                                 "device_kind": ["gpu", "simulated"]})

    with pytest.raises(ValueError, match=r"more than one device kind \(gpu: pools \['h200'\]; simulated: pools "
                                         r"\['sim-h200'\]\); compare pools instead"):
        select(Frames(), "gpu_sku", H200, DT)
    with pytest.raises(ReadsStats):  # torch_version holds the GPU and kind fixed: it goes on to read stats
        select(Frames(), "torch_version", TORCH_A, DT)


def test_new_commands_have_help_with_examples(capsys):
    from pipelines.cli import main

    for argv in (["report", "--help"], ["report", "compare", "--help"], ["project", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert "examples:" in out and "perflake " in out


def test_progress_says_steps_done_and_time_left():
    import io

    from pipelines.config.progress import Progress

    t = iter([0.0, 0.0, 2.0, 4.0])
    out = io.StringIO()
    p = Progress(4, "job", stream=out, clock=lambda: next(t))
    p.step("one")
    p.step("two")
    p.step("three")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("job: [1/4] one") and "left" not in lines[0]
    assert "[3/4] three (4.0 s elapsed, ~4.0 s left)" in lines[2]


# --- a real browser ---------------------------------------------------------------------------

def _chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed; CI installs it in .ci/run before `make test`")
    pytest.skip("chromium is not installed (apt-get install -y chromium)")


def _browser(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


def _png_pixels_vary(png: bytes) -> tuple[int, int, int]:
    """(width, height, distinct values in a sample of the decoded scanlines)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    idat, pos = b"", 8
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    return width, height, len(set(raw[::101]))


def test_chromium_renders_the_report_with_its_charts_and_takes_a_screenshot(night, tmp_path):
    url = night["path"].as_uri()
    done = _browser(["--dump-dom", url], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom(done.stdout)
    for sku in (H100, H200):
        chart = f"roofline-{sku.lower()}-simulated"
        assert dom.by_id(chart)["tag"] == "svg"
        assert len(dom.find("case-point", tag="circle", within=chart)) >= 20
        assert dom.find("roof-compute", tag="line", within=chart) and dom.find("roof-memory", tag="line", within=chart)
    assert len(dom.find("heat-cell", tag="rect", within="heatmap-gemm")) >= 24
    assert dom.find("projection-point", tag="circle")
    assert "Simulated data" in dom.by_id("simulated-banner")["text"]

    shot = tmp_path / "report.png"
    done = _browser(["--window-size=1400,3200", f"--screenshot={shot}", url], tmp_path)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    width, height, distinct = _png_pixels_vary(shot.read_bytes())
    assert (width, height) == (1400, 3200)
    assert shot.stat().st_size > 50_000 and distinct > 20  # charts and text, not a blank page
    keep = os.environ.get("PERFLAKE_KEEP_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


def test_coverage_counts_stopped_cases_apart_from_failures_and_timeouts():
    """A shard stopped at a budget (the third H200 lease's shard 5: 11 of 24 cases never
    reached) has cases that were not measured, which are no fault of theirs."""
    from pipelines.report.sections import coverage

    runs = pd.DataFrame([{"pool": "h200", "device_kind": "gpu", "gpu_sku": "H200-SXM-141GB", "run_id": "r",
                          "shard": 5, "status": "partial"}])
    statuses = ["ok"] * 12 + ["timeout"] + ["stopped"] * 11 + ["failed", "odd"]
    stats = pd.DataFrame([{"pool": "h200", "status": s, "error": None if s == "ok" else f"{s} text", "kernel": "sdpa",
                           "backend": "sdpa-flash", "dtype": "bf16", "shape": f"q_len={i}", "run_id": "r"}
                          for i, s in enumerate(statuses)])
    page = Dom(coverage(runs, stats, ["h200"]))
    rows = page.find(tag="tr", within="coverage-pools")
    header = [c["text"] for c in page.find(tag="th", within="coverage-pools")]
    cells = [c["text"] for c in page.find(tag="td", within="coverage-pools")]
    assert len(rows) == 2
    counts = dict(zip(header, cells))
    assert (counts["ok"], counts["failed"], counts["timeout"], counts["stopped"], counts["other"]) == \
        ("12", "1", "1", "11", "1")
