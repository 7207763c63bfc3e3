"""HTTP routes (docs/api.md §1). Routes parse and authorize; the dispatcher and the event stream do the rest."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from app.api.body import parse_model, read_body
from app.api.errors import ApiError, json_response, refusal_error
from app.api.sse import event_stream_response
from app.contract.catalog import ModelList
from app.contract.request import PiStreamRequest, StreamRequest
from app.dispatch import Interrupt, TurnJob
from app.gateway import Gateway
from app.refusals import Refusal
from app.stream.partial_arguments import PartialArguments

router = APIRouter()
SHUTDOWN_MARGIN = 10.0  # seconds an SSE response outlives the drain timeout, for the shutdown error to reach the client


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


def _request_id(request: Request) -> str:
    return request.scope["state"]["request_id"]


async def _job(request: Request, model: type[StreamRequest] | type[PiStreamRequest]) -> TurnJob:
    gateway = _gateway(request)
    key_id = gateway.keys.identify(request.headers.get("authorization"))
    raw = await read_body(request, gateway.settings.max_body_bytes)
    body = parse_model(raw, model, gateway.settings.max_json_depth)
    try:
        unified = body.unified() if isinstance(body, PiStreamRequest) else body
    except ValidationError:  # e.g. a pi provider name that cannot form a `<provider>/<model id>` reference
        raise ApiError(422, "validation_error", "model: provider and id do not name a model", param="model") from None
    job = await gateway.start_turn(unified, _request_id(request), key_id)
    # Let the turn's task run to its first wait, which sends the upstream request, before this request's
    # response is set up: the vendor starts working (and the time to first token runs) a little sooner.
    await asyncio.sleep(0)
    return job


def _stream(job: TurnJob, request: Request) -> Response:
    gateway = _gateway(request)
    return event_stream_response(
        job,
        gateway.settings.keepalive_interval,
        {"X-Request-Id": job.turn.request_id},
        lambda: gateway.draining,
        shutdown_grace=gateway.settings.drain_timeout + SHUTDOWN_MARGIN,
        sent=gateway.metrics.sse_events,
        transform=PartialArguments() if job.options.partial_arguments else None,
    )


@router.post("/v1/stream", tags=["turns"], summary="One assistant turn, streamed as server-sent events")
async def stream_turn(request: Request) -> Response:
    return _stream(await _job(request, StreamRequest), request)


@router.post("/api/stream", tags=["turns"], summary="pi-compatible stream (pi's streamProxy client)")
async def pi_stream(request: Request) -> Response:
    return _stream(await _job(request, PiStreamRequest), request)


@router.post("/v1/complete", tags=["turns"], summary="One assistant turn, answered as one AssistantMessage")
async def complete_turn(request: Request) -> Response:
    job = await _job(request, StreamRequest)
    job.turn.close_reader()
    disconnect = asyncio.create_task(_wait_for_disconnect(request))
    try:
        await asyncio.wait({job.task, disconnect}, return_when=asyncio.FIRST_COMPLETED)
        if not job.task.done():
            job.interrupt(Interrupt.CLIENT)
        await asyncio.shield(job.task)
    finally:
        disconnect.cancel()
    turn = job.turn
    headers = {"X-Request-Id": turn.request_id}
    if turn.outcome == "done":
        return json_response(turn.message, 200, headers)
    error = {"type": "upstream_error", "message": turn.message.get("errorMessage", ""), "param": None}
    return json_response({"error": error, "message": turn.message, "requestId": turn.request_id}, 502, headers)


async def _wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.get(
    "/v1/models",
    tags=["catalog"],
    summary="Models and routes this gateway serves (OpenAI's list shape)",
    responses={200: {"model": ModelList, "description": "OpenAI's model list with the catalog's fields"}},
)
async def list_models(request: Request) -> Response:
    """`{"object": "list", "data": [model objects]}` as OpenAI's `GET /v1/models` answers (the OpenAI SDKs'
    `models.list()` reads it), each entry with the catalog's fields; `providers` lists the configured
    providers (also those without catalog models)."""
    gateway = _gateway(request)
    gateway.keys.identify(request.headers.get("authorization"))
    configured = gateway.dispatcher.providers
    providers = [{"name": name, "api": provider.api} for name, provider in sorted(configured.items())]
    return json_response({"object": "list", "data": gateway.catalog.model_list(configured), "providers": providers})


@router.get("/healthz", tags=["operations"], summary="Liveness")
async def healthz() -> Response:
    return json_response({"status": "ok"})


@router.get("/readyz", tags=["operations"], summary="Readiness: store reachable, not draining")
async def readyz(request: Request) -> Response:
    gateway = _gateway(request)
    if gateway.draining:
        return json_response({"status": "draining"}, 503)
    if not gateway.listening:
        return json_response({"status": "starting"}, 503)
    try:
        await asyncio.wait_for(gateway.ledger.ping(), gateway.settings.ledger_ping_timeout_s)
    except Exception:
        return json_response({"status": "store unavailable"}, 503)
    return json_response({"status": "ready"})


@router.get("/metrics", tags=["operations"], summary="Prometheus metrics (text exposition)")
async def metrics(request: Request) -> Response:
    body, content_type = _gateway(request).metrics.exposition()
    return Response(body, media_type=content_type)


def install_error_handlers(app) -> None:
    from app.api.errors import is_pi_path

    async def api_error(request: Request, exc: ApiError) -> Response:
        return exc.response(pi=is_pi_path(request.url.path))

    async def refusal(request: Request, exc: Refusal) -> Response:
        return refusal_error(exc).response(pi=is_pi_path(request.url.path))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(Refusal, refusal)


__all__ = ["router", "install_error_handlers", "ApiError"]
