"""The SSE response's own duties (app/api/event_stream.py), on a bare ASGI call: keep-alive frames while the
stream is quiet, the client's disconnect closing the frames' generator, and the shutdown ending the
stream after the grace period with a clean end of stream."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest

from app.api import event_stream
from app.api.event_stream import EventStreamResponse
from app.gateway import OpenStreams

PING = b": ping\n\n"


class Client:
    """The ASGI side: records what was sent; `leave()` makes `receive` answer `http.disconnect`."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.changed.set()

    async def until(self, condition) -> None:
        while not condition():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)

    @property
    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]

    @property
    def ended(self) -> bool:
        return any(m["type"] == "http.response.body" and not m["more_body"] for m in self.sent)


def frames_until(release: asyncio.Event, closed: list[str]) -> AsyncIterator[bytes]:
    async def frames() -> AsyncIterator[bytes]:
        try:
            yield b"data: one\n\n"
            await release.wait()
            yield b"data: two\n\n"
        finally:
            closed.append("closed")

    return frames()


def scope() -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/stream", "headers": []}


async def test_a_quiet_stream_gets_keepalive_frames_then_a_clean_end() -> None:
    client, release, closed = Client(), asyncio.Event(), []
    response = EventStreamResponse(
        frames_until(release, closed), {"X-Request-Id": "r"}, ping_interval=0.02, ping=PING, streams=None
    )
    call = asyncio.create_task(response(scope(), client.receive, client.send))
    await client.until(lambda: client.bodies.count(PING) >= 2)
    release.set()
    await asyncio.wait_for(call, 5)

    start = client.sent[0]
    assert start["type"] == "http.response.start" and start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert headers[b"x-accel-buffering"] == b"no" and headers[b"x-request-id"] == b"r"
    data = [b for b in client.bodies if b not in (PING, b"")]
    assert data == [b"data: one\n\n", b"data: two\n\n"]
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert closed == ["closed"]


async def test_the_client_leaving_closes_the_frames_and_sends_nothing_more() -> None:
    client, release, closed = Client(), asyncio.Event(), []
    response = EventStreamResponse(frames_until(release, closed), {}, ping_interval=30, ping=PING, streams=None)
    call = asyncio.create_task(response(scope(), client.receive, client.send))
    await client.until(lambda: b"data: one\n\n" in client.bodies)
    client.gone.set()
    await asyncio.wait_for(call, 5)  # returns: the cancellation was the response's own

    assert closed == ["closed"]
    assert not client.ended and response.stopped is event_stream.StopReason.CLIENT_GONE


async def test_the_server_exiting_ends_the_stream_after_the_grace() -> None:
    client, release, closed, streams = Client(), asyncio.Event(), [], OpenStreams()
    response = EventStreamResponse(frames_until(release, closed), {}, ping_interval=30, ping=PING, streams=streams)
    call = asyncio.create_task(response(scope(), client.receive, client.send))
    await client.until(lambda: b"data: one\n\n" in client.bodies)
    # This stream's own shutdown (`app.server.shutdown.shut_down` gives the gateway's streams their grace), not the
    # process-wide flag: other gateways served by this test process (session fixtures) must not start draining.
    streams.close_within(0.05)
    await asyncio.wait_for(call, 5)

    assert closed == ["closed"] and response.stopped is event_stream.StopReason.SERVER_EXIT
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


async def test_a_cancellation_from_the_server_is_not_swallowed() -> None:
    client, release, closed = Client(), asyncio.Event(), []
    response = EventStreamResponse(frames_until(release, closed), {}, ping_interval=30, ping=PING, streams=None)
    call = asyncio.create_task(response(scope(), client.receive, client.send))
    await client.until(lambda: b"data: one\n\n" in client.bodies)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert closed == ["closed"]


class FinishingFrames:
    """Frames whose iterator says, with `finished`, that the frame it just handed out was its last."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = list(frames)
        self.finished = False
        self.closed = False

    def __aiter__(self) -> "FinishingFrames":
        return self

    async def __anext__(self) -> bytes:
        if not self.frames:
            raise StopAsyncIteration
        frame = self.frames.pop(0)
        self.finished = not self.frames
        return frame

    async def aclose(self) -> None:
        self.closed = True


async def test_the_last_frame_goes_out_with_the_closing_chunk() -> None:
    client = Client()
    frames = FinishingFrames([b"data: one\n\n", b"data: two\n\n"])
    response = EventStreamResponse(frames, {}, ping_interval=30, ping=PING, streams=None)
    await asyncio.wait_for(response(scope(), client.receive, client.send), 5)

    assert client.sent[1:] == [
        {"type": "http.response.body", "body": b"data: one\n\n", "more_body": True},
        {"type": "http.response.body", "body": b"data: two\n\n", "more_body": False},
    ]
    assert frames.closed
