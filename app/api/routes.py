"""HTTP routes (docs/api.md §1). Turn routes hand their request to a door (`app/doors/`) through the shared
glue (`app.api.turns.serve`); the dispatcher and the event stream do the rest."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.error_responses import ApiError, json_response, refusal_error
from app.api.count_tokens import serve_count
from app.api.turns import serve
from app.contract.catalog import ModelList, anthropic_model_list
from app.doors import anthropic_messages, openai_chat, pi, unified
from app.doors.errors import BadRequest
from app.gateway import Gateway
from app.refusals import Refusal

router = APIRouter()


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


@router.post("/v1/stream", tags=["turns"], summary="One assistant turn, streamed as server-sent events")
async def stream_turn(request: Request) -> Response:
    return await serve(request, unified.DOOR, stream=True)


@router.post("/api/stream", tags=["turns"], summary="pi-compatible stream (pi's streamProxy client)")
async def pi_stream(request: Request) -> Response:
    return await serve(request, pi.DOOR, stream=True)


@router.post("/v1/complete", tags=["turns"], summary="One assistant turn, answered as one AssistantMessage")
async def complete_turn(request: Request) -> Response:
    return await serve(request, unified.DOOR, stream=False)


@router.post(
    "/v1/chat/completions",
    tags=["doors"],
    summary="OpenAI Chat Completions door: streamed chat.completion.chunk lines or one chat.completion",
)
async def chat_completions(request: Request) -> Response:
    return await serve(request, openai_chat.DOOR)


@router.post(
    "/v1/messages",
    tags=["doors"],
    summary="Anthropic Messages door: Anthropic's event stream or one message object",
)
async def messages(request: Request) -> Response:
    return await serve(request, anthropic_messages.DOOR)


@router.post(
    "/v1/messages/count_tokens",
    tags=["doors"],
    summary="Anthropic Messages door: the serving vendor's own count of a request's input tokens",
)
async def count_message_tokens(request: Request) -> Response:
    return await serve_count(request, anthropic_messages.COUNT)


# The turn routes, answered by `app.api.edge.TurnRoutes` without FastAPI's per-request machinery (an open
# stream would hold it until it ends). Their declarations above stay: the OpenAPI document, FastAPI's 405.
TURN_ENDPOINTS = {
    "/v1/stream": stream_turn,
    "/api/stream": pi_stream,
    "/v1/complete": complete_turn,
    "/v1/chat/completions": chat_completions,
    "/v1/messages": messages,
}
# The door behind each turn route, for answers given before its endpoint runs (`GatewayApp.error_shapes`).
TURN_DOORS = {
    "/v1/stream": unified.DOOR,
    "/api/stream": pi.DOOR,
    "/v1/complete": unified.DOOR,
    "/v1/chat/completions": openai_chat.DOOR,
    "/v1/messages": anthropic_messages.DOOR,
}


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
    from app.api.error_responses import error_response, is_pi_path

    async def bad_request(request: Request, exc: BadRequest) -> Response:
        return error_response(exc, pi=is_pi_path(request.url.path))

    async def refusal(request: Request, exc: Refusal) -> Response:
        return refusal_error(exc).response(pi=is_pi_path(request.url.path))

    app.add_exception_handler(BadRequest, bad_request)
    app.add_exception_handler(Refusal, refusal)


__all__ = ["router", "install_error_handlers", "ApiError", "TURN_ENDPOINTS"]
