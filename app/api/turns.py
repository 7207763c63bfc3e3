"""The HTTP glue every door shares: authenticate, read and parse the body, let the door decode it, start the
turn, and answer with the door's encoder — a stream (`app.api.sse`) or one JSON body. Errors before the turn
starts are rendered in the door's own error shape."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from app.api import stored_responses
from app.api.auth import authorization
from app.api.body import parse_json, parse_off_loop, read_body, require_json
from app.api.error_responses import json_response, refusal_error
from app.api.resume import RESUMABLE_HEADER, asks_resumable, resumable_response
from app.api.sse import TurnFrames, sse_response
from app.contract.failures import Interrupt
from app.core.job import TurnJob
from app.doors.base import (
    Door, DoorRoute, EventEncoder, drop_params_asked, with_dropped_params, with_dropped_tools,
)  # fmt: skip
from app.doors.errors import BadRequest
from app.gateway import AdmittedAhead, Gateway
from app.api.attribution import asked
from app.pools.balancer import session_header
from app.contract.refusals import Refusal
from app.core.settled import CLIENT_CLOSED_STATUS


async def serve(request: Request, door: Door, route: DoorRoute) -> Response:
    """One turn through `door` on `route`, whose `stream` overrides what the request asked for (`/v1/stream` vs
    `/v1/complete`), whose `from_url` adds what the URL says to the body (the Gemini door's model) and whose
    `decode` replaces the door's decoder for a route of its own (no stored response is read or kept then)."""
    gateway: Gateway = request.app.state.gateway
    request_id: str = request.scope["state"]["request_id"]
    stream = route.stream
    ahead: list[AdmittedAhead] = []  # the turn's admission, when it had to come before its stored state is read

    async def admit_ahead(models: list[str]) -> None:
        ahead.append(await gateway.admit_ahead(key_id, models, request_id))

    try:
        key_id = gateway.keys.identify(
            authorization(request.headers, request.query_params if route.key_in_query else None)
        )
        require_json(request.headers)
        raw = await read_body(request, gateway.settings.max_body_bytes)
        depth = gateway.settings.max_json_depth
        stored = door.stored if route.decode is None else None
        if stored is None:
            decoder = route.decode or door.decode
            decoded = await parse_off_loop(
                raw,
                lambda body: decoder(
                    url_body(route, request, parse_json(body, depth, door.prose_paths)), request.headers
                ),
            )
        else:  # a door that builds on stored responses (app.api.stored_responses)
            decoded, conversation_bytes = await stored_responses.decode(
                gateway,
                stored,
                raw,
                lambda body: parse_json(body, depth, door.prose_paths),
                request.headers,
                key_id,
                admit_ahead,
            )
        asked_resumable = decoded.unified.options.resumable or asks_resumable(request.headers)
        if decoded.resume_refused is not None and asked_resumable:
            raise BadRequest(
                400, "invalid_request_error", f"{RESUMABLE_HEADER}: {decoded.resume_refused}", RESUMABLE_HEADER
            )
        if drop_params_asked(request.headers):
            decoded.unified.options.drop_params = True
        streaming = decoded.stream if stream is None else stream
        job = await gateway.start_turn(
            decoded.unified,
            request_id,
            key_id,
            door=door.name,
            session=session_header(request.headers),
            resumable=streaming and asked_resumable,
            ahead=ahead[0] if ahead else None,
            asked=asked(request.headers),
        )
    except BadRequest as error:
        return json_response(door.error_body(error), error.status, error.headers)
    except Refusal as refusal:
        api_error = refusal_error(refusal)
        return json_response(door.error_body(api_error), api_error.status, api_error.headers)
    finally:
        for admitted in ahead:  # the turn did not start (a 4xx, the client left): give its admission back
            admitted.release()
    # Let the turn's task run to its first wait, which sends the upstream request, before this request's
    # response is set up: the vendor starts working (and the time to first token runs) a little sooner.
    await asyncio.sleep(0)
    encoder = door.encoder(request_id, decoded, job)
    headers = {"X-Request-Id": request_id, **(decoded.response_headers or {})}
    keeping = None
    if stored is not None:
        keeping = stored_responses.Keeping(gateway, stored, decoded, encoder, job, key_id, conversation_bytes)
    if not streaming:
        return await _complete(job, encoder, request, headers, keeping)
    first = None
    # Hosted tools the serving vendor does not run and the fields it was sent without (`drop_params`) are named
    # in headers, known once a provider served the turn's first event: such a stream waits for it even where the
    # door's own stream would start at once.
    options = decoded.unified.options
    if encoder.hold_until_start or options.hosted_tools is not None or options.drop_params:
        first = await _until_disconnect(request, job.turn.next_event())
        headers = with_dropped_params(with_dropped_tools(headers, job.dropped_tools()), job.dropped_params())
        if first is DISCONNECTED or first is None:  # the client left before the turn started
            job.interrupt(Interrupt.CLIENT)
            job.turn.close_reader()
            return Response(status_code=CLIENT_CLOSED_STATUS, headers=headers)
        if first["type"] == "error":
            job.turn.close_reader()
            await asyncio.shield(job.pump)
            refused = encoder.refuse(job.result())
            if refused is not None:
                status, body = refused
                return json_response(body, status, {**headers, **job.result().retry_headers()})
    if job.request.resumable:
        return resumable_response(gateway, job, encoder, headers, first=first, add_ids=not door.frames_carry_ids)
    frames = TurnFrames(
        job,
        encoder,
        lambda: gateway.draining,
        gateway.metrics.sse_events,
        first,
        before_end=keeping.settled if keeping is not None else None,
    )
    return sse_response(
        frames, encoder.ping(), headers, keepalive=gateway.settings.keepalive_interval, streams=gateway.streams
    )


async def _complete(
    job: TurnJob,
    encoder: EventEncoder,
    request: Request,
    headers: dict[str, str],
    keeping: stored_responses.Keeping | None,
) -> Response:
    """Wait for the turn to settle (a client that hangs up cancels it) and answer with the door's body (once
    what the door keeps of it, `keeping`, is written: the client may build on it at once)."""
    job.turn.close_reader()
    if await _until_disconnect(request, asyncio.shield(job.pump)) is DISCONNECTED and not job.pump.done():
        job.interrupt(Interrupt.CLIENT)
    await asyncio.shield(job.pump)
    if keeping is not None:
        await keeping.settled()
    result = job.result()
    status, body = encoder.complete(result)
    headers = with_dropped_params(with_dropped_tools(headers, job.dropped_tools()), job.dropped_params())
    return json_response(body, status, {**headers, **(result.retry_headers() if status >= 400 else {})})


def url_body(route: DoorRoute, request: Request, body: Any) -> Any:
    """The parsed body with what the URL adds to it (`DoorRoute.from_url`), for a route that takes any."""
    if route.from_url is None or not isinstance(body, dict):
        return body
    return route.from_url(body, request.path_params, request.query_params)


DISCONNECTED = object()


async def _until_disconnect(request: Request, awaitable: Any) -> Any:
    """The result of `awaitable`, or `DISCONNECTED` when the client hangs up first (then `awaitable` is
    cancelled)."""
    work = asyncio.ensure_future(awaitable)
    disconnect = asyncio.create_task(_wait_for_disconnect(request))
    try:
        await asyncio.wait({work, disconnect}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        disconnect.cancel()
    if work.done():
        return work.result()
    work.cancel()
    return DISCONNECTED


async def _wait_for_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
