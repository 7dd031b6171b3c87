"""CSRF protection for the triage forms: a random token in a SameSite=Strict, HttpOnly
cookie, repeated in a hidden field of every form (double submit), and an Origin check.
A cross-site page can make the browser post a form, but it can neither read the cookie
to fill in the field nor send the cookie along (SameSite)."""
from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request

COOKIE = "perflake_csrf"
FIELD = "csrf_token"


def token(request: Request) -> str:
    """The request's token: its cookie's, or a new one (set on the response by `attach`)."""
    existing = request.cookies.get(COOKIE, "")
    return existing if len(existing) == 43 else secrets.token_urlsafe(32)


def attach(response, request: Request, value: str) -> None:
    if request.cookies.get(COOKIE) != value:
        path = request.scope.get("root_path", "").rstrip("/") or "/"
        response.set_cookie(COOKIE, value, httponly=True, samesite="strict", path=path,
                            secure=request.url.scheme == "https")


def check(request: Request, submitted: str | None) -> None:
    """403 unless the form's token matches the cookie and the request comes from this site."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise HTTPException(403, f"cross-site form post refused (origin {origin})")
    cookie = request.cookies.get(COOKIE, "")
    if not cookie or not submitted or not hmac.compare_digest(cookie, submitted):
        raise HTTPException(403, "the form's CSRF token is missing or stale: reload the page and submit again")
