"""The SSE writer's own failures: an event it cannot encode is an internal error, never the client leaving."""

from __future__ import annotations

import asyncio
import json

from app.api.sse import BATCH_BYTES, TurnFrames, sse_response
from app.catalog import Catalog
from app.contract.failures import Interrupt
from app.core.dispatcher import Dispatcher
from app.doors.unified_frames import PING, UnifiedEncoder
from app.settings import Settings
from tests.fake_provider import FakeProvider, Gate, new_job


async def test_an_event_that_cannot_be_encoded_is_an_internal_error_not_a_disconnect():
    vendor_waits = asyncio.Event()
    provider = FakeProvider(
        scripts=[[[{"type": "text_start"}], [{"type": "text_delta", "delta": "ok"}], Gate(vendor_waits)]]
    )
    job = new_job(provider)
    taken, taken_now = job.turn.next_event, job.turn.next_ready

    def poisoned(event):  # a bug elsewhere hands the writer an event no JSON encoder can write
        if event is not None and event["type"] == "text_delta":
            event = {**event, "delta": "\ud800"}
        return event

    async def next_event():
        return poisoned(await taken())

    job.turn.next_event = next_event
    job.turn.next_ready = lambda: poisoned(taken_now())
    Dispatcher({}, Catalog(), Settings()).start(job)
    response = sse_response(TurnFrames(job, UnifiedEncoder(), lambda: False), PING, {}, keepalive=15, streams=None)
    frames = [frame async for frame in response.body_iterator]
    await asyncio.wait_for(job.task, 5)

    written = b"".join(frames).split(b"\n")
    assert [line for line in written if line.startswith(b"event:")] == [b"event: start", b"event: text_start"]
    assert job.turn.outcome == "error" and job.client_disconnected is False
    assert job.turn.message["errorMessage"] == f"fake/m {Interrupt.WRITER}"
    assert provider.closed == 1  # the upstream was closed


async def test_events_ready_together_go_out_in_one_write_in_order():
    deltas = [{"type": "text_delta", "delta": f"d{i}"} for i in range(5)]
    provider = FakeProvider(
        scripts=[[[{"type": "text_start"}, *deltas, {"type": "text_end"}, {"type": "finish", "reason": "stop"}]]]
    )
    job = new_job(provider)  # coalescing off: every delta is an event of its own
    Dispatcher({}, Catalog(), Settings()).start(job)
    await asyncio.wait_for(asyncio.shield(job.task), 5)  # the whole turn is queued before the writer reads
    response = sse_response(TurnFrames(job, UnifiedEncoder(), lambda: False), PING, {}, keepalive=15, streams=None)
    encoder = UnifiedEncoder()

    frames = [frame async for frame in response.body_iterator]

    written = [line for line in b"".join(frames).split(b"\n") if line.startswith(b"event:")]
    assert written == [
        b"event: " + t.encode() for t in ["start", "text_start", *["text_delta"] * 5, "text_end", "done"]
    ]
    assert len(frames) == 1
    assert frames[0] == b"".join(encoder.encode(e) for e in _events_of(frames[0]))


async def test_a_large_backlog_goes_out_in_writes_of_about_batch_bytes():
    deltas = [{"type": "text_delta", "delta": "x" * 8192} for _ in range(40)]
    provider = FakeProvider(
        scripts=[[[{"type": "text_start"}, *deltas, {"type": "text_end"}, {"type": "finish", "reason": "stop"}]]]
    )
    job = new_job(provider)
    Dispatcher({}, Catalog(), Settings()).start(job)
    await asyncio.wait_for(asyncio.shield(job.task), 5)
    response = sse_response(TurnFrames(job, UnifiedEncoder(), lambda: False), PING, {}, keepalive=15, streams=None)

    frames = [frame async for frame in response.body_iterator]

    # A write ends once it passes BATCH_BYTES: eight 8 KB deltas (with start and text_start in the first);
    # text_end and done carry the whole 320 KB text, each a write of its own.
    assert [frame.count(b"\nevent: ") for frame in frames] == [10, 8, 8, 8, 8, 1, 1]
    assert all(len(frame) < BATCH_BYTES + 8500 for frame in frames[:5])


def _events_of(frame: bytes) -> list[dict]:
    return [json.loads(line[len(b"data: ") :]) for line in frame.split(b"\n") if line.startswith(b"data: ")]
