"""The SSE writer: one frame per event (`id`, `event`, `data`), keep-alive comments, disconnect → abort."""

from __future__ import annotations

import logging
from typing import AsyncIterator, Callable

import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.dispatch import Interrupt, TurnJob

log = logging.getLogger("gateway.sse")


def _ping() -> ServerSentEvent:
    return ServerSentEvent(comment="ping")


def event_stream_response(
    job: TurnJob,
    keepalive: float,
    headers: dict[str, str],
    draining: Callable[[], bool],
    shutdown_grace: float = 0,
    sent: Callable[[int], None] | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> EventSourceResponse:
    """`shutdown_grace`: how long the response stays open once the server is exiting. sse-starlette would
    otherwise cut the stream as soon as uvicorn sets `should_exit`; the gateway's drain settles the turn
    before this runs out, so the client still gets its terminal event. `sent(n)` is told how many events
    the response wrote. `transform` maps each event before it is encoded (e.g. `partialArguments`)."""
    turn = job.turn

    async def frames() -> AsyncIterator[bytes]:
        sequence = 0
        failed = False  # an event could not be encoded: our bug, never the client's disconnect
        try:
            while (event := await turn.next_event()) is not None:
                if transform is not None:
                    event = transform(event)
                try:
                    data = orjson.dumps(event)
                except orjson.JSONEncodeError:
                    log.exception("turn %s: %s event could not be encoded", turn.request_id, event.get("type"))
                    failed = True
                    job.interrupt(Interrupt.WRITER)  # the turn settles as an internal error
                    break
                sequence += 1
                # orjson escapes every control character, so `data` is always one line: the frame is safe
                # to write as bytes (sse-starlette passes bytes through), without re-encoding the JSON.
                yield b"id: %d\nevent: %s\ndata: %s\n\n" % (sequence, event["type"].encode(), data)
        finally:
            if sent is not None:
                sent(sequence)
            if not turn.settled and not failed:
                # The response ended before the terminal event: the client went away (or the server is
                # stopping). Cancel the upstream; the pump settles the turn and writes the record.
                job.interrupt(Interrupt.SHUTDOWN if draining() else Interrupt.CLIENT)
            turn.close_reader()

    return EventSourceResponse(
        frames(),
        headers={"Cache-Control": "no-cache", **headers},
        ping=keepalive,
        ping_message_factory=_ping,
        sep="\n",
        shutdown_grace_period=shutdown_grace,
    )
