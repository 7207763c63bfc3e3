"""The SSE writer every door uses: the door's encoder turns each event into bytes; this module adds the
keep-alive frame while the upstream is silent, counts what was sent, keeps the response open through the
shutdown drain, and turns a response that ends before the terminal event (client gone) into an abort."""

from __future__ import annotations

import logging
from typing import Any, Callable

from app.api.event_stream import EventStreamResponse
from app.contract.events import TERMINAL_TYPES
from app.dispatch import Interrupt, TurnJob
from app.doors.base import EventEncoder

log = logging.getLogger("gateway.sse")

BATCH_BYTES = 64 * 1024  # past this, the events ready at once go out in more than one write


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
    return EventStreamResponse(
        _Frames(job, encoder, draining, sent, first),
        headers={"Cache-Control": "no-cache", **headers},
        ping_interval=keepalive,
        ping=encoder.ping(),
        shutdown_grace=shutdown_grace,
    )


class _Frames:
    """The turn's events as SSE frames: an async iterator the response closes (`aclose`) when it ends, also
    early. When it ends before the terminal event (the client went away, or the server is stopping) it
    interrupts the turn, so the pump cancels the upstream, settles the turn and writes the record.

    A class rather than an async generator: every open stream holds it, and a generator also holds its frame
    and an entry in the event loop's set of live async generators (about 1.3 KB per stream)."""

    __slots__ = ("job", "encode", "draining", "sent", "first", "count", "failed", "ended", "finished")

    def __init__(
        self,
        job: TurnJob,
        encoder: EventEncoder,
        draining: Callable[[], bool],
        sent: Callable[[int], None] | None,
        first: dict[str, Any] | None,
    ) -> None:
        self.job = job
        self.encode = encoder.encode
        self.draining = draining
        self.sent = sent
        self.first = first  # an event already taken from the turn, written first
        self.count = 0
        self.failed = False  # an event could not be encoded: our bug, never the client's disconnect
        self.ended = False
        self.finished = False  # the last frame handed out holds the terminal event: the response closes with it

    def __aiter__(self) -> "_Frames":
        return self

    async def __anext__(self) -> bytes:
        """The frames of every event ready now, joined (at least one event: waits for it), up to `BATCH_BYTES`:
        events the producer queued while this task waited go out in one write, not one write each."""
        turn = self.job.turn
        frames: list[bytes] = []
        size = 0
        while not self.ended and size < BATCH_BYTES:
            event, self.first = self.first, None
            if event is None and (event := turn.next_ready()) is None:
                if frames:
                    break  # send what is ready before waiting for more
                if (event := await turn.next_event()) is None:
                    self._end()
                    break
            try:
                frame = self.encode(event)
            except Exception:
                log.exception("turn %s: %s event could not be encoded", turn.request_id, event.get("type"))
                self.failed = True
                self.job.interrupt(Interrupt.WRITER)  # the turn settles as an internal error
                self._end()
                break
            self.count += 1
            if frame:
                frames.append(frame)
                size += len(frame)
            if event["type"] in TERMINAL_TYPES:
                self.finished = True
                self._end()
        if frames:
            return frames[0] if len(frames) == 1 else b"".join(frames)
        self._end()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._end()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        turn = self.job.turn
        if self.sent is not None:
            self.sent(self.count)
        if not turn.settled and not self.failed:
            # The response ended before the terminal event: the client went away (or the server is
            # stopping). Cancel the upstream; the pump settles the turn and writes the record.
            self.job.interrupt(Interrupt.SHUTDOWN if self.draining() else Interrupt.CLIENT)
        turn.close_reader()
