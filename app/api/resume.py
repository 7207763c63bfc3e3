"""Resumable streams over HTTP (docs/replicas.md, Resumable streams): the SSE response of a resumable turn, and
`GET /v1/stream/{requestId}` with `Last-Event-ID`. The keeping and the grace window are `app.resume`."""

from __future__ import annotations

import re
from typing import Any, AsyncIterator, Mapping

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse
from starlette.background import BackgroundTask
from starlette.responses import Response

from app.api.auth import authorization
from app.api.error_responses import ApiError
from app.dispatch import TurnJob
from app.doors.base import EventEncoder
from app.doors.unified.events import PING
from app.refusals import EventsLost
from app.resume import LocalStream, NotInStore, StreamEnded

router = APIRouter()

_EVENT_ID = re.compile(r"[0-9]{1,12}")


def _response(
    gateway, frames: AsyncIterator[bytes], headers: dict[str, str], ping: bytes, background: BackgroundTask | None = None
) -> EventSourceResponse:
    from app.api.turns import SHUTDOWN_MARGIN

    return EventSourceResponse(
        frames,
        background=background,
        headers={"Cache-Control": "no-cache", **headers},
        ping=gateway.settings.keepalive_interval,
        ping_message_factory=lambda: ping,  # bytes pass through sse-starlette unchanged
        sep="\n",
        shutdown_grace_period=gateway.settings.drain_timeout + SHUTDOWN_MARGIN,
    )


RESUMABLE_HEADER = "x-gateway-resumable"


def asks_resumable(headers: Mapping[str, str]) -> bool:
    """`X-Gateway-Resumable: true`: how a door whose body has no place for `options.resumable` asks for it."""
    return headers.get(RESUMABLE_HEADER, "").strip().lower() in ("1", "true", "yes")


def resumable_response(
    gateway,
    job: TurnJob,
    encoder: EventEncoder,
    headers: dict[str, str],
    *,
    first: dict[str, Any] | None = None,
    add_ids: bool = False,
) -> EventSourceResponse:
    """The response of a resumable turn: the door's frames from the kept stream; a disconnect starts the grace
    window instead of cancelling the upstream. `first`: an event the door already took from the turn;
    `add_ids`: the door's frames carry no `id:` line, so each gets one (the event's sequence number)."""
    stream: LocalStream = gateway.resume.track(job, encoder, first=first, add_ids=add_ids)
    stream.readers += 1

    async def frames() -> AsyncIterator[bytes]:
        sent = 0
        try:
            async for frame in stream.follow(0):
                sent += 1
                if frame.data:  # a door may write nothing for an event
                    yield frame.data
        except EventsLost as lost:
            # This reader fell more than GATEWAY_RESUME_MAX_EVENTS behind: end here, saying why, never skip.
            yield b": stream cut: " + lost.message.encode() + b"\n\n"
        finally:
            gateway.metrics.sse_events(sent)
            gateway.resume.reader_left(job, stream, gateway.draining)

    return _response(gateway, frames(), headers, encoder.ping())


def _last_event_id(request: Request) -> int:
    """The event id a resumption continues after (0 without the header). Only ASCII digits are an id:
    `str.isdigit` also accepts `²` and other digits `int` refuses."""
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return 0
    if not _EVENT_ID.fullmatch(raw):
        raise ApiError(400, "invalid_request", "Last-Event-ID must be an event id of this stream (1, 2, 3 …)", param="Last-Event-ID")
    return int(raw)


@router.get("/v1/stream/{request_id}", tags=["turns"], summary="Continue a resumable stream after Last-Event-ID")
async def resume_stream(request: Request, request_id: str) -> Response:
    """The events of a resumable turn after the one named by `Last-Event-ID` (from the first without it),
    terminal included, for the key that made the request; 204 when `Last-Event-ID` is the terminal event
    (an EventSource then stops reconnecting). 404 for an unknown request or another key's;
    410 `resume_unavailable` when the events are no longer kept; 503 when the event store does not answer."""
    # (Also 429 when the key or the replica has as many streams open as it may: a resumption is one stream.)
    gateway = request.app.state.gateway
    key_id = gateway.keys.identify(authorization(request.headers))
    after = _last_event_id(request)
    try:
        found = await gateway.resume.find(request_id, key_id, after)
    except NotInStore as lost:
        record = await gateway.ledger.get(request_id, key_id)
        if record is None or not record.get("resumable"):
            found = None  # no such request for this key, or one that did not ask to be resumable
        else:
            raise EventsLost(f"request {request_id} cannot be resumed: {lost.message}") from None
    except EventsLost as lost:
        raise EventsLost(f"request {request_id} cannot be resumed: {lost.message}") from None
    except StreamEnded:
        # Past the terminal event. 204 is what tells a browser's EventSource to stop reconnecting.
        return Response(status_code=204)
    if found is None:
        raise ApiError(404, "not_found", "no resumable stream with this id", param="requestId")
    release = await gateway.admit_resumption(key_id, request_id, turn_running=found.running)
    try:
        frames = await gateway.resume.open(found, after)
    except BaseException:
        release()
        raise

    async def body() -> AsyncIterator[bytes]:
        sent = 0
        try:
            async for frame in frames:
                sent += 1
                if frame.data:  # a door may write nothing for an event
                    yield frame.data
        except EventsLost as lost:
            # Headers are sent: end without a terminal event, saying why, rather than skip events.
            yield b": resume failed: " + lost.message.encode() + b"\n\n"
        finally:
            gateway.metrics.sse_events(sent)
            release()

    # The body releases the slot when it ends; the background task too, should the body never start.
    return _response(gateway, body(), {}, PING, BackgroundTask(release))
