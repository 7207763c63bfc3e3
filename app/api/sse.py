"""The one SSE response path: every streamed turn, of every door, and every resumable stream (live or
resumed, `app.api.resume`) is answered by `sse_response`, so keep-alive frames, the client's disconnect and
the shutdown (`app.server.shutdown`) behave the same for all of them. What differs is where the frames come from:
`TurnFrames` here (a live turn's events, through the door's encoder), `app.api.resume.KeptFrames` (a resumable
turn's kept events). The response itself is `app.api.event_stream.EventStreamResponse`."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, Mapping, Protocol

from app.api.event_stream import EventStreamResponse
from app.contract.events import TERMINAL_TYPES
from app.contract.failures import Interrupt
from app.core.job import TurnJob
from app.doors.base import EventEncoder
from app.gateway import OpenStreams

log = logging.getLogger("gateway.sse")

BATCH_BYTES = 64 * 1024  # past this, the events ready at once go out in more than one write


class Frames(Protocol):
    """A stream's frames as the response reads them: ready-made bytes. The response closes them (`aclose`) when
    it ends, also early (client gone, shutdown), and also when it never read one; `finished` true once the
    frame just handed out was the last (it then goes out with the closing chunk)."""

    finished: bool

    def __aiter__(self) -> "Frames": ...

    async def __anext__(self) -> bytes: ...

    async def aclose(self) -> None: ...


def sse_response(
    frames: Frames, ping: bytes, headers: Mapping[str, str], *, keepalive: float, streams: OpenStreams | None
) -> EventStreamResponse:
    """`text/event-stream` with `Cache-Control: no-cache` and `headers`: `frames` as they come, `ping` (the
    door's keep-alive frame) every `keepalive` seconds, the frames closed when the client disconnects, and
    the stream in `streams` (the gateway's open streams, `Gateway.streams`) so that the shutdown ends it."""
    return EventStreamResponse(
        frames, headers={"Cache-Control": "no-cache", **headers}, ping_interval=keepalive, ping=ping, streams=streams
    )


class TurnFrames:
    """A live turn's events as SSE frames, written by the door's `encoder` (`Frames`). When the response ends
    before the terminal event (the client went away, or the server is stopping: `draining()`) it interrupts
    the turn, so the pump cancels the upstream, settles the turn and writes the record. `sent(n)` is told how
    many events the response wrote. `first`: an event already taken from the turn (a door that holds its
    headers until the turn starts), written before the rest. `before_end`: awaited before the terminal frame
    goes out (what a door keeps of the turn is written first, so a client may build on it at once).

    A class rather than an async generator: every open stream holds it, and a generator also holds its frame
    and an entry in the event loop's set of live async generators (about 1.3 KB per stream)."""

    __slots__ = ("job", "encode", "draining", "sent", "first", "before_end", "count", "failed", "ended", "finished")

    def __init__(
        self,
        job: TurnJob,
        encoder: EventEncoder,
        draining: Callable[[], bool],
        sent: Callable[[int], None] | None = None,
        first: dict[str, Any] | None = None,
        before_end: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.job = job
        self.encode = encoder.encode
        self.draining = draining
        self.sent = sent
        self.first = first  # an event already taken from the turn, written first
        self.before_end = before_end
        self.count = 0
        self.failed = False  # an event could not be encoded: our bug, never the client's disconnect
        self.ended = False
        self.finished = False  # the last frame handed out holds the terminal event: the response closes with it

    def __aiter__(self) -> "TurnFrames":
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
                if self.before_end is not None:
                    await self.before_end()
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
