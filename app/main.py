"""The ASGI app (`uvicorn app.main:app`). `create_app(settings)` builds one for tests and tools."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import RedirectResponse, Response

from app.api.auth import authorization
from app.api.apidocs import install_api_docs
from app.api.edge import GatewayApp, RequestIdMiddleware, route_path
from app.api.console import console_enabled, install_console
from app.api.error_responses import error_response, json_response, refusal_error
from app.api.admin import router as admin_router
from app.api.records import router as records_router
from app.api.spend import router as spend_router
from app.api.resume import router as resume_router
from app.api.openapi import build_openapi
from app.api.routes import door_routes, install_error_handlers, path_hint, router
from app.catalog import Catalog, CatalogError
from app.catalog.demo_clouds import (
    clouds_off_the_simulator,
    remove_demo_credentials,
    simulator_base_urls,
    with_demo_clouds,
)
from app.gateway import Gateway
from app.doors.base import Door
from app.doors.registry import DOORS, DoorTable
from app.doors.validation import validation_error as invalid_request
from app.ledger import LedgerUrlError
from app.telemetry.logs import ensure_configured
from app.policy.keyring import KeysConfigError
from app.providers.registry import provider_setups
from app.contract.refusals import NotAuthenticated
from app.server.hosting import bound_send_buffers, wait_listening
from app.server.shutdown import close_gateway, watch_server_exit
from app.settings import Settings
from app.server.startup_messages import (
    StartupErrorMessages,
    keys_refused,
    ledger_start_failed,
    ledger_url_refused,
    log_client_keys,
    log_providers,
    log_redis,
    demo_clouds_refused,
    unknown_variables_refused,
    workers_need_redis,
)
from app.telemetry.tracing import start_tracing

if TYPE_CHECKING:
    from simulator.app import LogScope

log = logging.getLogger("gateway")


def demo_settings(settings: Settings) -> Settings:
    """Point every provider at the simulator mounted on this same server, with demo keys."""
    base = settings.model_copy(update={"demo": True}).simulator_url()
    assert base is not None  # in demo mode there is one
    from simulator.scenarios import AGENT_SCENARIOS, SCENARIOS

    # Bedrock, Vertex AI and Azure OpenAI providers on the simulator; its scenarios listed as models.
    settings = with_demo_clouds(settings, base, [*SCENARIOS, *AGENT_SCENARIOS])
    try:
        catalog = Catalog.load(settings.catalog)
    except CatalogError:
        catalog = Catalog.load()  # the lifespan reports the operator's file in one line
    return settings.model_copy(
        update={
            "anthropic_api_key": settings.anthropic_api_key or _secret("demo-anthropic-key"),
            "openai_api_key": settings.openai_api_key or _secret("demo-openai-key"),
            "gemini_api_key": settings.gemini_api_key or _secret("demo-gemini-key"),
            "anthropic_base_url": f"{base}/anthropic",
            "openai_base_url": f"{base}/openai/v1",
            "google_base_url": f"{base}/google",
            # Every provider of the catalog (`compat`, a local server, the operator's own) on the simulator's
            # endpoint for its api, whatever its key, catalog `baseUrl` or GATEWAY_<NAME>_BASE_URL says.
            "base_urls": {**settings.base_urls, **simulator_base_urls(catalog, base)},
        }
    )


def _secret(value: str) -> Any:
    from pydantic import SecretStr

    return SecretStr(value)


async def _set_up_listening(gateway: Gateway, settings: Settings) -> None:
    """Once the server listens: bound the client connections' send buffers, and mark the records of gateway
    processes that are gone `interrupted` (only a process that serves may change others' records: one that
    fails with "address already in use" never gets here). Then the providers' adapters are imported
    (`Gateway.warm_up`, unless `GATEWAY_WARM_UP=false`), and only then is the gateway ready: a vendor SDK's import
    in a worker thread takes the process's CPU for seconds, and a turn served meanwhile would wait for it (a 0.5 s
    first-event timeout ran out before a Bedrock request was even signed). The server answers `/healthz` (and
    `/readyz` 503 "starting") from when it listens."""
    if not await wait_listening():
        return
    await bound_send_buffers(settings.send_buffer_bytes)
    try:
        await gateway.recorder.recover()
    except Exception as exc:  # the heartbeat tries again; serving does not depend on it
        log.warning(
            "ledger: marking the records of stopped gateways failed (%s); retried on the next heartbeat",
            type(exc).__name__,
        )
    if settings.warm_up:  # the served providers' adapters and SDKs, imported now that the server listens
        await gateway.warm_up()
        gc.freeze()  # what they imported lives as long as the process too (see the lifespan's `gc.freeze`)
    gateway.serving.set()


def _simulator_log_guard(app: FastAPI, request: Request) -> "Response | LogScope":
    """The demo simulator's request log holds prompts: with auth on it needs a gateway key, and shows that key
    only the requests of its own turns (everything with auth off)."""
    from simulator.app import LogScope

    try:
        key_id = app.state.gateway.keys.identify(authorization(request.headers))
    except NotAuthenticated as refused:
        return refusal_error(refused).response()
    return LogScope(key_id)


def create_app(
    settings: Settings | None = None, gateway: Gateway | None = None, doors: Sequence[Door] = DOORS
) -> GatewayApp:
    """`doors`: the doors the app serves (`app.doors.registry.DOORS`; a test adds one of its own). Without
    `settings` they come from the environment, whose unknown `GATEWAY_*` variables then stop the start."""
    from_environment = settings is None
    settings = settings or Settings()
    if settings.demo:
        settings = demo_settings(settings)
    tracing = start_tracing()  # None unless the OTEL_* variables ask for traces (app/tracing)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        ensure_configured(settings.log_level, settings.log_format)
        if settings.workers > 1:  # a worker of uvicorn's supervisor (`python -m app`, the entrypoint)
            if not settings.redis_url:
                raise workers_need_redis(settings.workers)
            from app.server.workers import exit_with_supervisor

            exit_with_supervisor()
        # POSTs on the turn routes skip FastAPI's stack from now on (app/api/edge.py); refused if middleware
        # was added that they would skip.
        app.start_fast_path()  # type: ignore[attr-defined]
        try:
            gw = gateway or Gateway(settings)
        except LedgerUrlError as exc:
            raise ledger_url_refused(exc, settings.database_url) from exc
        except KeysConfigError as exc:
            raise keys_refused(exc) from exc
        simulator = settings.simulator_url()
        if simulator is not None and (clouds := clouds_off_the_simulator(gw.catalog, simulator)):
            raise demo_clouds_refused(clouds)
        if from_environment and not settings.allow_unknown_variables:
            unknown = unknown_variables_refused(os.environ, gw.catalog.providers)
            if unknown is not None:
                raise unknown
        log_providers(provider_setups(settings, gw.catalog.providers), settings)
        log_client_keys(gw.keys)
        await log_redis(settings)
        try:
            await gw.recorder.start()  # the request ledger: migrate, heartbeat, start the writer (nothing destructive)
        except Exception as exc:
            raise ledger_start_failed(exc, settings.database_url) from exc
        await gw.start()  # limits (lease renewal), keys file watch
        if tracing is not None:
            from app.telemetry.tracing.turns import TurnTracer

            gw.dispatcher.observers.append(TurnTracer(tracing, forward_baggage=settings.forward_baggage))
        app.state.gateway = gw
        # Everything imported and built so far lives as long as the process: move it out of the cyclic
        # collector's sight, so that collections during streaming scan only per-request objects.
        gc.collect()
        gc.freeze()
        # Most per-stream objects are freed by reference counting; Python's default thresholds still ran
        # ~200 young and ~17 middle collections per second with 300 open streams, each scanning every live
        # stream's objects (docs/performance.md, The garbage collector).
        gc.set_threshold(*settings.gc_threshold)
        shutdown_watch = asyncio.create_task(
            watch_server_exit(gw), name="gateway-shutdown-watch"
        )  # app/server/shutdown.py
        send_buffers = asyncio.create_task(_set_up_listening(gw, settings), name="gateway-listening")
        if not gw.keys.enabled:
            log.warning("GATEWAY_API_KEYS is empty: the gateway accepts requests without a key")
        try:
            yield
        finally:
            shutdown_watch.cancel()
            send_buffers.cancel()
            await close_gateway(gw)  # settle what still runs; close the providers, limits, ledger, metrics
            if tracing is not None:
                tracing.shutdown()  # export the queued spans (bounded: a receiver that is down holds nothing)
            if settings.demo:
                remove_demo_credentials(settings.catalog)

    app_class = GatewayApp
    if tracing is not None:  # a SERVER span around every request, the turn routes' fast path included
        from app.api.traced import TracedGatewayApp

        app_class = TracedGatewayApp
    app = app_class(
        title="LLM streaming gateway",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.allowed_hosts = settings.allowed_host_names()
    app.doors = table = DoorTable(doors)
    if tracing is not None:
        app.tracing = tracing  # type: ignore[attr-defined]
        app.trace_probes = settings.trace_probes  # type: ignore[attr-defined]
    app.include_router(door_routes(table))
    app.include_router(router)
    app.include_router(records_router)
    app.include_router(admin_router)
    app.include_router(spend_router)
    app.include_router(resume_router)
    install_console(app, settings)
    install_api_docs(app)
    install_error_handlers(app, table)
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]  # request/event shapes added

    async def http_error(request: Request, exc: HTTPException) -> Response:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = str(exc.detail)
        hint = path_hint(request) if exc.status_code == 404 else None
        if hint is not None:  # the client's base URL lacks the API's prefix (or repeats it)
            message = (
                f"no route {request.method} {request.url.path}; did you mean {hint}? (check the client's base URL)"
            )
        return json_response({"error": {"type": kind, "message": message, "param": None}}, exc.status_code)

    @app.get("/", include_in_schema=False)
    async def root() -> Response:
        """A browser at the gateway's address: the console when it is served, else the API's reference."""
        return RedirectResponse("/console" if console_enabled(settings) else "/docs", status_code=302)

    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return error_response(invalid_request(list(exc.errors())), table.door_at(route_path(request.scope)))

    # Starlette types a handler as taking any Exception; it calls each with the class it is registered for.
    app.add_exception_handler(HTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    if settings.demo:
        from simulator.app import create_simulator

        app.mount(
            "/_simulator",
            create_simulator(log_guard=lambda request: _simulator_log_guard(app, request), declared_tools_only=True),
        )
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(StartupErrorMessages)  # outermost: a failed start-up is one readable line
    return app


app = create_app()
