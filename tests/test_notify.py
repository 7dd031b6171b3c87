"""The nightly digests, received by a real SMTP server (aiosmtpd) and a real HTTP webhook
receiver, both on 127.0.0.1 and started here; and the missing-data alert.

The history (pool sim-notify, dates in 2036): from 2036-04-06 one copy kernel is 15 %
slower; from 2036-04-07, with torch 2.12.0 -> 2.13.0, two bf16 GEMMs are 10 % slower
and one bf16 copy is 10 % faster. The first mine (2036-04-07, after 14 nights) sees
them all first: the copy's step, two runs old, confirmed at first sight (its owner
triages the same working day, so it is overdue the next day), the 04-07 changes
provisional; the mine of 2036-04-08, the night of the digest, confirms those.
"""
from __future__ import annotations

import email
import html
import json
import os
import re
import threading
from email import policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kernels_bench.collectives import free_port

from kernels_bench.case import Case
from kernels_bench.sim import Injection, _unit
from sim_history import at, land_night, publish, snapshot

POOL, ABSENT = "sim-notify", "sim-notify-absent"
NIGHTS = [f"2036-03-{d}" for d in range(26, 32)] + [f"2036-04-{d:02d}" for d in range(1, 9)]
EARLY_NIGHT, CHANGE_NIGHT, DIGEST_NIGHT = "2036-04-06", "2036-04-07", "2036-04-08"
EARLY = Case.make("memory", "copy", "torch", "fp32", numel=1 << 23)
SLOWED = [Case.make("gemm", "matmul", "torch", "bf16", m=s, n=s, k=s) for s in (2048, 4096)]
IMPROVED = Case.make("memory", "copy", "torch", "bf16", numel=1 << 22)
STEADY = Case.make("gemm", "matmul", "torch", "fp32", m=1024, n=1024, k=1024)
CASES = [EARLY, *SLOWED, IMPROVED, STEADY]
INJECTIONS = (Injection(match={"kernel": "copy", "numel": 1 << 23}, since=EARLY_NIGHT, factor=1.15),
              Injection(match={"kernel": "matmul", "dtype": "bf16"}, since=CHANGE_NIGHT, factor=1.10),
              Injection(match={"kernel": "copy", "dtype": "bf16"}, since=CHANGE_NIGHT, factor=0.90))
CAUSE = "torch 2.12.0 -> 2.13.0"
SMTP_CONN = "perflake_test_smtp"
HOOK_ENV = "PERFLAKE_TEST_MEMORY_HOOK"


class Inbox:
    """A real SMTP server on loopback (aiosmtpd) keeping what it receives."""

    def __init__(self):
        from aiosmtpd.controller import Controller

        self.messages: list = []
        self.port = free_port()
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(envelope)
        return "250 Message accepted for delivery"


class Hooks(BaseHTTPRequestHandler):
    """A real HTTP receiver: keeps each POST (path, content type, JSON body), answers 200."""

    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hooks.received.append((self.path, self.headers["Content-Type"], json.loads(body)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass



def test_the_scenarios_cases_are_unimodal_on_the_simulator():
    assert all(_unit("bimodal", c.case_id) >= 0.10 for c in CASES)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    inbox = Inbox()
    inbox.controller.start()
    hooks = ThreadingHTTPServer(("127.0.0.1", 0), Hooks)
    threading.Thread(target=hooks.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{hooks.server_address[1]}"
    owners_file = tmp_path_factory.mktemp("owners") / "owners.yaml"
    owners_file.write_text(f"""
notify: true
email_conn_id: {SMTP_CONN}
default_owner: triage-notify
teams:
  triage-notify: {{email: triage@example.com}}
  gemm-notify: {{email: [gemm@example.com], webhook: "{url}/gemm"}}
  memory-notify: {{webhook: "env:{HOOK_ENV}", triage_working_days: 0}}
routes:
  - {{family: gemm, pool: "sim-notify*", owner: gemm-notify}}
  - {{family: memory, pool: "sim-notify*", owner: memory-notify}}
""")
    env = {f"AIRFLOW_CONN_{SMTP_CONN.upper()}": f"smtp://127.0.0.1:{inbox.port}?disable_ssl=true&disable_tls=true"
                                                 f"&from_email=perflake%40localhost&timeout=10&retry_limit=0",
           HOOK_ENV: f"{url}/memory"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield {"inbox": inbox, "owners_file": owners_file}
    for k, v in saved.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    hooks.shutdown()
    inbox.controller.stop()


@pytest.fixture(scope="module")
def night(spark, lake, tmp_path_factory, servers):
    """Mine the history step by step, then run the sweep's notify step for the digest night."""
    from pipelines.mining.regressions import update_regressions
    from pipelines.triage.digest import notify_night
    from pipelines.config.owners import load_owners

    owners = load_owners(servers["owners_file"])
    tmp = tmp_path_factory.mktemp("notify")

    def mine(dates):
        for dt in dates:
            land_night(lake, tmp, dt, POOL, CASES, INJECTIONS, prefix="notify",
                       torch_version="2.13.0" if dt >= CHANGE_NIGHT else "2.12.0")
        publish(spark, lake, dates, POOL)
        update_regressions(spark, lake, now=at(dates[-1]), owners=owners)

    mine(NIGHTS[:NIGHTS.index(CHANGE_NIGHT) + 1])
    mine([DIGEST_NIGHT])
    Hooks.received.clear()
    info = {"dt": DIGEST_NIGHT, "run_id": f"notify-{DIGEST_NIGHT}", "pools": [POOL, ABSENT],
            "suites": ["gemm-demo"], "kernel": None}
    result = notify_night(info, since=at(DIGEST_NIGHT, 5), today=at(DIGEST_NIGHT).date(), owners=owners)
    mails = {}
    for envelope in servers["inbox"].messages:
        msg = email.message_from_bytes(envelope.content, policy=policy.default)
        (part,) = [p for p in msg.walk() if p.get_content_type() == "text/html"]
        lines = [html.unescape(x) for x in re.findall(r"<pre>(.*?)</pre>", part.get_content(), re.S)]
        mails[tuple(envelope.rcpt_tos)] = {"subject": msg["Subject"], "from": envelope.mail_from, "lines": lines}
    hooks = {path: (ctype, body) for path, ctype, body in Hooks.received}
    return {"result": result, "mails": mails, "hooks": hooks, "table": snapshot(spark, POOL)}


def ids(table, cases, metric=None, **where):
    rows = table[table.case_id.isin([c.case_id for c in cases])]
    if metric:
        rows = rows[rows.metric == metric]
    for k, v in where.items():
        rows = rows[rows[k] == v]
    return set(rows.regression_id)


def members(lines: list[str], sentence_start: str) -> set[str]:
    """The regression ids listed under the group whose sentence starts so."""
    (i,) = [n for n, line in enumerate(lines) if line.startswith(sentence_start)]
    out = set()
    for line in lines[i + 1:]:
        if not line.startswith("    "):
            break
        out.add(line.split()[0])
    return out


def test_the_scenario_has_the_changes_it_was_built_with(night):
    t = night["table"]
    early = t[t.case_id == EARLY.case_id]
    assert set(early.status) == {"confirmed"} and set(early.change_dt) == {EARLY_NIGHT}
    assert set(t[t.case_id == EARLY.case_id].triage_due_dt) == {CHANGE_NIGHT}  # first seen then; 0 days
    assert len(ids(t, SLOWED, "latency", status="confirmed", cause=CAUSE)) == 2
    assert len(ids(t, [IMPROVED], "latency", status="confirmed", direction="improvement")) == 1
    assert STEADY.case_id not in set(t.case_id)


def test_the_owners_email_lists_the_new_regressions_grouped_by_their_shared_cause(night):
    t, mail = night["table"], night["mails"][("gemm@example.com",)]
    assert mail["from"] == "perflake@localhost"
    assert mail["subject"].startswith(f"perflake {DIGEST_NIGHT} for gemm-notify: ")
    group = members(mail["lines"], f"{CAUSE}: 2 bf16 gemm series (simulated) slower by ")
    assert group == ids(t, SLOWED, "latency")
    energy = members(mail["lines"], f"{CAUSE}: 2 bf16 gemm series (simulated) using more energy per call by ")
    assert energy == ids(t, SLOWED, "energy")
    text = "\n".join(mail["lines"])
    assert not ids(t, [EARLY, IMPROVED]) & set(re.findall(r"\b[0-9a-f]{10}\b", text))  # not this owner's


def test_the_webhook_gets_slack_compatible_json_with_the_same_digest(night):
    t = night["table"]
    ctype, body = night["hooks"]["/gemm"]
    assert ctype == "application/json"
    assert body["blocks"][0]["type"] == "header" and "gemm-notify" in body["blocks"][0]["text"]["text"]
    assert all(b["type"] == "section" and b["text"]["type"] == "mrkdwn" for b in body["blocks"][1:])
    assert f"{CAUSE}: 2 bf16 gemm series (simulated) slower by" in body["text"]
    assert all(i in body["text"] for i in ids(t, SLOWED))


def test_improvements_and_overdue_items_reach_their_owner_by_a_webhook_from_the_environment(night):
    t = night["table"]
    _, body = night["hooks"]["/memory"]  # the URL came from $PERFLAKE_TEST_MEMORY_HOOK
    lines = body["text"].splitlines()
    improvement = members([line.removeprefix("  ") for line in lines],
                          f"{CAUSE}: 1 bf16 memory series (simulated) faster by ")
    assert improvement == ids(t, [IMPROVED], "latency")
    overdue = [line for line in lines if f"due {CHANGE_NIGHT}" in line]
    assert {line.split()[0] for line in overdue} >= ids(t, [EARLY])
    assert overdue and all(" on simulated " in line for line in overdue)  # labelled row by row
    assert not ids(t, SLOWED) & set(re.findall(r"\b[0-9a-f]{10}\b", body["text"]))


def test_a_pool_that_was_asked_for_and_published_nothing_is_reported_missing(night):
    mail = night["mails"][("triage@example.com",)]  # no route matches the pool alone: the default owner
    assert f"pool {ABSENT} on {DIGEST_NIGHT}: no results: the sweep asked for this pool" in "\n".join(mail["lines"])
    assert not any(f"pool {POOL} on" in line for line in mail["lines"])  # it ran 5 of the 6 planned cases
    assert night["result"]["sent"] is True
    assert night["result"]["owners"]["gemm-notify"] == {
        "email": ["gemm@example.com"], "webhook": True, "subject": night["mails"][("gemm@example.com",)]["subject"]}


def test_a_pool_that_ran_far_fewer_cases_than_planned_is_reported(night, spark):
    from pipelines.triage.digest import missing_data

    runs = spark.table("perf.runs")
    (alert,) = missing_data(runs, DIGEST_NIGHT, {POOL: 40}, run_ids=[f"notify-{DIGEST_NIGHT}-{POOL}"])
    assert alert.pool == POOL and "ran far fewer cases than planned: 5 of 40 measured ok" in alert.problem
    assert missing_data(runs, DIGEST_NIGHT, {POOL: None}) == []  # as planned by its own runs: all ok


def test_with_notify_off_nothing_is_built_or_sent(servers):
    from pipelines.triage.digest import notify_night
    from pipelines.config.owners import load_owners

    before = len(servers["inbox"].messages)
    result = notify_night({"dt": DIGEST_NIGHT, "run_id": "x", "pools": [ABSENT], "suites": []},
                          since=at(DIGEST_NIGHT), owners=load_owners())  # the shipped file: notify: false
    assert result["sent"] is False and len(servers["inbox"].messages) == before


def test_the_sweep_notifies_after_the_reruns_are_mined_whatever_happened():
    import sys
    from pathlib import Path

    from airflow.dag_processing.dagbag import DagBag

    dags = Path(__file__).resolve().parent.parent / "dags"
    if str(dags) not in sys.path:
        sys.path.insert(0, str(dags))
    dag = DagBag(dag_folder=str(dags / "nightly_sweep.py")).dags["nightly_sweep"]
    task = dag.get_task("notify")
    assert task.upstream_task_ids >= {"mine_reruns"} and task.trigger_rule == "all_done"
    assert task.retries >= 1 and task.execution_timeout is not None
