"""HTTP routes (docs/api.md §1). The doors' routes come from the doors' own description (`app.doors.registry`):
a turn route hands its request to its door through the shared glue (`app.api.turns.serve`), the dispatcher and
the event stream do the rest; a token counting route goes through `app.api.count_tokens.serve_count`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, WebSocket
from starlette.responses import Response

from app.api.auth import authorization
from app.api import stored_responses
from app.api.count_tokens import serve_count
from app.api.edge import Endpoint, TurnRoute, route_path
from app.api.error_responses import ApiError, error_response, json_response, refusal_error
from app.api.turns import serve
from app.contract.catalog import ModelList, anthropic_model_list
from app.doors import gemini
from app.doors.base import Door, DoorRoute, TokenCountDoor
from app.doors.gemini import models as gemini_models
from app.doors.gemini import openapi as gemini_openapi
from app.doors.openapi import ref
from app.doors.errors import BadRequest
from app.doors.registry import DOORS, count_routes, door_at, turn_routes
from app.gateway import Gateway
from app.contract.refusals import Refusal

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


def _stored_endpoints(door: Door) -> tuple[StoredEndpoint, StoredEndpoint, StoredEndpoint]:
    async def get(request: Request, response_id: str) -> Response:
        return await stored_responses.get(request, door, response_id)

    async def delete(request: Request, response_id: str) -> Response:
        return await stored_responses.delete(request, door, response_id)

    async def input_items(request: Request, response_id: str) -> Response:
        return await stored_responses.input_items(request, door, response_id)

    return get, delete, input_items


def _websocket_refusal(door: Door, refusal: BadRequest) -> Callable[[WebSocket], Awaitable[None]]:
    async def endpoint(websocket: WebSocket) -> None:
        """The handshake refused with an HTTP answer (ASGI's WebSocket denial response, which uvicorn offers);
        a server without it can only close the handshake (a 403)."""
        try:
            await websocket.send_denial_response(error_response(refusal, door))
        except RuntimeError:
            await websocket.close()

    return endpoint


def _declare_door_routes() -> None:
    """The doors' routes, from their own description (`app.doors.registry`). The turn routes are `TurnRoute`s:
    the fast path (`app.api.edge`) answers them without FastAPI's per-request machinery."""
    for door, route in turn_routes():
        router.add_api_route(
            route.path, _turn_endpoint(door, route), methods=[route.method], name=route.name,
            summary=route.summary, tags=list(route.tags), route_class_override=TurnRoute,
        )
    for count in count_routes():
        for number, path in enumerate(count.route.paths()):
            router.add_api_route(
                path, _count_endpoint(count), methods=[count.route.method],
                name=f"{count.route.name}_{number}" if number else count.route.name,
                summary=count.route.summary, tags=list(count.route.tags),
            )
    for door in DOORS:  # a door's stored responses: GET reads one of the caller's key, DELETE removes it, GET lists its input items
        if door.stored is not None:
            get, delete, input_items = _stored_endpoints(door)
            name = door.name.replace("-", "_")
            router.add_api_route(door.stored.path, get, methods=["GET"], name=f"get_{name}_stored",
                                 summary="A stored response of the caller's key", tags=["doors"])  # fmt: skip
            router.add_api_route(door.stored.path, delete, methods=["DELETE"], name=f"delete_{name}_stored",
                                 summary="Delete a stored response of the caller's key", tags=["doors"])  # fmt: skip
            router.add_api_route(door.stored.items_path, input_items, methods=["GET"], name=f"list_{name}_stored_items",
                                 summary="The input items of a stored response of the caller's key", tags=["doors"])  # fmt: skip
        if door.websocket_refused is not None:  # clients that try a WebSocket first fall back to HTTP at once
            path, refusal = door.websocket_refused
            router.add_api_websocket_route(path, _websocket_refusal(door, refusal))


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
    Anthropic SDKs) gets the same entries in Anthropic's list shape, one with an `x-goog-api-key` header or a
    `key` query parameter (the Google GenAI SDKs, which send a custom base URL's requests to `/v1/`) Gemini's."""
    if gemini_models.asks_gemini_shape(request.headers, request.query_params):
        return _gemini_answer(request, gemini_models.model_list)
    gateway = _gateway(request)
    gateway.keys.identify(authorization(request.headers))
    configured = gateway.dispatcher.providers
    entries = gateway.catalog.model_list(configured)
    if request.headers.get("anthropic-version"):
        return json_response(anthropic_model_list(entries))
    providers = [{"name": name, "api": provider.api} for name, provider in sorted(configured.items())]
    return json_response({"object": "list", "data": entries, "providers": providers})


@router.get(
    gemini_openapi.LIST_PATH, tags=["catalog"], summary="Models and routes this gateway serves (Gemini's list shape)",
    responses={200: {"description": "Gemini's ListModelsResponse", "content": {"application/json": {"schema": ref("GeminiModelList")}}}},
)  # fmt: skip
async def list_gemini_models(request: Request) -> Response:
    """`{"models": [Model]}` as Gemini's `GET /v1beta/models` answers (the Google GenAI SDKs' `models.list()`),
    each `name` a gateway model name after `models/`; the key may come as `?key=` as on the Gemini door."""
    return _gemini_answer(request, gemini_models.model_list)


async def get_gemini_model(request: Request, model: str) -> Response:
    """Gemini's `GET /v1beta/models/{model}` (the SDKs' `models.get()`, also under `/v1/`); errors in Google's
    shape."""
    return _gemini_answer(request, lambda entries: gemini_models.model_of(entries, model))


for _path in gemini_openapi.GET_PATHS:
    router.add_api_route(
        _path, get_gemini_model, methods=["GET"], name=f"get_gemini_model_{_path.split('/')[1]}", tags=["catalog"],
        summary="One model this gateway serves (Gemini's Model shape)",
        responses={200: {"description": "Gemini's Model", "content": {"application/json": {"schema": ref("GeminiModel")}}},
                   404: {"description": "No such model", "content": {"application/json": {"schema": ref("GeminiErrorBody")}}}},
    )  # fmt: skip


def _gemini_answer(request: Request, answer: Callable[[list[dict[str, Any]]], Any]) -> Response:
    """A Gemini model route: the caller's key (also `?key=`), then `answer` of the gateway's model list; every
    error in Google's shape."""
    gateway = _gateway(request)
    try:
        gateway.keys.identify(authorization(request.headers, request.query_params))
        return json_response(answer(gateway.catalog.model_list(gateway.dispatcher.providers)))
    except BadRequest as error:
        return json_response(gemini.DOOR.error_body(error), error.status, error.headers)
    except Refusal as refusal:
        error = refusal_error(refusal)
        return json_response(gemini.DOOR.error_body(error), error.status, error.headers)


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
        async with asyncio.timeout(gateway.settings.ledger_ping_timeout_s):
            await gateway.ledger.ping()
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
