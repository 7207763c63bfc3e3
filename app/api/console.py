"""The web console (`GET /console`) and its health summary (`GET /v1/console/summary`).

The console is static files in `app/console/` (HTML, CSS and JavaScript modules; no build step, nothing
loaded from elsewhere), served only when `GATEWAY_CONSOLE` is on (by default only in demo mode), with a
strict Content-Security-Policy: scripts and styles from this origin only, no inline script, no framing.
The page talks to the gateway's own API with the client key the user types in, sent in the
`Authorization` header only.

The health summary comes from `app.health.HealthWindow`, a turn observer this module adds to the gateway's
dispatcher when the console is on. A caller sees the figures of its own key (every key's when authentication
is off).
"""

from __future__ import annotations

import re
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI, Query, Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.error_responses import ApiError, json_response
from app.health import WINDOW_MINUTES, HealthWindow
from app.settings import Settings

STATIC_DIR = Path(__file__).resolve().parent.parent / "console"
_STATIC_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*\.(js|css|html|svg)$")
_CONTENT_TYPES = {
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "svg": "image/svg+xml",
}
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def console_enabled(settings: Settings) -> bool:
    return settings.demo if settings.console is None else settings.console


# ----------------------------------------------------------------------------- routes

router = APIRouter()


def _static(name: str) -> Response:
    if not _STATIC_NAME.match(name):
        raise ApiError(404, "not_found", "no such console file")
    path = STATIC_DIR / name
    if not path.is_file():
        raise ApiError(404, "not_found", "no such console file")
    return Response(path.read_bytes(), media_type=_CONTENT_TYPES[name.rsplit(".", 1)[1]], headers=SECURITY_HEADERS)


@router.get("/console", include_in_schema=False)
@router.get("/console/", include_in_schema=False)
async def console_page() -> Response:
    return _static("index.html")


@router.get("/console/{name}", include_in_schema=False)
async def console_file(name: str) -> Response:
    return _static(name)


@router.get("/v1/console/summary", tags=["operations"], summary="The console's health summary for the caller's key")
async def console_summary(request: Request, minutes: int = Query(default=15, ge=1, le=WINDOW_MINUTES)) -> Response:
    """Turns per minute by outcome, time to first token and overhead percentiles (ms), and per provider the
    turns served, errors, retries, fallbacks and timeouts, for the caller's key (every key's when
    authentication is off); `activeStreams` counts this process's turns in flight."""
    gateway = request.app.state.gateway
    key_id = gateway.keys.identify(authorization(request.headers))
    window: HealthWindow = request.app.state.console_health
    active = len(gateway.jobs) if key_id is None else gateway.streams_per_key.get(key_id, 0)
    body = {
        "now": int(time.time() * 1000),
        "windowMinutes": minutes,
        "activeStreams": active,
        **window.summary(key_id, minutes),
    }
    return json_response(body, headers={"Cache-Control": "no-store"})


def install_console(app: FastAPI, settings: Settings) -> None:
    """When the console is enabled: its routes, and a `HealthWindow` observing the gateway's turns."""
    if not console_enabled(settings):
        return
    window = HealthWindow()
    app.state.console_health = window
    app.include_router(router)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: FastAPI):
        async with inner(application) as state:
            application.state.gateway.dispatcher.observers.append(window)
            yield state

    app.router.lifespan_context = lifespan
