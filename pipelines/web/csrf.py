"""CSRF protection for the triage forms: a token in a SameSite=Strict, HttpOnly cookie,
repeated in a hidden field of every form (double submit), and an Origin check.

A cross-site page can make the browser post a form, but it can neither read the cookie
to fill in the field nor send the cookie along (SameSite). Two holes of a plain double
submit are closed as well:
- a page on another port of the same host is same-site, and can set a cookie for this
  one (cookies are not kept apart by port): so a token is this server's only if it
  carries the server's signature (an HMAC under the lake's key,
  `<lake>/services/web/csrf.key`, readable by its owner only and shared by every worker
  that serves the app, as the Airflow API server's do), and a planted one is replaced,
  never adopted;
- a cross-origin redirect makes the browser post with `Origin: null`: refused, as is any
  other origin than this host (the dashboard's own pages send theirs: Referrer-Policy
  same-origin).
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request

COOKIE = "perflake_csrf"
FIELD = "csrf_token"


def lake_key(root: Path) -> bytes:
    """The lake's signing key, made on first use: written whole under a temporary name,
    then linked into place, so that two workers starting at once read the same key."""
    path = root / "services" / "web" / "csrf.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".csrf.key.tmp-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another worker's key won
        finally:
            tmp.unlink(missing_ok=True)
    return bytes.fromhex(path.read_text().strip())


def _sign(key: bytes, nonce: str) -> str:
    return hmac.new(key, nonce.encode(), hashlib.sha256).hexdigest()[:32]


def _valid(key: bytes, value: str) -> bool:
    nonce, _, signature = value.partition(".")
    return bool(nonce and signature) and same(signature, _sign(key, nonce))


def same(a: str, b: str) -> bool:
    """Constant-time equality of two strings of any characters (hmac.compare_digest
    refuses a str that is not ASCII: a 500 for a request's stray byte)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape"))


def token(request: Request) -> str:
    """The request's token: its cookie's where this server signed it, else a new one (set
    on the response by `attach`)."""
    key = request.app.state.csrf_key
    existing = request.cookies.get(COOKIE, "")
    if _valid(key, existing):
        return existing
    nonce = secrets.token_urlsafe(24)
    return f"{nonce}.{_sign(key, nonce)}"


def attach(response, request: Request, value: str) -> None:
    if request.cookies.get(COOKIE) != value:
        path = request.scope.get("root_path", "").rstrip("/") or "/"
        response.set_cookie(COOKIE, value, httponly=True, samesite="strict", path=path,
                            secure=request.url.scheme == "https")


def check(request: Request, submitted: str | None) -> None:
    """403 unless the request comes from this site and the form's token is the cookie's,
    signed by this server."""
    origin = request.headers.get("origin")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc != request.headers.get("host")):
        raise HTTPException(403, f"cross-site form post refused (origin {origin})")
    cookie = request.cookies.get(COOKIE, "")
    if not (cookie and submitted and same(cookie, submitted) and _valid(request.app.state.csrf_key, cookie)):
        raise HTTPException(403, "the form's CSRF token is missing or stale: reload the page and submit again")
