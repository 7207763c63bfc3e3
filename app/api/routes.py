"""HTTP routes (docs/api.md §1). The doors' routes come from the doors' own description (`door_routes`, from the
app's `app.doors.registry.DoorTable`; no door is named here): a turn route hands its request to its door through
the shared glue (`app.api.turns.serve`), the dispatcher and the event stream do the rest; a token counting route
goes through `app.api.count_tokens.serve_count`; a door's model routes, and `GET /v1/models` for its clients,
answer the gateway's model list in its shape (`Door.models`)."""

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
from app.contract.catalog import ModelList
from app.doors.base import Door, DoorRoute, ModelListing, ModelRoute, TokenCountDoor
from app.doors.errors import BadRequest
from app.doors.registry import DoorTable
from app.gateway import Gateway
from app.contract.refusals import Refusal

router = APIRouter()  # the operations routes; the doors' and the model lists' are `door_routes(doors)`


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


def door_routes(doors: DoorTable) -> APIRouter:
    """The doors' routes, from their own description: each door's turn routes (`TurnRoute`s: the fast path,
    `app.api.edge`, answers them without FastAPI's per-request machinery), token counting routes, stored
    responses and WebSocket refusals; then `GET /v1/models` and the doors' own model routes."""
    routes = APIRouter()
    for door, route in doors.turn_routes():
        routes.add_api_route(
            route.path,
            _turn_endpoint(door, route),
            methods=[route.method],
            name=route.name,
            summary=route.summary,
            tags=list(route.tags),
            route_class_override=TurnRoute,
        )
    for count in doors.count_routes():
        for number, path in enumerate(count.route.paths()):
            routes.add_api_route(
                path,
                _count_endpoint(count),
                methods=[count.route.method],
                name=f"{count.route.name}_{number}" if number else count.route.name,
                summary=count.route.summary,
                tags=list(count.route.tags),
            )
    for door in (
        doors.doors
    ):  # a door's stored responses: GET reads one of the caller's key, DELETE removes it, GET lists its input items
        if door.stored is not None:
            get, delete, input_items = _stored_endpoints(door)
            name = door.name.replace("-", "_")
            routes.add_api_route(door.stored.path, get, methods=["GET"], name=f"get_{name}_stored",
                                 summary="A stored response of the caller's key", tags=["doors"])  # fmt: skip
            routes.add_api_route(door.stored.path, delete, methods=["DELETE"], name=f"delete_{name}_stored",
                                 summary="Delete a stored response of the caller's key", tags=["doors"])  # fmt: skip
            routes.add_api_route(door.stored.items_path, input_items, methods=["GET"], name=f"list_{name}_stored_items",
                                 summary="The input items of a stored response of the caller's key", tags=["doors"])  # fmt: skip
        if door.websocket_refused is not None:  # clients that try a WebSocket first fall back to HTTP at once
            path, refusal = door.websocket_refused
            routes.add_api_websocket_route(path, _websocket_refusal(door, refusal))
    list_models = _list_models_endpoint(doors)
    routes.add_api_route(
        "/v1/models", list_models, methods=["GET"], name="list_models", tags=["catalog"],
        summary="Models and routes this gateway serves (OpenAI's list shape)",
        responses={200: {"model": ModelList, "description": "OpenAI's model list with the catalog's fields"}},
    )  # fmt: skip
    for door, models, model_route in doors.model_routes():
        routes.add_api_route(
            model_route.path, _model_endpoint(door, models, model_route), methods=["GET"], name=model_route.name,
            tags=list(model_route.tags), summary=model_route.summary, description=model_route.description,
            responses=dict(model_route.responses),
        )  # fmt: skip
    return routes


def _list_models_endpoint(doors: DoorTable) -> Endpoint:
    async def list_models(request: Request) -> Response:
        """`{"object": "list", "data": [model objects]}` as OpenAI's `GET /v1/models` answers (the OpenAI SDKs'
        `models.list()` reads it), each entry with the catalog's fields; `providers` lists the configured
        providers (also those without catalog models). A request with an `anthropic-version` header (the
        Anthropic SDKs) gets the same entries in Anthropic's list shape, one with an `x-goog-api-key` header or a
        `key` query parameter (the Google GenAI SDKs, which send a custom base URL's requests to `/v1/`) Gemini's."""
        for door, models in doors.model_lists():  # a door whose clients read the list here in its own shape
            if models.asked(request.headers, request.query_params):
                return _door_models(request, door, models, models.answer)
        gateway = _gateway(request)
        gateway.keys.identify(authorization(request.headers))
        configured = gateway.dispatcher.providers
        entries = gateway.catalog.model_list(configured)
        providers = [{"name": name, "api": provider.api} for name, provider in sorted(configured.items())]
        return json_response({"object": "list", "data": entries, "providers": providers})

    return list_models


def _model_endpoint(door: Door, models: ModelListing, route: ModelRoute) -> Callable[..., Awaitable[Response]]:
    """A door's own model route: its list, or (a path with `{model}`) one model of it."""
    if not route.one_model:

        async def listing(request: Request) -> Response:
            return _door_models(request, door, models, models.answer)

        return listing
    one = models.model
    if one is None:
        raise ValueError(f"door {door.name}: its model route {route.path} names a model; ModelListing.model is missing")

    async def model_of(request: Request, model: str) -> Response:
        return _door_models(request, door, models, lambda entries: one(entries, model))

    return model_of


def _door_models(
    request: Request, door: Door, models: ModelListing, answer: Callable[[list[dict[str, Any]]], Any]
) -> Response:
    """The gateway's model list in `door`'s shape: the caller's key (also `?key=` where the door takes it there),
    then `answer` of the entries; every error in the door's shape."""
    gateway = _gateway(request)
    try:
        gateway.keys.identify(authorization(request.headers, request.query_params if models.key_in_query else None))
        return json_response(answer(gateway.catalog.model_list(gateway.dispatcher.providers)))
    except BadRequest as error:
        return error_response(error, door)
    except Refusal as refusal:
        return error_response(refusal_error(refusal), door)


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


def install_error_handlers(app, doors: DoorTable) -> None:
    """A `BadRequest` or a `Refusal` that reaches the app is answered in the error shape of the door at the
    request's path (docs/api.md §9's shape elsewhere)."""

    async def bad_request(request: Request, exc: BadRequest) -> Response:
        return error_response(exc, doors.door_at(route_path(request.scope)))

    async def refusal(request: Request, exc: Refusal) -> Response:
        return error_response(refusal_error(exc), doors.door_at(route_path(request.scope)))

    app.add_exception_handler(BadRequest, bad_request)
    app.add_exception_handler(Refusal, refusal)


def path_hint(request: Request) -> str | None:
    """For a request no route answers: the path it most likely meant, when the client left out the API's
    prefix (`POST /chat/completions` for `/v1/chat/completions`, a Gemini client's `/models/…` for
    `/v1beta/models/…`) or gave it twice (`/v1/v1/…`, a base URL that already ended in `/v1`)."""
    from starlette.routing import Match

    path = request.url.path
    candidates = [f"/v1{path}", f"/v1beta{path}"]
    if path.startswith("/v1/v1/"):
        candidates.insert(0, path[len("/v1") :])
    for candidate in candidates:
        scope = {**request.scope, "path": candidate}
        for route in request.app.router.routes:
            if route.matches(scope)[0] == Match.FULL:
                return f"{request.method} {candidate}"
    return None


__all__ = ["router", "door_routes", "install_error_handlers", "path_hint", "ApiError"]
