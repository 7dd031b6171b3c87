"""The perflake web application: FastAPI pages over one lake, read through DuckDB.

`create_app(lake)` serves standalone (`perflake web`) and inside the Airflow UI (the
plugin in pipelines/web/plugin.py mounts the same app). A bad parameter answers a 4xx
page that names it; an unexpected failure a 500 page without a traceback (it is logged).
With a token, every request must carry it (a bearer header, or `?token=` once, which
sets a cookie); the CLI requires one before it listens beyond loopback. Without one,
only requests from this machine (the peer's address) that name the host by a loopback
name are answered (no DNS rebinding).
"""
from __future__ import annotations

import contextlib
import ipaddress
import logging
from urllib.parse import urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipelines.config.lake import Lake
from pipelines.web import compare, csrf, explorer, models, overview, regressions, roofline, series
from pipelines.web.reader import Reader
from pipelines.web.render import HERE, TEMPLATES

log = logging.getLogger("perflake.web")
TOKEN_COOKIE = "perflake_token"
# Scripts and styles come from this app only (the charting library is vendored).
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'")
# The triage forms are a name, a note (500 characters) and a token: a body past this is refused unread.
MAX_FORM_BYTES = 64 * 1024
TITLES = {400: "Bad request", 401: "Token required", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
          409: "Conflict", 413: "Request too large", 422: "Missing or invalid field", 500: "Internal error", 503: "Try again later"}


def create_app(lake: Lake, token: str | None = None) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        try:  # load the lake before the first page asks (a year of nights takes seconds)
            app.state.reader.cursor().close()
        except Exception:  # a page will say what is wrong
            log.exception("perflake web: loading the lake %s failed", lake.root)
        yield
        app.state.reader.close()

    app = FastAPI(title="perflake", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.lake, app.state.reader, app.state.token = lake, Reader(lake), token or None
    app.state.csrf_key = csrf.lake_key(lake.root)  # signs the forms' tokens, in every worker alike
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    for module in (overview, explorer, series, regressions, compare, roofline, models):
        app.include_router(module.router)

    @app.get("/healthz", include_in_schema=False)
    def healthz():
        return PlainTextResponse("ok")

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if not app.state.token and not _loopback_peer(request):
            return _error_page(request, 403, "without a token this dashboard answers only to this machine, not to "
                                             f"{request.client.host if request.client else 'an unknown peer'} "
                                             "(mounted in an Airflow API server that listens beyond loopback, it "
                                             "would serve anyone who reaches it); set PERFLAKE_WEB_TOKEN")
        if not app.state.token and not _loopback_host(request):
            return _error_page(request, 403, "without a token this dashboard answers only to 127.0.0.1, localhost "
                                             f"and [::1], not to Host {request.headers.get('host', '')!r} (a page "
                                             "on another name that resolves here would otherwise read and post "
                                             "as you: DNS rebinding); set a token to serve it under other names")
        if app.state.token and not _authorized(request, app.state.token):
            if request.query_params.get("token") and csrf.same(request.query_params["token"], app.state.token):
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                url = request.url.replace(query=urlencode(rest))  # re-encoded: a value's '&' stays in it
                response = RedirectResponse(str(url), status_code=303)
                response.set_cookie(TOKEN_COOKIE, app.state.token, httponly=True, samesite="strict",
                                    path=request.scope.get("root_path", "").rstrip("/") or "/",
                                    secure=request.url.scheme == "https")
                return response
            return _error_page(request, 401, "this dashboard needs its token: open it once with ?token=... "
                                             "or send 'Authorization: Bearer ...'")
        length = request.headers.get("content-length", "0")
        if request.method == "POST" and (not length.isdigit() or int(length) > MAX_FORM_BYTES):
            return _error_page(request, 413, f"a form of at most {MAX_FORM_BYTES // 1024} KiB, with its length "
                                             "given (Content-Length)")
        response = _secured(await call_next(request))
        if request.url.path.startswith(f"{request.scope.get('root_path', '').rstrip('/')}/static/"):
            response.headers["Cache-Control"] = "public, max-age=86400"
        else:  # pages show triage state and notes: not kept by shared caches or the back button
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    app.add_middleware(HeadAsGet)  # added last: outermost

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return _error_page(request, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        what = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors())
        return _error_page(request, 400, what or "invalid request")

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception):
        log.exception("perflake web: %s %s failed", request.method, request.url.path)
        return _error_page(request, 500, f"the page failed ({type(exc).__name__}); the server log has the details")

    return app


class HeadAsGet:
    """HEAD answered as GET without the body (FastAPI's GET routes answer HEAD with 405):
    `curl -I`, uptime checks and link checkers see the page's status and headers,
    Content-Length included, and the guard above sees the request as it would a GET."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def headers_only(message):
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _loopback_host(request: Request) -> bool:
    """The request names this host by a loopback name (its Host header, port aside)."""
    return urlsplit("//" + request.headers.get("host", "")).hostname in LOOPBACK


def _loopback_peer(request: Request) -> bool:
    """The request comes from this machine (its peer address). The CLI binds loopback when it
    has no token; the Airflow plugin is served wherever the API server listens, and a Host
    header is the client's to choose, so the peer is what tells."""
    try:
        return request.client is not None and ipaddress.ip_address(request.client.host).is_loopback
    except ValueError:  # not an address (a Unix socket's peer)
        return False


def _authorized(request: Request, token: str) -> bool:
    if request.url.path == f"{request.scope.get('root_path', '').rstrip('/')}/healthz":
        return True
    header = request.headers.get("authorization", "")
    given = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else request.cookies.get(
        TOKEN_COOKIE, "")
    return bool(given) and csrf.same(given, token)


def _secured(response):
    """Every answer, a page or a refusal: scripts and frames from this app only, no MIME
    sniffing, no referrer beyond this site."""
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
    return response


def _error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    response = TEMPLATES.TemplateResponse(request, "error.html", {
        "status": status, "title": TITLES.get(status, "Error"), "detail": detail, "current": ""},
        status_code=status)
    response.headers["Cache-Control"] = "no-store"
    return _secured(response)
