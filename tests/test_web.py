"""perflake web without a browser: every page answers on a small simulated lake, a bad
parameter answers a 4xx page that names it (never a traceback), values reach DuckDB as
bound parameters, the triage form needs its CSRF token, a name and a note, and the
dashboard listens beyond loopback only with a token. The lake is written straight from
the table definitions by benchmarks/web_pages.py (40 nights, 120 series, 4 pools).
Browser tests on a mined lake: tests/test_web_browser.py."""
from __future__ import annotations

import datetime
import re
import shutil
import socket
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from pipelines.cli.web import access_token, address_line, check_binding
from pipelines.config.lake import Lake
from pipelines.warehouse import snapshots
from pipelines.web.app import create_app

LOCAL = "http://127.0.0.1"  # without a token the app answers only to loopback names ...
PEER = ("127.0.0.1", 50000)  # ... from this machine

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import web_pages

    root = tmp_path_factory.mktemp("web-lake")
    info = web_pages.build_lake(root / "lake", nights=40, series=120, sample_nights=3)
    return {"info": info, "pages": web_pages.pages(info), "lake": Lake.from_env(root / "lake")}


@pytest.fixture(scope="module")
def client(bench):
    with TestClient(create_app(bench["lake"]), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as c:
        yield c


def detail(response) -> str:
    found = re.search(r'class="detail">(.*?)</p>', response.text, re.S)
    return found.group(1) if found else ""


def test_every_page_answers_on_a_simulated_lake(client, bench):
    for name, path in bench["pages"].items():
        r = client.get(path)
        assert r.status_code == 200, (name, r.status_code, detail(r))
        assert "Traceback" not in r.text and "<h1>" in r.text
        head = client.head(path)  # curl -I, uptime checks: the GET's status and headers, no body
        assert (head.status_code, head.content) == (200, b""), (name, head.status_code)
        assert head.headers["content-length"] == str(len(r.content)) and "Content-Security-Policy" in head.headers
    assert client.head("/no/such/page").status_code == 404


def test_the_explorer_filters_by_kernel_and_links_each_row_to_its_series(client, bench):
    r = client.get("/explorer", params={"kernel": "copy", "dtype": "bf16"})
    kernels = re.findall(r'class="series-link" href="[^"]*">([^<]+)</a>', r.text)
    assert kernels and set(kernels) == {"copy"}
    assert re.search(r'data-spark="\[\[', r.text)  # a sparkline per row


def test_a_search_that_reads_like_sql_matches_nothing_instead_of_everything(client):
    r = client.get("/explorer", params={"q": "1=1 OR kernel"})
    assert r.status_code == 200 and "No series matches" in r.text
    r = client.get("/explorer", params={"q": "__________"})  # '_' is a letter of names, not a wildcard
    assert r.status_code == 200 and "No series matches" in r.text


def test_without_a_token_only_loopback_names_are_answered_so_dns_rebinding_cannot_read_or_post(client):
    assert client.get("/explorer", headers={"host": "localhost:8080"}).status_code == 200
    assert client.get("/explorer", headers={"host": "[::1]:8080"}).status_code == 200
    r = client.get("/regressions", headers={"host": "attacker.example:8080"})
    assert r.status_code == 403 and "DNS rebinding" in detail(r)
    client.get("/regressions")
    r = client.post("/regressions/0123456789/ack", headers={"host": "attacker.example:8080",
                                                            "origin": "http://attacker.example:8080"},
                    data={"by": "mallory", "note": "rebound", "csrf_token": client.cookies.get("perflake_csrf")})
    assert r.status_code == 403 and "DNS rebinding" in detail(r)


def test_without_a_token_a_peer_beyond_loopback_is_refused_whatever_host_it_names(bench):
    """Mounted in an Airflow API server listening on 0.0.0.0, the dashboard was served to
    any peer that sent 'Host: 127.0.0.1' (the Host check guards browsers, not clients)."""
    remote = ("192.0.2.7", 40000)
    with TestClient(create_app(bench["lake"]), raise_server_exceptions=False, base_url=LOCAL, client=remote) as c:
        r = c.get("/explorer")
        assert r.status_code == 403 and "set PERFLAKE_WEB_TOKEN" in detail(r) and "192.0.2.7" in detail(r)
    token = "t" * 24
    with TestClient(create_app(bench["lake"], token=token), raise_server_exceptions=False, base_url=LOCAL,
                    client=remote) as c:
        assert c.get("/explorer", headers={"authorization": f"Bearer {token}"}).status_code == 200


@pytest.mark.parametrize("path, status, says", [
    ("/explorer?kernel=' OR 1=1 --", 400, "'kernel'"),
    ("/explorer?kernel=matmul'; DROP TABLE perf.runs; --", 400, "'kernel'"),
    ("/explorer?q=x%27)%20UNION%20SELECT%20*%20FROM%20perf.runs--", 400, "'q'"),
    ("/explorer?shape=m=1) OR (1=1", 400, "'shape'"),
    ("/explorer?sort=kernel;DROP", 400, "'sort'"),
    ("/explorer?page=-1", 400, "'page'"),
    ("/explorer?page=%C2%B2", 400, "'page'"),  # a superscript two: a digit to str.isdigit, not to int
    ("/explorer?shape=" + ",".join(["a=1"] * 17), 400, "at most 16 key=value pairs"),
    ("/?date=2035-02-30", 400, "not a calendar date"),
    ("/?date=last week", 400, "not a date YYYY-MM-DD"),
    ("/series/abc", 400, "16 lowercase hex digits"),
    ("/series/0123456789abcdef", 404, "no series 0123456789abcdef"),
    ("/series/{key}?night=2035-99-01", 400, "'night'"),
    ("/series/{key}?night=2034-01-01", 404, "no measurement on night 2034-01-01"),
    ("/regressions?state=all' --", 400, "'state'"),
    ("/compare?a=run_id=x' OR '1'='1&b=y", 400, "'a (run_id)'"),
    ("/compare?a=nosuchrun&b=nosuchrun2", 404, "matches no run"),
    ("/compare?a=color=red&b=x", 400, "not a run attribute"),
    ("/roofline?sku=<script>alert(1)</script>", 400, "'sku'"),
    ("/roofline?sku=NO-SUCH-GPU", 404, "no GPU"),
    ("/no/such/page", 404, "Not Found"),
])
def test_a_bad_parameter_answers_a_clear_4xx_page(client, bench, path, status, says):
    r = client.get(path.replace("{key}", bench["info"]["series_key"]))
    assert r.status_code == status, (r.status_code, detail(r))
    assert r.headers["content-type"].startswith("text/html")
    assert says in detail(r).replace("&#39;", "'").replace("&#34;", '"'), detail(r)
    assert "Traceback" not in r.text and "<script>alert" not in r.text


def test_the_series_page_marks_its_change_point_and_the_software_change(client, bench):
    r = client.get(f"/series/{bench['info']['series_key']}")
    assert 'class="change-point' in r.text
    assert "torch: 2.12.0 -&gt; 2.13.0" in r.text or "driver: 570.86 -&gt; 575.51" in r.text


def test_pages_load_no_script_from_outside_the_app(client, bench):
    for path in bench["pages"].values():
        text = client.get(path).text
        assert not re.search(r"""<(script|link)[^>]+(src|href)=["']?(https?:)?//""", text), path
    assert client.get("/static/vendor/echarts.min.js").status_code == 200
    assert "script-src 'self'" in client.get("/").headers["content-security-policy"]


def test_a_triage_post_needs_the_csrf_token_a_name_and_a_note(client):
    client.get("/regressions")  # sets the CSRF cookie
    token = client.cookies.get("perflake_csrf")
    assert token
    url = "/regressions/0123456789/ack"
    r = client.post(url, data={"by": "alice", "note": "on it"})
    assert r.status_code == 403 and "CSRF" in detail(r)
    r = client.post(url, data={"by": "alice", "note": "on it", "csrf_token": "x" * 43})
    assert r.status_code == 403
    r = client.post(url, data={"by": "alice", "note": "on it", "csrf_token": token},
                    headers={"origin": "https://evil.example"})
    assert r.status_code == 403 and "cross-site" in detail(r)
    r = client.post(url, data={"by": "", "note": "on it", "csrf_token": token})
    assert r.status_code == 422 and "name is required" in detail(r)
    r = client.post(url, data={"by": "alice", "note": " ", "csrf_token": token})
    assert r.status_code == 422 and "note is required" in detail(r)
    r = client.post("/regressions/not-an-id/ack", data={"by": "alice", "note": "x", "csrf_token": token})
    assert r.status_code == 400
    r = client.post(url, data={"by": "alice", "note": "on it", "csrf_token": token}, headers={"origin": "null"})
    assert r.status_code == 403 and "cross-site" in detail(r)  # a cross-origin redirect's re-post
    r = client.post(url, data={"by": "alice", "note": "on it", "csrf_token": "\u00e9"})
    assert r.status_code == 403  # not a 500
    r = client.post(url, data={"by": "alice", "note": "on \u202eti", "csrf_token": token})
    assert r.status_code == 422 and "direction overrides" in detail(r)
    r = client.post(url, data={"by": "alice", "note": "x" * 100_000, "csrf_token": token})
    assert r.status_code == 413  # refused before the body is parsed


def test_a_csrf_cookie_planted_by_another_page_of_the_host_is_replaced_not_adopted(bench):
    planted = "A" * 43  # a page on another port of 127.0.0.1 can set this host's cookies
    with TestClient(create_app(bench["lake"]), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as c:
        c.cookies.set("perflake_csrf", planted)
        r = c.post("/regressions/0123456789/close", data={"by": "mallory", "note": "x", "csrf_token": planted})
        assert r.status_code == 403 and "CSRF" in detail(r)
        page = c.get("/regressions")
        issued = page.cookies.get("perflake_csrf")
        assert issued and issued != planted and f'value="{issued}"' in page.text
    key = bench["lake"].root / "services" / "web" / "csrf.key"
    assert key.stat().st_mode & 0o777 == 0o600
    with TestClient(create_app(bench["lake"]), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as other:
        other.cookies.set("perflake_csrf", issued)  # a second worker of the same app takes the first one's token
        r = other.post("/regressions/0123456789/close", data={"by": "alice", "note": "", "csrf_token": issued})
        assert r.status_code == 422 and "note is required" in detail(r)  # past the CSRF check


def test_with_sql_users_a_triage_post_proves_its_name_with_that_users_password(bench, tmp_path):
    from pipelines.query.users import add_user

    lake = Lake(tmp_path / "lake")
    shutil.copytree(bench["lake"].root, lake.root)
    add_user(lake, "alice", "correct horse battery")
    with TestClient(create_app(lake), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as c:
        page = c.get("/regressions?state=open")
        assert 'name="password"' in page.text or "No open" in page.text
        token = c.cookies.get("perflake_csrf")
        url = "/regressions/0123456789/ack"
        for who, password in (("alice", ""), ("alice", "wrong password"), ("mallory", "correct horse battery")):
            r = c.post(url, data={"by": who, "note": "on it", "csrf_token": token, "password": password})
            assert r.status_code == 401 and "is not a user of the SQL endpoint" in detail(r), (who, r.text[:300])


def test_with_a_token_every_request_needs_it(bench):
    token = "t" * 24
    with TestClient(create_app(bench["lake"], token=token), raise_server_exceptions=False, base_url=LOCAL,
                    client=PEER) as c:
        assert c.get("/").status_code == 401
        assert c.get("/", headers={"authorization": f"Bearer {token}"}).status_code == 200
        r = c.get(f"/explorer?token={token}&kernel=copy&q=a%26kernel%3Dx", follow_redirects=False)
        assert r.status_code == 303 and "token" not in r.headers["location"]
        assert r.headers["location"].endswith("?kernel=copy&q=a%26kernel%3Dx")  # values stay encoded
        assert c.get("/explorer?kernel=copy").status_code == 200  # the cookie now
        assert c.get("/healthz").status_code == 200
    with TestClient(create_app(bench["lake"], token=token), raise_server_exceptions=False, base_url=LOCAL,
                    client=PEER) as c:
        assert c.get("/series/healthz").status_code == 401  # only the health check itself is open
        assert c.get("/?token=%C3%A9").status_code == 401  # not a 500
        r = c.get("/", headers={"authorization": "Bearer \u00e9".encode()})
        assert r.status_code == 401 and r.headers["x-frame-options"] == "SAMEORIGIN"
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["cache-control"] == "no-store"


def test_the_dashboard_listens_beyond_loopback_only_when_asked_and_with_a_token(monkeypatch):
    check_binding("127.0.0.1", False, None)
    check_binding("::1", False, None)
    with pytest.raises(ValueError, match="--allow-remote"):
        check_binding("0.0.0.0", False, "t" * 24)
    with pytest.raises(ValueError, match="needs a token"):
        check_binding("0.0.0.0", True, None)
    check_binding("0.0.0.0", True, "t" * 24)
    monkeypatch.setenv("PERFLAKE_WEB_TOKEN", "short")
    with pytest.raises(ValueError, match="at least 16"):
        access_token(None)
    # the address printed at start is one a browser can open
    assert address_line("127.0.0.1", 8080, False) == "http://127.0.0.1:8080/"
    assert address_line("::1", 9000, False) == "http://[::1]:9000/"
    wildcard = address_line("0.0.0.0", 8080, True)
    assert wildcard.startswith(f"http://{socket.gethostname()}:8080/") and "0.0.0.0" not in wildcard
    assert "?token=" in wildcard


def test_a_night_published_while_the_app_runs_shows_up_without_a_restart(bench, tmp_path):
    from pipelines.web.reader import Reader

    lake = Lake.from_env(tmp_path / "lake")
    shutil.copytree(bench["lake"].root, lake.root)
    reader = Reader(lake)
    newest = "SELECT max(dt) AS dt FROM perf.runs"
    assert reader.rows(newest) == [{"dt": bench["info"]["last_dt"]}]
    runs = lake.table_path("runs")
    shutil.copytree(runs / f"dt={bench['info']['last_dt']}", runs / "dt=2035-12-31")  # the next mine publishes
    assert reader.rows(newest) == [{"dt": bench["info"]["last_dt"]}]  # the old copy answers while the new loads
    deadline = time.monotonic() + 60
    while reader.rows(newest) != [{"dt": "2035-12-31"}]:
        assert time.monotonic() < deadline, "the new night never showed"
        time.sleep(0.2)
    reader.close()


def test_mounted_under_a_prefix_as_airflow_mounts_it_every_link_keeps_the_prefix(bench, monkeypatch):
    from fastapi import FastAPI

    monkeypatch.setenv("PERFLAKE_HOME", str(bench["lake"].root))
    from pipelines.web.plugin import URL_PREFIX, PerflakeWebPlugin

    (spec,) = PerflakeWebPlugin.fastapi_apps
    assert spec["url_prefix"] == URL_PREFIX == "/perflake"
    assert PerflakeWebPlugin.external_views[0]["href"] == "/perflake/"
    parent = FastAPI()  # the Airflow API server mounts each plugin app like this
    parent.mount(URL_PREFIX, create_app(bench["lake"]))
    with TestClient(parent, base_url=LOCAL, client=PEER) as c:
        r = c.get(f"{URL_PREFIX}/explorer", params={"kernel": "copy"})
        assert r.status_code == 200
        links = re.findall(r'(?:href|src|action)="(/[^"]*)"', r.text)
        assert links and all(link.startswith(f"{URL_PREFIX}/") for link in links), links
        assert c.get(f"{URL_PREFIX}/static/app.js").status_code == 200


def test_the_roofline_places_the_gpus_newest_night_as_case_stats_has_it(client, bench):
    from pipelines.web.roofline import measured
    from pipelines.web.sql import SHAPE

    reader = client.app.state.reader
    earlier = (datetime.date.fromisoformat(bench["info"]["last_dt"]) - datetime.timedelta(days=3)).isoformat()
    for sku, as_of in (("H100-SXM5-80GB", None), ("H200-SXM-141GB", earlier)):
        night, points = measured(reader, sku, "simulated", as_of)
        assert night == (as_of or bench["info"]["last_dt"])
        expected = reader.rows(  # straight from perf.case_stats, as the page read it before reader.DERIVED
            f"SELECT cs.series_key, cs.median_ns, {SHAPE} AS shape FROM perf.case_stats cs LEFT JOIN perf.cases c "
            f"USING (case_id) WHERE cs.dt = ? AND cs.gpu_sku = ? AND cs.status = 'ok' AND cs.median_ns > 0", [night, sku])
        assert points and sorted((p["series_key"], p["median_ns"], p["shape"]) for p in points) == sorted(
            (e["series_key"], e["median_ns"], e["shape"]) for e in expected)


def _as_real(lake: Lake, table: str, night: str, slower: float = 1.0) -> pa.Table:
    """Pool sim-h100-a's H100 rows of `table` on `night` once more, as if measured for real:
    pool h100, device_kind gpu, run ids suffixed '-real', medians times `slower`; written
    as a partition's loose files (its live version). Returns the rows written."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    where = lake.table_path(table) / f"dt={night}"
    rows = pa.concat_tables([pq.ParquetFile(f).read() for f in snapshots.live_files(where / "pool=sim-h100-a")])
    rows = rows.filter(pc.equal(rows["gpu_sku"], "H100-SXM5-80GB")) if "gpu_sku" in rows.column_names else rows
    changed = {"run_id": pc.binary_join_element_wise(rows["run_id"], "real", "-"),
               "device_kind": pa.array(["gpu"] * len(rows))}
    if "median_ns" in rows.column_names:
        changed["median_ns"] = pc.multiply(rows["median_ns"], slower)
    for name, values in changed.items():
        rows = rows.set_column(rows.schema.get_field_index(name), name, values.cast(rows.schema.field(name).type))
    (where / "pool=h100").mkdir()
    pq.write_table(rows, where / "pool=h100" / "part-0.parquet")
    return rows


def _with_a_real_h100(bench, root: Path) -> tuple[Lake, str, int]:
    """A copy of the simulated lake whose newest night also measured the H100 for real
    (twice as slow): (lake, night, real case_stats rows)."""
    lake = Lake.from_env(root / "lake")
    shutil.copytree(bench["lake"].root, lake.root)
    night = bench["info"]["last_dt"]
    real = _as_real(lake, "case_stats", night, slower=2.0)
    for table in ("runs", "samples"):
        _as_real(lake, table, night)
    return lake, night, len(real)


def test_the_roofline_shows_one_device_kind_real_first_and_labels_simulated_data(bench, tmp_path):
    """A GPU measured for real and on the simulated device: the roofline once drew both
    nights' points on one chart, unlabelled."""
    lake, night, n_real = _with_a_real_h100(bench, tmp_path)
    with TestClient(create_app(lake), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as c:
        from pipelines.web.roofline import roofline_view

        reader = c.app.state.reader
        real = roofline_view(reader, "H100-SXM5-80GB", None)
        assert real["kind"] == "gpu" and real["other_kinds"] == ["simulated"] and real["night"] == night
        assert len(real["points"]) == n_real and {p["device_kind"] for p in real["points"]} == {"gpu"}
        sim = roofline_view(reader, "H100-SXM5-80GB", None, "simulated")
        assert sim["points"] and {p["device_kind"] for p in sim["points"]} == {"simulated"}
        assert {p["device_kind"] for p in sim["projections"]} <= {"simulated"}

        page = c.get("/roofline", params={"sku": "H100-SXM5-80GB"})
        assert page.status_code == 200 and 'id="simulated"' not in page.text
        assert "kind=simulated" in page.text and "also measured as <b>simulated</b>" in page.text
        assert "shows its real measurements" in page.text
        page = c.get("/roofline", params={"sku": "H100-SXM5-80GB", "kind": "simulated"})
        assert page.status_code == 200 and 'id="simulated"' in page.text and "SIMULATED" in page.text
        assert c.get("/roofline", params={"kind": "real"}).status_code == 400


def test_simulated_rows_are_labelled_on_the_overview_regressions_and_compare(client, bench):
    """Every page that shows rows of the simulated device says so (the series page and the
    explorer did; the overview, regressions and compare did not)."""
    pill = 'class="pill simulated"'
    for path in ("/", "/regressions?direction=any"):
        r = client.get(path)
        assert r.status_code == 200 and 'id="simulated"' in r.text and pill in r.text, path
    compare = bench["pages"]["compare (two runs)"]
    r = client.get(compare)
    assert r.status_code == 200 and 'id="simulated"' in r.text and pill in r.text
    assert "mixed-kinds" not in r.text  # both sides simulated: no mix to warn of


def test_compare_warns_when_a_real_gpu_is_set_against_a_simulated_one(bench, tmp_path):
    lake, night, _ = _with_a_real_h100(bench, tmp_path)
    run = f"nightly-{night}-sim-h100-a"
    with TestClient(create_app(lake), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as c:
        r = c.get("/compare", params={"a": f"{run}-real", "b": run})
        assert r.status_code == 200, detail(r)
        assert "side A is gpu and side B is simulated for some cases" in r.text
        # One side of both kinds would pool real and simulated samples into one median.
        r = c.get("/compare", params={"a": f"gpu_sku=H100-SXM5-80GB dt={night}", "b": run})
        assert r.status_code == 400 and "selects runs of more than one device kind" in detail(r)
        assert "add device_kind=gpu or device_kind=simulated" in detail(r)
        r = c.get("/compare", params={"a": f"gpu_sku=H100-SXM5-80GB dt={night} device_kind=gpu", "b": run})
        assert r.status_code == 200 and "side A is gpu and side B is simulated" in r.text


def test_a_kept_answer_holds_for_its_copy_of_the_lake_and_is_computed_again_after_a_publish(bench, tmp_path):
    from pipelines.web.reader import Reader

    lake = Lake.from_env(tmp_path / "lake")
    shutil.copytree(bench["lake"].root, lake.root)
    reader = Reader(lake)
    newest = lambda: reader.rows("SELECT max(dt) AS dt FROM hot.gpu_nights")[0]["dt"]  # noqa: E731
    assert reader.memo(("newest",), newest) == bench["info"]["last_dt"]
    assert reader.memo(("newest",), lambda: "not asked again") == bench["info"]["last_dt"]
    stats = lake.table_path("case_stats")
    # The next mine publishes a night: the newest night's rows again under new run ids (the
    # copy keeps one row per run and case, so a plain copy of the files would be a duplicate).
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    night = stats / f"dt={bench['info']['last_dt']}"
    for f in snapshots.live_files(night):
        rows = pq.ParquetFile(f).read()  # the file alone, without the path's partition columns
        rows = rows.set_column(rows.schema.get_field_index("run_id"), "run_id",
                               pc.binary_join_element_wise(rows["run_id"], "next", "-"))
        (stats / "dt=2035-12-31" / f.parent.relative_to(night)).mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, stats / "dt=2035-12-31" / f.relative_to(night))
    for pointer in night.glob(f"*/{snapshots.POINTER}"):  # each pool's live snapshot, named last
        shutil.copy(pointer, stats / "dt=2035-12-31" / pointer.relative_to(night))
    deadline = time.monotonic() + 60
    while reader.memo(("newest",), newest) != "2035-12-31":
        assert time.monotonic() < deadline, "the kept answer never changed"
        time.sleep(0.2)
    reader.close()


def test_a_re_mine_of_the_newest_night_is_noticed(bench, tmp_path):
    """A re-mine replaces a partition's pointer one level below the date directory
    (dt=/pool=/_CURRENT): the reader must look there, not only at dt=/."""
    from pipelines.web.reader import Reader
    import pyarrow.parquet as pq

    lake = Lake.from_env(tmp_path / "lake")
    shutil.copytree(bench["lake"].root, lake.root)
    reader = Reader(lake)
    night = bench["info"]["last_dt"]
    count = f"SELECT count(*) AS n FROM perf.case_stats WHERE dt = '{night}'"
    before = reader.rows(count)[0]["n"]
    pool_dir = sorted((lake.table_path("case_stats") / f"dt={night}").glob("pool=*"))[0]
    replaced = snapshots.live_files(pool_dir)
    remined = pool_dir / f"{snapshots.PREFIX}99990101T000000000000Z-remine-1"
    remined.mkdir()
    pq.write_table(pq.read_table(replaced[0]).slice(0, 1), remined / "part-00000.parquet")
    snapshots.mark_complete(remined)
    snapshots.switch(pool_dir, remined)
    after = before - sum(pq.ParquetFile(f).metadata.num_rows for f in replaced) + 1
    assert after < before
    deadline = time.monotonic() + 60
    while reader.rows(count)[0]["n"] != after:
        assert time.monotonic() < deadline, "the re-mined night never showed"
        time.sleep(0.2)
    reader.close()


def test_a_compare_side_too_large_for_one_request_answers_400_before_loading_it(bench, monkeypatch):
    from pipelines.web import compare

    monkeypatch.setattr(compare, "MAX_SIDE_SAMPLES", 10)
    with TestClient(create_app(bench["lake"]), raise_server_exceptions=False, base_url=LOCAL, client=PEER) as c:
        r = c.get(bench["pages"]["compare (two runs)"])
    assert r.status_code == 400 and "compared at once here; narrow it" in detail(r)


def test_the_overview_counts_timeouts_and_stopped_cases_apart_from_other():
    """The web overview's coverage query, run by DuckDB over a perf.case_stats holding
    the statuses a partly stopped night has (the third H200 lease's shard 5)."""
    import duckdb

    from pipelines.web.overview import coverage

    class Reader:  # the two calls coverage makes of pipelines.web.reader.Reader, on a real DuckDB
        def __init__(self):
            self.con = duckdb.connect()
            self.con.execute("CREATE SCHEMA perf")
            statuses = ["ok"] * 12 + ["timeout"] + ["stopped"] * 11 + ["failed", "skipped", "odd"]
            self.con.execute("CREATE TABLE perf.case_stats (pool VARCHAR, dt VARCHAR, status VARCHAR, stable BOOLEAN, "
                             "device_kind VARCHAR)")
            self.con.executemany("INSERT INTO perf.case_stats VALUES ('h200', '2026-11-27', ?, true, 'gpu')",
                                 [[s] for s in statuses])

        def has(self, table):
            return table == "case_stats"

        def rows(self, query, params=()):
            cur = self.con.execute(query, list(params))
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    [row] = coverage(Reader(), [{"dt": "2026-11-27", "pool": "h200"}])
    assert {k: row[k] for k in ("cases", "ok", "failed", "timeout", "stopped", "skipped", "other")} == \
        {"cases": 27, "ok": 12, "failed": 1, "timeout": 1, "stopped": 11, "skipped": 1, "other": 1}
    assert row["simulated"] is False  # a real pool carries no simulated label
