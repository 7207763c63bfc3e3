"""Resumable streams over HTTP (docs/replicas.md, Resumable streams): the SSE response of a resumable turn, and
`GET /v1/stream/{requestId}` with `Last-Event-ID`. Both are `app.api.sse.sse_response` (the one SSE path) over
`KeptFrames`. The keeping and the grace window are `app.resume.hub`."""

from __future__ import annotations

import re
from typing import Any, AsyncIterator, Callable, Mapping

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.error_responses import ApiError
from app.api.event_stream import EventStreamResponse
from app.api.sse import sse_response
from app.core.job import TurnJob
from app.doors.base import EventEncoder
from app.doors.unified_frames import PING
from app.gateway import Gateway
from app.contract.refusals import EventsLost
from app.resume.frames import Frame, LocalStream
from app.resume.hub import NotInStore, StreamEnded

router = APIRouter()

_EVENT_ID = re.compile(r"[0-9]{1,12}")


class KeptFrames:
    """A resumable turn's kept events as SSE frames (`app.api.sse.Frames`): this replica's, or another's read
    from the event store. The door's frames as they were kept; the terminal one is the last. When the events
    after this reader's position are no longer kept (`EventsLost`), the stream ends with a comment saying why
    (`cut` and the reason), never skipping events. Once closed (`aclose`, by the response, also early or when
    it never read), `sent(n)` is told how many events it wrote and `on_end` runs."""

    __slots__ = ("frames", "cut", "sent", "on_end", "count", "ended", "finished")

    def __init__(
        self, frames: AsyncIterator[Frame], cut: bytes, sent: Callable[[int], None], on_end: Callable[[], None]
    ) -> None:
        self.frames = frames
        self.cut = cut
        self.sent = sent
        self.on_end = on_end
        self.count = 0
        self.ended = False
        self.finished = False  # the frame just handed out was the last: the response closes with it

    def __aiter__(self) -> "KeptFrames":
        return self

    async def __anext__(self) -> bytes:
        while not self.finished:
            try:
                frame = await self.frames.__anext__()
            except StopAsyncIteration:
                break
            except EventsLost as lost:
                self.finished = True
                return self.cut + lost.message.encode() + b"\n\n"
            self.count += 1
            if frame.data:  # a door may write nothing for an event
                self.finished = frame.terminal
                return frame.data
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if self.ended:
            return
        self.ended = True
        try:
            await self.frames.aclose()  # type: ignore[attr-defined]  # the source's own end (an async generator)
        finally:
            self.sent(self.count)
            self.on_end()


RESUMABLE_HEADER = "x-gateway-resumable"


def asks_resumable(headers: Mapping[str, str]) -> bool:
    """`X-Gateway-Resumable: true`: how a door whose body has no place for `options.resumable` asks for it."""
    return headers.get(RESUMABLE_HEADER, "").strip().lower() in ("1", "true", "yes")


def resumable_response(
    gateway: Gateway,
    job: TurnJob,
    encoder: EventEncoder,
    headers: dict[str, str],
    *,
    first: dict[str, Any] | None = None,
    add_ids: bool = False,
) -> EventStreamResponse:
    """The response of a resumable turn: the door's frames from the kept stream; a disconnect starts the grace
    window instead of cancelling the upstream. `first`: an event the door already took from the turn;
    `add_ids`: the door's frames carry no `id:` line, so each gets one (the event's sequence number)."""
    stream: LocalStream = gateway.resume.track(job, encoder, first=first, add_ids=add_ids)
    stream.readers += 1
    # A reader more than GATEWAY_RESUME_MAX_EVENTS behind is cut there, saying why.
    frames = KeptFrames(
        stream.follow(0),
        b": stream cut: ",
        gateway.metrics.sse_events,
        lambda: gateway.resume.reader_left(job, stream, gateway.draining),
    )
    return sse_response(
        frames, encoder.ping(), headers, keepalive=gateway.settings.keepalive_interval, streams=gateway.streams
    )


def _last_event_id(request: Request) -> int:
    """The event id a resumption continues after (0 without the header). Only ASCII digits are an id:
    `str.isdigit` also accepts `²` and other digits `int` refuses."""
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return 0
    if not _EVENT_ID.fullmatch(raw):
        raise ApiError(
            400,
            "invalid_request",
            "Last-Event-ID must be an event id of this stream (1, 2, 3 …)",
            param="Last-Event-ID",
        )
    return int(raw)


@router.get("/v1/stream/{request_id}", tags=["turns"], summary="Continue a resumable stream after Last-Event-ID")
async def resume_stream(request: Request, request_id: str) -> Response:
    """The events of a resumable turn after the one named by `Last-Event-ID` (from the first without it),
    terminal included, for the key that made the request; 204 when `Last-Event-ID` is the terminal event
    (an EventSource then stops reconnecting). 404 for an unknown request or another key's;
    410 `resume_unavailable` when the events are no longer kept; 503 when the event store does not answer."""
    # (Also 429 when the key or the replica has as many streams open as it may: a resumption is one stream.)
    gateway: Gateway = request.app.state.gateway
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
        kept = await gateway.resume.open(found, after)
    except BaseException:
        release()
        raise
    # The headers are sent by then: events lost while reading end the stream, saying why, rather than skip.
    # The slot is released once the response ends (whether or not it read a frame).
    frames = KeptFrames(kept, b": resume failed: ", gateway.metrics.sse_events, release)
    return sse_response(frames, PING, {}, keepalive=gateway.settings.keepalive_interval, streams=gateway.streams)
