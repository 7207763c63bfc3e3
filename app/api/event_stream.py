"""The gateway's Server-Sent Events response (`EventStreamResponse`), one task per stream besides the
request's own. Every SSE stream goes through it, by way of `app.api.sse.sse_response`.

sse-starlette's `EventSourceResponse` runs four tasks in an anyio task group for every open stream (the
stream, the keep-alive ping, the disconnect listener, the exit-signal listener) and enters an anyio cancel
scope for every frame it sends (docs/performance.md). This response keeps what the gateway used of it and runs
it leaner:

- the request's own task iterates the frames and sends them;
- one watcher task per stream waits for the client's `http.disconnect` and, while the stream is quiet,
  sends the keep-alive frame every `ping_interval` seconds (a timeout on the same wait, not a second task);
- the gateway's shutdown (`app.server.shutdown`) ends the streams still open when its grace is over: each stream is
  in the gateway's `OpenStreams` while it sends.

Ending a stream early (client gone, shutdown) cancels the request's task and catches that cancellation here;
the frames are closed (`aclose`) either way, so their own end runs (the gateway interrupts the turn there).
A stream ended by the server's exit still gets its closing chunk, so the client sees a clean end of stream.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import AsyncIterator, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.gateway import OpenStreams

log = logging.getLogger("gateway.sse")

# The headers every stream sends, encoded once and shared by all of them (every open stream holds its own
# response's headers otherwise: about 600 bytes of tuples and bytes).
_SHARED_HEADERS = {
    (name, value): (name.encode("latin-1"), value.encode("latin-1"))
    for name, value in [("cache-control", "no-cache"), ("cache-control", "no-store")]
}
_SET_HEADERS = [(b"connection", b"keep-alive"), (b"x-accel-buffering", b"no")]  # proxies must not buffer the stream
_CONTENT_TYPE = (b"content-type", b"text/event-stream; charset=utf-8")


class StopReason(enum.Enum):
    CLIENT_GONE = "client gone"
    SERVER_EXIT = "server exiting"


class EventStreamResponse(Response):
    """`text/event-stream` from an async iterator of ready-made frames (bytes, written as they are).

    An iterator whose `finished` attribute is true once it has handed out a frame says that frame was its
    last: it goes out together with the closing chunk (one write, not two). `streams`: the gateway's open
    streams, which the shutdown ends (None: a stream no shutdown ends, in tests)."""

    media_type = "text/event-stream"
    # Slots: every open stream holds its response (Starlette's `Response` has no slots, but none of its
    # attributes is set outside them, so no instance dict is made).
    __slots__ = (
        "body_iterator",
        "status_code",
        "background",
        "ping_interval",
        "ping",
        "streams",
        "raw_headers",
        "_headers",
        "active",
        "stopped",
        "_task",
        "_lock",
    )

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        headers: Mapping[str, str],
        ping_interval: float,
        ping: bytes,
        streams: OpenStreams | None,
    ) -> None:
        self.body_iterator = frames
        self.status_code = 200
        self.background = None
        self.ping_interval = ping_interval
        self.ping = ping
        self.streams = streams
        self.raw_headers = self._raw_headers(headers)
        self.active = True  # until the closing chunk is being sent or the stream was stopped
        self.stopped: StopReason | None = None
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()  # a ping never goes out after the closing chunk

    @staticmethod
    def _raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
        """`headers`, then `Cache-Control: no-store` unless given, `Connection: keep-alive`,
        `X-Accel-Buffering: no` and the content type (what Starlette's `init_headers` would make of them)."""
        raw: list[tuple[bytes, bytes]] = []
        for name, value in headers.items():
            key = name.lower()
            if key not in ("connection", "x-accel-buffering"):
                raw.append(_SHARED_HEADERS.get((key, value)) or (key.encode("latin-1"), value.encode("latin-1")))
        names = {name for name, _ in raw}
        if b"cache-control" not in names:
            raw.append(_SHARED_HEADERS["cache-control", "no-store"])
        raw += _SET_HEADERS
        if b"content-type" not in names:
            raw.append(_CONTENT_TYPE)
        return raw

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._task = asyncio.current_task()
        watcher = asyncio.get_running_loop().create_task(self._watch(receive, send))
        try:
            last = b""
            try:  # not `contextlib.aclosing`: one object less held per open stream
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
                if self.streams is not None:
                    self.streams.add(self)
                async for frame in self.body_iterator:
                    if getattr(self.body_iterator, "finished", False):
                        last = frame  # goes out with the closing chunk, in the same write
                        break
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
            finally:
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
            await self._close(send, last)
        except asyncio.CancelledError:
            if self.stopped is None or self._task is None or self._task.uncancel() > 0:
                raise  # not (only) ours: the server cancels the request
            if self.stopped is StopReason.SERVER_EXIT:
                await self._close(send)
        finally:
            self.active = False
            watcher.cancel()
            if self.streams is not None:
                self.streams.discard(self)

    async def _close(self, send: Send, last: bytes = b"") -> None:
        async with self._lock:
            self.active = False
            await send({"type": "http.response.body", "body": last, "more_body": False})

    def stop(self, reason: StopReason) -> None:
        """End the stream early (from another task or a timer): cancels the request's task while it still
        sends frames."""
        if self.active and self.stopped is None and self._task is not None:
            self.stopped = reason
            self._task.cancel()

    def end_for_exit(self) -> None:
        """The server is exiting and the shutdown's grace is over (`app.server.shutdown.OpenStreams`)."""
        self.stop(StopReason.SERVER_EXIT)

    async def _watch(self, receive: Receive, send: Send) -> None:
        """Wait for the client to disconnect; send the keep-alive frame whenever `ping_interval` passes."""
        while self.active:
            try:
                if self.ping_interval > 0:
                    async with asyncio.timeout(self.ping_interval):
                        message = await receive()
                else:
                    message = await receive()
            except TimeoutError:
                async with self._lock:
                    if self.active:
                        await send({"type": "http.response.body", "body": self.ping, "more_body": True})
                continue
            if message["type"] == "http.disconnect":
                self.stop(StopReason.CLIENT_GONE)
                return
