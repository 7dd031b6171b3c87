"""The owners file (pipelines/config/owners.yaml, or the file $PERFLAKE_OWNERS names): who
triages which regressions, by when, and where they hear about it.

Routes are tried in order; the first whose patterns (shell globs, case-sensitive) all
match a regression's kernel family, backend, dtype and pool names its owner; a key a
route leaves out matches anything; no match -> `default_owner`. Each owner is a team
with a notification channel: email addresses and/or a webhook URL (Slack-compatible
JSON). A webhook written `env:NAME` is read from the environment variable NAME when a
digest is sent, so that a secret URL stays out of the repository. Digests are sent
only where the file says `notify: true` (pipelines.triage.digest).

The file is validated once, at load; an error names the file, the entry and the field.
"""
from __future__ import annotations

import datetime
import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_PATH = Path(__file__).parent / "owners.yaml"
ROUTE_KEYS = ("family", "backend", "dtype", "pool")
TRIAGE_WORKING_DAYS = 2
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_TEAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class Team:
    name: str
    email: tuple[str, ...] = ()
    webhook: str | None = None        # a URL, or env:NAME
    triage_working_days: int = TRIAGE_WORKING_DAYS

    def webhook_url(self) -> str | None:
        """The webhook URL, resolving env:NAME; an unset variable is an error."""
        if not self.webhook or not self.webhook.startswith("env:"):
            return self.webhook
        name = self.webhook.removeprefix("env:")
        url = os.environ.get(name)
        if not url:
            raise ValueError(f"team {self.name}: webhook is env:{name} but ${name} is not set")
        return _url(url, f"${name} (webhook of team {self.name})")


@dataclass(frozen=True)
class Route:
    owner: str
    patterns: tuple[tuple[str, str], ...]   # (key, glob)

    def matches(self, attrs: dict) -> bool:
        return all(fnmatch.fnmatchcase(_text(attrs.get(k)), glob) for k, glob in self.patterns)


@dataclass(frozen=True)
class Owners:
    default_owner: str
    teams: dict[str, Team]
    routes: tuple[Route, ...] = ()
    email_conn_id: str = "smtp_default"
    notify: bool = False               # send digests (else they are only built and logged)
    source: str = "<memory>"

    def route(self, attrs: dict) -> str:
        """The owner of a regression (or of a pool's missing data) with these attributes
        (family, backend, dtype, pool): the first matching route's, else the default."""
        return next((r.owner for r in self.routes if r.matches(attrs)), self.default_owner)

    def team(self, name: str) -> Team:
        return self.teams.get(name) or Team(name)

    def due_date(self, owner: str, first_seen: datetime.date) -> datetime.date:
        return add_working_days(first_seen, self.team(owner).triage_working_days)


def add_working_days(day: datetime.date, n: int) -> datetime.date:
    """The n-th working day (Monday to Friday) after `day`; public holidays are not known."""
    while n > 0:
        day += datetime.timedelta(days=1)
        if day.weekday() < 5:
            n -= 1
    return day


def load_owners(path: str | Path | None = None) -> Owners:
    p = Path(path or os.environ.get("PERFLAKE_OWNERS") or DEFAULT_PATH)
    try:
        doc = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"owners file {p} not found (set $PERFLAKE_OWNERS or create it)") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {e}") from None
    return parse_owners(doc, str(p))


def parse_owners(doc, source: str = "<memory>") -> Owners:
    if not isinstance(doc, dict):
        raise ValueError(f"{source}: a mapping with default_owner, teams and routes")
    unknown = sorted(set(doc) - {"default_owner", "teams", "routes", "triage_working_days", "email_conn_id",
                                 "notify"})
    if unknown:
        raise ValueError(f"{source}: unknown key(s) {unknown}")
    days = _working_days(doc.get("triage_working_days", TRIAGE_WORKING_DAYS), f"{source}: triage_working_days")
    teams_doc = doc.get("teams") or {}
    if not isinstance(teams_doc, dict):
        raise ValueError(f"{source}: teams must be a mapping of team name to its channel")
    teams = {name: _team(name, spec, days, f"{source}: teams.{name}") for name, spec in teams_doc.items()}
    default = doc.get("default_owner")
    if not isinstance(default, str) or not default:
        raise ValueError(f"{source}: default_owner is missing (the team that owns what no route matches)")
    _known(default, teams, f"{source}: default_owner")
    routes_doc = doc.get("routes") or []
    if not isinstance(routes_doc, list):
        raise ValueError(f"{source}: routes must be a list (first match wins)")
    routes = tuple(_route(r, teams, f"{source}: routes[{i}]") for i, r in enumerate(routes_doc))
    conn = doc.get("email_conn_id", "smtp_default")
    if not isinstance(conn, str) or not _TEAM.match(conn):
        raise ValueError(f"{source}: email_conn_id {conn!r} is not an Airflow connection id")
    notify = doc.get("notify", False)
    if not isinstance(notify, bool):
        raise ValueError(f"{source}: notify must be true or false, got {notify!r}")
    return Owners(default, teams, routes, conn, notify, source)


def _team(name, spec, days: int, where: str) -> Team:
    if not isinstance(name, str) or not _TEAM.match(name):
        raise ValueError(f"{where}: team name {name!r} must be letters, digits, '_', '-' or '.'")
    spec = spec or {}
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: a mapping with email and/or webhook")
    unknown = sorted(set(spec) - {"email", "webhook", "triage_working_days"})
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown} (email, webhook, triage_working_days)")
    email = spec.get("email") or []
    email = [email] if isinstance(email, str) else email
    if not isinstance(email, list):
        raise ValueError(f"{where}.email: an address or a list of addresses")
    for a in email:
        if not isinstance(a, str) or not _EMAIL.match(a):
            raise ValueError(f"{where}.email: {a!r} is not an email address")
    hook = spec.get("webhook")
    if hook is not None:
        if not isinstance(hook, str):
            raise ValueError(f"{where}.webhook: a URL or env:NAME")
        if hook.startswith("env:"):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", hook[4:]):
                raise ValueError(f"{where}.webhook: {hook!r} does not name an environment variable")
        else:
            _url(hook, f"{where}.webhook")
    days = _working_days(spec.get("triage_working_days", days), f"{where}.triage_working_days")
    return Team(name, tuple(email), hook, days)


def _route(spec, teams: dict, where: str) -> Route:
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: a mapping of {', '.join(ROUTE_KEYS)} patterns and owner")
    unknown = sorted(set(spec) - {"owner", *ROUTE_KEYS})
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; patterns are over {', '.join(ROUTE_KEYS)}")
    owner = spec.get("owner")
    if not isinstance(owner, str) or not owner:
        raise ValueError(f"{where}.owner: missing (the team this route assigns)")
    _known(owner, teams, f"{where}.owner")
    patterns = []
    for key in ROUTE_KEYS:
        if key in spec:
            if not isinstance(spec[key], (str, int, float)) or spec[key] == "":
                raise ValueError(f"{where}.{key}: a glob pattern such as 'gemm' or 'sim-*'")
            patterns.append((key, str(spec[key])))
    if not patterns:
        raise ValueError(f"{where}: no pattern ({', '.join(ROUTE_KEYS)}); use default_owner for a catch-all")
    return Route(owner, tuple(patterns))


def _text(value) -> str:
    return "" if value is None or value != value else str(value)  # None and NaN: unknown


def _known(team: str, teams: dict, where: str) -> None:
    if team not in teams:
        raise ValueError(f"{where}: team {team!r} is not defined under teams (known: {sorted(teams)})")


def _working_days(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: a whole number of working days >= 0, got {value!r}")
    return value


def _url(value: str, where: str) -> str:
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"{where}: {value!r} is not an http(s) URL")
    return value
