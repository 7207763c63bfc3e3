"""The SSE writer every door uses: the door's encoder turns each event into bytes; this module adds the
keep-alive frame while the upstream is silent, counts what was sent, keeps the response open through the
shutdown drain, and turns a response that ends before the terminal event (client gone) into an abort."""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator, Callable

from app.api.event_stream import EventStreamResponse
from app.dispatch import Interrupt, TurnJob
from app.doors.base import EventEncoder

log = logging.getLogger("gateway.sse")


def event_stream_response(
    job: TurnJob,
    encoder: EventEncoder,
    keepalive: float,
    headers: dict[str, str],
    draining: Callable[[], bool],
    shutdown_grace: float = 0,
    sent: Callable[[int], None] | None = None,
    first: dict[str, Any] | None = None,
) -> EventStreamResponse:
    """`shutdown_grace`: how long the response stays open once the server is exiting (rather than being cut
    as soon as uvicorn sets `should_exit`); the gateway's drain settles the turn
    before this runs out, so the client still gets its terminal event. `sent(n)` is told how many events
    the response wrote. `first`: an event already taken from the turn (a door that holds its headers until
    the turn starts), written before the rest."""
    turn = job.turn
    encode = encoder.encode

    async def frames() -> AsyncIterator[bytes]:
        count = 0
        failed = False  # an event could not be encoded: our bug, never the client's disconnect
        event = first
        try:
            while event is not None or (event := await turn.next_event()) is not None:
                try:
                    frame = encode(event)
                except Exception:
                    log.exception("turn %s: %s event could not be encoded", turn.request_id, event.get("type"))
                    failed = True
                    job.interrupt(Interrupt.WRITER)  # the turn settles as an internal error
                    break
                count += 1
                event = None
                if frame:
                    yield frame
        finally:
            if sent is not None:
                sent(count)
            if not turn.settled and not failed:
                # The response ended before the terminal event: the client went away (or the server is
                # stopping). Cancel the upstream; the pump settles the turn and writes the record.
                job.interrupt(Interrupt.SHUTDOWN if draining() else Interrupt.CLIENT)
            turn.close_reader()

    return EventStreamResponse(
        frames(),
        headers={"Cache-Control": "no-cache", **headers},
        ping_interval=keepalive,
        ping=encoder.ping(),
        shutdown_grace=shutdown_grace,
    )
