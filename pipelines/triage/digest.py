"""After a night's mining: one digest per owner (pipelines.config.owners) of the regressions
confirmed since the sweep began, grouped by shared cause (attribution.pooled), the
improvements confirmed since then, the owner's overdue regressions, and missing data
(a pool the sweep asked for that published nothing for the night, or far fewer good
cases than were planned). Sent by email (the SMTP provider's notifier, through the
owners file's Airflow connection) and/or a webhook (Slack-compatible JSON), to each
owner's channel, when the owners file says `notify: true`; otherwise only logged.
"""
from __future__ import annotations

import datetime
import html
import logging
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.config.lake import Lake
from pipelines.config.owners import Owners, load_owners

log = logging.getLogger(__name__)
MIN_SHARE = 0.5  # fewer good cases than this share of the planned ones is missing data
_GROUP = ("cause", "metric", "direction", "device_kind", "family", "dtype")
_ROW = ("regression_id", "metric", "kernel", "dtype", "gpu_sku", "pool", "change_pct", "before_ns", "after_ns",
        "change_run_id", "change_dt", "status", "triage_due_dt", "cause", "direction", "device_kind", "family")


@dataclass(frozen=True)
class MissingData:
    pool: str
    dt: str
    problem: str

    def line(self) -> str:
        return f"pool {self.pool} on {self.dt}: {self.problem}"


@dataclass
class Digest:
    owner: str
    dt: str
    regressions: list[tuple[str, list[dict]]] = field(default_factory=list)   # (group sentence, rows)
    improvements: list[tuple[str, list[dict]]] = field(default_factory=list)
    overdue: list[dict] = field(default_factory=list)
    missing: list[MissingData] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.regressions or self.improvements or self.overdue or self.missing)

    @property
    def subject(self) -> str:
        n = sum(len(rows) for _, rows in self.regressions)
        m = sum(len(rows) for _, rows in self.improvements)
        parts = [f"{n} new regression(s)", f"{m} improvement(s)", f"{len(self.overdue)} overdue"]
        if self.missing:
            parts.append(f"{len(self.missing)} pool(s) missing data")
        return f"perflake {self.dt} for {self.owner}: " + ", ".join(parts)

    def sections(self) -> list[tuple[str, list[str]]]:
        """(heading, lines) of the digest, in order; the text, HTML and JSON forms share them."""
        out = []
        for title, groups in (("New confirmed regressions", self.regressions),
                              ("Improvements", self.improvements)):
            if groups:
                lines = []
                for sentence, rows in groups:
                    lines.append(sentence)
                    lines += [f"    {_row_line(r)}" for r in rows]
                out.append((f"{title}: {sum(len(r) for _, r in groups)} series in {len(groups)} group(s)", lines))
        if self.overdue:
            out.append((f"Overdue (past their triage due date): {len(self.overdue)}",
                        [f"{_row_line(r)}, {r['status']}, due {r['triage_due_dt']}" for r in self.overdue]))
        if self.missing:
            out.append((f"Missing data: {len(self.missing)}", [m.line() for m in self.missing]))
        return out

    def text(self) -> str:
        body = [self.subject, ""]
        for heading, lines in self.sections():
            body += [heading] + [f"  {line}" for line in lines] + [""]
        body.append(f"Triage: perflake triage list --owner {self.owner}; perflake triage ack ID --note TEXT; "
                    f"perflake triage close ID")
        return "\n".join(body)

    def html(self) -> str:
        parts = [f"<h2>{html.escape(self.subject)}</h2>"]
        for heading, lines in self.sections():
            items = "".join(f"<li><pre>{html.escape(line)}</pre></li>" for line in lines)
            parts.append(f"<h3>{html.escape(heading)}</h3><ul>{items}</ul>")
        parts.append(f"<p>Triage: <code>perflake triage list --owner {html.escape(self.owner)}</code></p>")
        return "".join(parts)

    def slack(self) -> dict:
        blocks = [{"type": "header", "text": {"type": "plain_text", "text": self.subject[:150]}}]
        for heading, lines in self.sections():
            text = f"*{heading}*\n" + "\n".join(lines)
            for start in range(0, len(text), 2900):  # a section's text holds at most 3000 characters
                blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[start:start + 2900]}})
        return {"text": self.text(), "blocks": blocks[:50]}


def _row_line(r: dict) -> str:
    lat = ""
    if r.get("metric") == "energy" and r.get("before_ns") and r.get("after_ns"):
        lat = f" (latency {(r['after_ns'] / r['before_ns'] - 1) * 100:+.1f} %)"
    gpu = f"simulated {r['gpu_sku']}" if r.get("device_kind") == "simulated" else r["gpu_sku"]
    return (f"{r['regression_id']} {r['kernel']} {r['dtype']} on {gpu} ({r['pool']}): {r['metric']} "
            f"{r['change_pct']:+.1f} %{lat} at {r['change_run_id']}")


def build_digests(regressions: DataFrame, owners: Owners, dt: str, since: datetime.datetime,
                  today: datetime.date | str, missing: list[MissingData] = ()) -> list[Digest]:
    """One digest per owner with anything to say: changes confirmed at or after `since`
    (the start of the night's sweep), grouped by cause; the owner's regressions overdue
    on `today`; missing data, routed by pool."""
    from pipelines.mining.attribution import changes, describe, pooled
    from pipelines.triage.status import overdue

    new = regressions.where((F.col("status") == "confirmed") & (F.col("status_since") >= F.lit(since))).cache()
    late = regressions.where(overdue(today)).orderBy("triage_due_dt", "regression_id")
    digests: dict[str, Digest] = {}

    def digest(owner: str) -> Digest:
        return digests.setdefault(owner, Digest(owner, dt))

    for owner in sorted({r.owner for r in new.select("owner").distinct().collect()}):
        mine = new.where(F.col("owner") == F.lit(owner))
        rows = [r.asDict() for r in mine.select(*_ROW).orderBy("change_pct", "regression_id").collect()]
        for g in pooled(changes(mine)).collect():
            g = g.asDict()
            members = [r for r in rows if all(_same(r[k], g[k]) for k in _GROUP)]
            kind = digest(owner).regressions if g["direction"] == "regression" else digest(owner).improvements
            kind.append((describe(g), sorted(members, key=lambda r: (-abs(r["change_pct"]), r["regression_id"]))))
    for r in late.select(*_ROW, "owner").collect():
        digest(r.owner).overdue.append(r.asDict())
    for m in missing:
        digest(owners.route({"pool": m.pool})).missing.append(m)
    new.unpersist()
    return [d for _, d in sorted(digests.items()) if d]


def _same(a, b) -> bool:
    return a == b or (a is None and b is None)


def missing_data(runs: DataFrame, dt: str, planned: dict[str, int | None], run_ids: list[str] | None = None,
                 min_share: float = MIN_SHARE) -> list[MissingData]:
    """The pools of `planned` (pool -> cases planned, None: as its runs say) that published
    no run for `dt` (among `run_ids` when given; reruns never count), or whose good cases
    fall below `min_share` of the planned ones."""
    night = runs.where((F.col("dt") == F.lit(dt)) & (F.col("reason") != "rerun"))
    if run_ids is not None:
        night = night.where(F.col("run_id").isin(list(run_ids)))
    seen = {r.pool: r for r in night.groupBy("pool").agg(
        F.count(F.lit(1)).alias("shards"), F.sum("cases_planned").alias("planned"),
        F.sum("cases_ok").alias("ok")).collect()}
    out = []
    for pool in sorted(planned):
        if pool not in seen:
            out.append(MissingData(pool, dt, "no results: the sweep asked for this pool, and no run of it was "
                                             "published for the night"))
            continue
        want = planned[pool] or seen[pool].planned or 0
        ok = seen[pool].ok or 0
        if want and ok < min_share * want:
            out.append(MissingData(pool, dt, f"ran far fewer cases than planned: {ok} of {want} measured ok "
                                             f"({100 * ok / want:.0f} %) in {seen[pool].shards} shard(s)"))
    return out


def planned_cases(info: dict) -> dict[str, int]:
    """Per pool of a sweep (pipelines.orchestration.tasks.run_info), the cases its suites plan."""
    from kernels_bench.suite import load_suite

    per_pool = sum(len(load_suite(s).filter(info.get("kernel")).cases) for s in info["suites"])
    return {pool: per_pool for pool in info["pools"]}


def send(digests: list[Digest], owners: Owners) -> dict[str, dict]:
    """Send each digest to its owner's channels; every channel is tried, then one error
    names each failure. Returns per owner what was sent where."""
    from pipelines.triage.channels import WebhookNotifier, email_notifier

    report, failures = {}, []
    for d in digests:
        team = owners.team(d.owner)
        sent = report.setdefault(d.owner, {"email": [], "webhook": False, "subject": d.subject})
        if not team.email and not team.webhook:
            log.warning("no channel for owner %s in %s; digest not sent:\n%s", d.owner, owners.source, d.text())
        if team.email:
            try:
                email_notifier(list(team.email), d.subject, d.html(), owners.email_conn_id).notify({})
                sent["email"] = list(team.email)
            except Exception as e:  # noqa: BLE001 - every channel is tried, then all failures are raised
                failures.append(f"email to {', '.join(team.email)} for {d.owner} (connection "
                                f"{owners.email_conn_id}): {e}")
        if team.webhook:
            try:
                WebhookNotifier(team.webhook_url(), d.slack()).notify({})
                sent["webhook"] = True
            except Exception as e:  # noqa: BLE001
                failures.append(f"webhook for {d.owner}: {e}")
    if failures:
        raise RuntimeError("notifications failed:\n  " + "\n  ".join(failures))
    return report


def notify_night(info: dict, since: datetime.datetime, today: datetime.date | None = None,
                 owners: Owners | None = None) -> dict:
    """The `notify` task of a sweep: build the night's digests and send them (or only log
    them when the owners file has notify: false)."""
    from pipelines.warehouse import catalog
    from pipelines.warehouse.session import get_spark
    from pipelines.sweep.ids import sweep_run_ids
    from schemas.tables import REGRESSIONS, RUNS

    owners = owners or load_owners()
    lake = Lake.from_env()
    if not owners.notify:
        log.info("notifications are off (%s: notify: false): no digest built", owners.source)
        return {"sent": False, "reason": f"notify: false in {owners.source}"}
    spark = get_spark(lake)
    today = today or datetime.datetime.now(datetime.timezone.utc).date()
    runs = spark.table(catalog.ensure_table(spark, lake, RUNS))
    missing = missing_data(runs, info["dt"], planned_cases(info), run_ids=sweep_run_ids(info))
    table = spark.table(catalog.ensure_table(spark, lake, REGRESSIONS))
    digests = build_digests(table, owners, info["dt"], since, today, missing)
    for d in digests:
        log.info("digest for %s:\n%s", d.owner, d.text())
    return {"sent": True, "owners": send(digests, owners)}
