"""The web console (`GET /console`), its health summary (`GET /v1/console/summary`) and its view of the pools
(`GET /v1/console/pools`).

The console is static files in `app/console/` (HTML, CSS and JavaScript modules; no build step, nothing
loaded from elsewhere), served only when `GATEWAY_CONSOLE` is on (by default only in demo mode), with a
strict Content-Security-Policy: scripts and styles from this origin only, no inline script, no framing.
The page talks to the gateway's own API with the client key the user types in, sent in the
`Authorization` header only.

The health summary comes from `app.telemetry.health.HealthWindow`, a turn observer this module adds to the gateway's
dispatcher when the console is on. A caller sees the figures of its own key (every key's when authentication
is off). The pools' view is the gateway's, whichever key asks (a deployment's state is not per key).

The `/v1/console/*` routes are on `api_router`, which the OpenAPI document describes even when the console is
off (they answer 404 then).
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
from app.contract.catalog_entries import Pool
from app.contract.console import ConsolePools, Cooldown, PoolDeploymentView, PoolView, QuotaUse
from app.telemetry.health import WINDOW_MINUTES, HealthWindow
from app.pools.state import Snapshot
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

router = APIRouter()  # the page and its files
api_router = APIRouter()  # what the page reads: `/v1/console/*`


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


@api_router.get("/v1/console/summary", tags=["operations"], summary="The console's health summary for the caller's key")
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


def _seconds_to_ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


def pool_view(pool: Pool, snapshot: Snapshot, configured: set[str], now_ms: int) -> PoolView:
    """One pool as the console shows it: the catalog's deployments with the balancer's state of each."""
    deployments = []
    for d in pool.deployments:
        state = snapshot.states[d.name]
        cooled = state.cooled_until_ms or None
        deployments.append(
            PoolDeploymentView(
                name=d.name,
                provider=d.provider,
                model=d.model,
                weight=d.weight,
                configured=d.provider in configured,
                inFlight=state.in_flight,
                cooldown=Cooldown(
                    cooling=state.cooled_until_ms > now_ms, until=cooled, reason=state.cool_reason, streak=state.streak
                ),
                ttftMs=_seconds_to_ms(state.ttft),
                gapMs=_seconds_to_ms(state.gap),
                sampledAt=state.sampled_at_ms or None,
                rpm=QuotaUse(used=state.rpm_used, limit=d.rpm),
                tpm=QuotaUse(used=state.tpm_used, limit=d.tpm),
            )
        )
    return PoolView(name=pool.name, strategy=pool.strategy, shared=snapshot.shared, deployments=deployments)


@api_router.get(
    "/v1/console/pools",
    tags=["operations"],
    summary="The console's view of each pool: its deployments and their state",
    responses={200: {"model": ConsolePools, "description": "Each pool of the catalog, its deployments' state now"}},
)
async def console_pools(request: Request) -> Response:
    """Each pool of the catalog (docs/pools.md): its strategy, and per deployment its turns in flight,
    cooldown (until, reason, failure streak), latency estimates (EWMA of time to first token and of the gap
    between frames), quota use (rpm, tpm), and whether that state is shared by every replica (Redis)."""
    gateway = request.app.state.gateway
    gateway.keys.identify(authorization(request.headers))  # any valid key (every key's view is the same)
    dispatcher = gateway.dispatcher
    configured = set(dispatcher.providers)
    pools = [route.pool for route in dispatcher.catalog.routes.values() if route.pool is not None]
    now = int(time.time() * 1000)
    views = [pool_view(pool, await gateway.pools.view(pool), configured, now) for pool in pools]
    body = ConsolePools(now=now, pools=views)
    return json_response(body.model_dump(), headers={"Cache-Control": "no-store"})


def install_console(app: FastAPI, settings: Settings) -> None:
    """When the console is enabled: its routes, and a `HealthWindow` observing the gateway's turns."""
    if not console_enabled(settings):
        return
    window = HealthWindow()
    app.state.console_health = window
    app.include_router(router)
    app.include_router(api_router)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: FastAPI):
        async with inner(application) as state:
            application.state.gateway.dispatcher.observers.append(window)
            yield state

    app.router.lifespan_context = lifespan
