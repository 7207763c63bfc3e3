"""The SSE writer's own failures: an event it cannot encode is an internal error, never the client leaving."""

from __future__ import annotations

import asyncio

from app.api.sse import event_stream_response
from app.catalog import Catalog
from app.contract.failures import Interrupt
from app.dispatch import Dispatcher
from app.doors.unified.events import UnifiedEncoder
from app.settings import Settings
from tests.fake_provider import FakeProvider, Gate, new_job


async def test_an_event_that_cannot_be_encoded_is_an_internal_error_not_a_disconnect():
    vendor_waits = asyncio.Event()
    provider = FakeProvider(scripts=[[[{"type": "text_start"}], [{"type": "text_delta", "delta": "ok"}], Gate(vendor_waits)]])
    job = new_job(provider)
    taken = job.turn.next_event

    async def next_event():  # a bug elsewhere hands the writer an event no JSON encoder can write
        event = await taken()
        if event is not None and event["type"] == "text_delta":
            event = {**event, "delta": "\ud800"}
        return event

    job.turn.next_event = next_event
    job.task = asyncio.create_task(Dispatcher({}, Catalog(), Settings()).run(job))
    response = event_stream_response(job, UnifiedEncoder(), 15, {}, lambda: False)
    frames = [frame async for frame in response.body_iterator]
    await asyncio.wait_for(job.task, 5)

    assert [f.split(b"\n")[1] for f in frames] == [b"event: start", b"event: text_start"]
    assert job.turn.outcome == "error" and job.client_disconnected is False
    assert job.turn.message["errorMessage"] == f"fake/m {Interrupt.WRITER}"
    assert provider.closed == 1  # the upstream was closed
