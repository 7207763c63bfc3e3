"""HTTP routes (docs/api.md §1). The doors' routes come from the doors' own description (`app.doors.registry`):
a turn route hands its request to its door through the shared glue (`app.api.turns.serve`), the dispatcher and
the event stream do the rest; a token counting route goes through `app.api.count_tokens.serve_count`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api import stored_responses
from app.api.count_tokens import serve_count
from app.api.edge import Endpoint, TurnRoute, route_path
from app.api.error_responses import ApiError, error_response, json_response, refusal_error
from app.api.turns import serve
from app.contract.catalog import ModelList, anthropic_model_list
from app.doors.base import Door, DoorRoute, TokenCountDoor
from app.doors.errors import BadRequest
from app.doors.registry import DOORS, count_routes, door_at, turn_routes
from app.gateway import Gateway
from app.refusals import Refusal

router = APIRouter()


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


def _turn_endpoint(door: Door, route: DoorRoute) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return await serve(request, door, route)

    return endpoint


def _count_endpoint(door: TokenCountDoor) -> Endpoint:
    async def endpoint(request: Request) -> Response:
        return await serve_count(request, door)

    return endpoint


StoredEndpoint = Callable[[Request, str], Awaitable[Response]]


def _stored_endpoints(door: Door) -> tuple[StoredEndpoint, StoredEndpoint]:
    async def get(request: Request, response_id: str) -> Response:
        return await stored_responses.get(request, door, response_id)

    async def delete(request: Request, response_id: str) -> Response:
        return await stored_responses.delete(request, door, response_id)

    return get, delete


def _declare_door_routes() -> None:
    """The doors' routes, from their own description (`app.doors.registry`). The turn routes are `TurnRoute`s:
    the fast path (`app.api.edge`) answers them without FastAPI's per-request machinery."""
    for door, route in turn_routes():
        router.add_api_route(
            route.path, _turn_endpoint(door, route), methods=[route.method], name=route.name,
            summary=route.summary, tags=list(route.tags), route_class_override=TurnRoute,
        )
    for count in count_routes():
        router.add_api_route(
            count.route.path, _count_endpoint(count), methods=[count.route.method], name=count.route.name,
            summary=count.route.summary, tags=list(count.route.tags),
        )
    for door in DOORS:  # a door's stored responses: GET reads one of the caller's key, DELETE removes it
        if door.stored is not None:
            get, delete = _stored_endpoints(door)
            name = door.name.replace("-", "_")
            router.add_api_route(door.stored.path, get, methods=["GET"], name=f"get_{name}_stored",
                                 summary="A stored response of the caller's key", tags=["doors"])  # fmt: skip
            router.add_api_route(door.stored.path, delete, methods=["DELETE"], name=f"delete_{name}_stored",
                                 summary="Delete a stored response of the caller's key", tags=["doors"])  # fmt: skip


_declare_door_routes()


@router.get(
    "/v1/models",
    tags=["catalog"],
    summary="Models and routes this gateway serves (OpenAI's list shape)",
    responses={200: {"model": ModelList, "description": "OpenAI's model list with the catalog's fields"}},
)
async def list_models(request: Request) -> Response:
    """`{"object": "list", "data": [model objects]}` as OpenAI's `GET /v1/models` answers (the OpenAI SDKs'
    `models.list()` reads it), each entry with the catalog's fields; `providers` lists the configured
    providers (also those without catalog models). A request with an `anthropic-version` header (the
    Anthropic SDKs) gets the same entries in Anthropic's list shape."""
    gateway = _gateway(request)
    gateway.keys.identify(authorization(request.headers))
    configured = gateway.dispatcher.providers
    entries = gateway.catalog.model_list(configured)
    if request.headers.get("anthropic-version"):
        return json_response(anthropic_model_list(entries))
    providers = [{"name": name, "api": provider.api} for name, provider in sorted(configured.items())]
    return json_response({"object": "list", "data": entries, "providers": providers})


@router.get("/healthz", tags=["operations"], summary="Liveness")
async def healthz() -> Response:
    return json_response({"status": "ok"})


@router.get("/readyz", tags=["operations"], summary="Readiness: store reachable, not draining")
async def readyz(request: Request) -> Response:
    gateway = _gateway(request)
    if gateway.draining:
        return json_response({"status": "draining"}, 503)
    if not gateway.serving.is_set():
        return json_response({"status": "starting"}, 503)
    try:
        await asyncio.wait_for(gateway.ledger.ping(), gateway.settings.ledger_ping_timeout_s)
    except Exception:
        return json_response({"status": "store unavailable"}, 503)
    return json_response({"status": "ready"})


@router.get("/metrics", tags=["operations"], summary="Prometheus metrics (text exposition)")
async def metrics(request: Request) -> Response:
    gateway = _gateway(request)  # open unless GATEWAY_METRICS_KEY is set: then only that key reads it
    if gateway.metrics_ring is not None:
        gateway.metrics_ring.identify(authorization(request.headers))
    body, content_type = gateway.metrics.exposition()
    return Response(body, media_type=content_type)


def install_error_handlers(app) -> None:
    """A `BadRequest` or a `Refusal` that reaches the app is answered in the error shape of the door at the
    request's path (docs/api.md §9's shape elsewhere)."""

    async def bad_request(request: Request, exc: BadRequest) -> Response:
        return error_response(exc, door_at(route_path(request.scope)))

    async def refusal(request: Request, exc: Refusal) -> Response:
        return error_response(refusal_error(exc), door_at(route_path(request.scope)))

    app.add_exception_handler(BadRequest, bad_request)
    app.add_exception_handler(Refusal, refusal)


__all__ = ["router", "install_error_handlers", "ApiError"]
