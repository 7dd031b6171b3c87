"""The hostile corpus of tests/test_hostile_sql.py over Spark Connect, the shared Spark
SQL service's second endpoint (services mode, docs/deploy.md), and Connect's token.

One deployment for the module: `perflake services up --no-airflow` on a fresh lake
(PostgreSQL, the metastore, the Spark SQL service, no Airflow), the corpus's tables
created by a writer's Spark process, then every statement sent over one Connect session
that presents the service's token. Each must be refused with the gate's one sentence (as
over JDBC); afterwards the service still answers, and the lake's files are as they were.
A client without the token, or with a wrong one, gets nothing but the service's refusal.

A canary file outside the lake, readable by the service's OS user, holds a secret that
must never appear in an answer. Loopback only; every wait is bounded."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pipelines.config import processes
from pipelines.config.services import CONNECT_TOKEN_ENV
from pipelines.query import server as sqlserver
from pipelines.query.sql import REFUSAL_PREFIX, refusal_in

from launchers.services_lake import REPO, ServicesLake, require_packages
from launchers.sql_clients import ConnectSession
from test_hostile_sql import CORPUS, DQ_ROWS, _fill, _ids, _snapshot, _subprocess

MAX_ROWS = 100
LEGIT = "SELECT suite, success FROM perf.dq_results ORDER BY suite"


def _outside() -> Path:
    """A folder outside the lake that the service's OS user may read (so that a refusal,
    not a permission, is what keeps the canary out of an answer)."""
    folder = Path(tempfile.mkdtemp(prefix="perflake-hostile-outside-"))
    os.chmod(folder, 0o755)
    return folder


@pytest.fixture(scope="module")
def connect_corpus():
    """The services on a fresh lake with the corpus's tables, and the corpus's answers
    over one Connect session; everything stopped and deleted at the end."""
    require_packages()
    outside = _outside()
    try:
        secret = "CANARY-" + secrets.token_hex(12)
        for name in ("secret.txt", "geheim-ü.txt"):
            (outside / name).write_text(secret + "\n")
            os.chmod(outside / name, 0o644)
        with ServicesLake.create(prefix="perflake-hostile-connect-", with_airflow=False) as dep:
            lake = dep.lake
            paths = {"canary": str(outside / "secret.txt"), "canary_unicode": str(outside / "geheim-ü.txt"),
                     "outside": str(outside), "marker": str(outside / "pwned"), "warehouse": str(lake.warehouse)}
            statements = [_fill(sql, paths) for sql, _ in CORPUS]
            # The tables, by a writer's own Spark process on the shared metastore (the
            # service is read-only).
            _subprocess(f"from tests.test_hostile_sql import _build_lake; _build_lake({str(lake.root)!r})",
                        timeout=300)
            before = _snapshot(lake)
            with dep.connect(max_rows=MAX_ROWS) as session:
                answers = [session.query(s) for s in statements]
            yield dict(dep=dep, secret=secret, paths=paths, statements=statements, before=before, connect=answers)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.parametrize("i", range(len(CORPUS)), ids=_ids())
def test_connect_refuses_each_hostile_statement_with_one_sentence(connect_corpus, i):
    answer = connect_corpus["connect"][i]
    if answer["ok"] and "inert:spark" in CORPUS[i][1]:
        assert connect_corpus["secret"] not in json.dumps(answer)
        return
    assert not answer["ok"], (connect_corpus["statements"][i], answer)
    if "native" not in CORPUS[i][1]:  # the gate's own sentence, naming what and why
        sentence = refusal_in(answer["error"])
        assert sentence and sentence.startswith(REFUSAL_PREFIX) and "\n" not in sentence, answer["error"][:500]
    assert connect_corpus["secret"] not in answer["error"]


def test_after_the_corpus_over_connect_the_service_answers_and_the_lake_is_unchanged(connect_corpus):
    dep, outside = connect_corpus["dep"], Path(connect_corpus["paths"]["outside"])
    assert sqlserver.status(dep.lake).running
    with dep.connect() as session:
        answer = session.query(LEGIT)
    assert answer["ok"] and answer["rows"] == sorted([s, str(ok)] for s, ok in DQ_ROWS), answer
    assert dep.jdbc_rows("SELECT count(*) FROM perf.samples") == [["2"]]
    assert _snapshot(dep.lake) == connect_corpus["before"]
    assert not Path(connect_corpus["paths"]["marker"]).exists() and not (outside / "evil.jar").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["geheim-ü.txt", "secret.txt"]


# --- Spark Connect's token ------------------------------------------------------------

def test_a_connect_client_without_the_token_or_with_a_wrong_one_is_refused(connect_corpus):
    dep = connect_corpus["dep"]
    url = dep.services.connect_url
    for token, why in ((None, "No authentication token provided"),
                       ("wrong-" + secrets.token_urlsafe(16), "Invalid authentication token")):
        with ConnectSession(url, token=token) as session:
            answer = session.query(LEGIT)
        assert not answer["ok"] and "UNAUTHENTICATED" in answer["error"] and why in answer["error"], answer
        assert "dq_results" not in answer["error"] and "gemm" not in answer["error"]
    with dep.connect() as session:
        assert session.query(LEGIT)["ok"]


# `perflake sql` as a user who may not read the token file: root reads every file, so the
# child takes that permission away from itself before the CLI runs.
_WITHOUT_THE_TOKEN_FILE = """
import sys
from pipelines.config import services
def denied(self):
    raise PermissionError(13, "Permission denied", str(self.connect_token_file))
services.Services.connect_token = denied
from pipelines.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_perflake_sql_presents_the_token_and_without_it_says_so_in_one_line(connect_corpus):
    dep = connect_corpus["dep"]
    ok = dep.perflake("sql", "SELECT count(*) AS n FROM perf.dq_results", "--format", "csv", timeout=180)
    assert ok.stdout.split() == ["n", str(len(DQ_ROWS))]
    env = {k: v for k, v in dep.env.items() if k != CONNECT_TOKEN_ENV}
    for extra, why in (({}, "may not read"), ({CONNECT_TOKEN_ENV: "wrong-" + secrets.token_urlsafe(16)}, "refused")):
        proc = subprocess.run([sys.executable, "-c", _WITHOUT_THE_TOKEN_FILE, "sql", LEGIT], env={**env, **extra},
                              capture_output=True, text=True, timeout=180, cwd=REPO)
        err = proc.stderr.strip()
        assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, err)
        assert err.startswith("perflake sql: ") and "\n" not in err and "Traceback" not in err, err[-1500:]
        assert why in err and CONNECT_TOKEN_ENV in err, err


def test_the_token_is_private_and_on_no_command_line_log_or_session_setting(connect_corpus):
    dep = connect_corpus["dep"]
    token = dep.services.connect_token()
    assert len(token) >= 32
    assert oct(dep.services.connect_token_file.stat().st_mode & 0o777) == "0o600"
    shown = [st.pid for st in processes.all_stats() if token.encode() in processes.cmdline(st.pid)]
    assert shown == []
    for text in (sqlserver.log_file(dep.lake).read_text(errors="replace"),
                 sqlserver.properties_file(dep.lake).read_text()):
        assert token not in text
    # A Connect client reads the service's Spark settings (spark.conf.get): the token is not among them.
    settings = subprocess.run(
        [sys.executable, "-c", "import json; from pipelines.config.lake import Lake; "
         "from pipelines.warehouse.session import reader_session; "
         "print(json.dumps(reader_session(Lake.from_env()).conf.getAll))"],
        env=dep.env, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert settings.returncode == 0 and "spark.app.name" in settings.stdout, settings.stderr[-1500:]
    assert token not in settings.stdout
