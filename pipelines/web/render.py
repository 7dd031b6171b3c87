"""Templates (Jinja2, autoescaped) and the formatting every page shares."""
from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlencode

from fastapi.templating import Jinja2Templates
from starlette.requests import Request

from pipelines.web import csrf

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
PAGES = (("overview", "/", "Overview"), ("explorer", "/explorer", "Series"), ("regressions", "/regressions",
         "Regressions"), ("compare", "/compare", "Compare"), ("roofline", "/roofline", "Roofline"),
         ("models", "/models", "Models"))


def duration(ns) -> str:
    """A time per call in the unit that reads best (ns, us, ms, s)."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def percent(value, signed: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.1f} %" if signed else f"{value:.1f} %"


def number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}g}"


def base(request: Request) -> str:
    """The prefix the app is mounted under ('' standalone, '/perflake' inside Airflow)."""
    return request.scope.get("root_path", "").rstrip("/")


def link(request: Request, path: str, **query) -> str:
    """An app URL with the non-empty query parameters (a link that shows the same view)."""
    q = {k: v for k, v in query.items() if v not in (None, "", [])}
    return base(request) + path + (("?" + urlencode(q, doseq=True)) if q else "")


TEMPLATES.env.filters.update(duration=duration, percent=percent, number=number)
TEMPLATES.env.globals.update(PAGES=PAGES, link=link, base=base)


def page(request: Request, template: str, status_code: int = 200, **context):
    """The rendered page, with the CSRF token for its forms (and its cookie)."""
    token = csrf.token(request)
    context.setdefault("csrf", token)
    context.setdefault("current", "")
    response = TEMPLATES.TemplateResponse(request, template, context, status_code=status_code)
    csrf.attach(response, request, token)
    return response
