"""The Turn's two parts on their own: the message builder (settle guard) and the event queue."""

from __future__ import annotations

from typing import Any

import pytest

from app.contract.catalog_entries import Pricing
from app.stream.message import ContractViolation, MessageBuilder
from app.stream.queue import EventQueue


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.closed = 0

    def put(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def put_delta(self, type_: str, index: int, text: str) -> None:
        self.events.append({"type": type_, "contentIndex": index, "delta": text})

    def close(self, last: dict[str, Any]) -> None:
        self.events.append(last)
        self.closed += 1


def builder() -> tuple[MessageBuilder, RecordingSink]:
    sink = RecordingSink()
    b = MessageBuilder("req_parts", sink)
    b.prepare("p", "api", "m", Pricing())
    return b, sink


def test_the_settle_guard_closes_the_sink_once_and_counts_late_frames():
    b, sink = builder()
    b.apply({"type": "text_start"})
    b.apply({"type": "text_delta", "delta": "hi"})
    b.apply({"type": "text_end"})
    assert b.settle_done("stop") and not b.settle_error("late") and not b.settle_done("stop")
    b.apply({"type": "text_start"})
    assert sink.closed == 1 and b.late_frames == 1
    assert [e["type"] for e in sink.events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert b.message["content"] == [{"type": "text", "text": "hi"}]


def test_the_builder_refuses_a_provider_change_after_start():
    b, _ = builder()
    b.apply({"type": "text_start"})
    with pytest.raises(ContractViolation):
        b.prepare("other", "api", "m", None)


async def test_the_queue_hands_out_what_it_holds_then_none():
    queue = EventQueue(throttle_ms=0)
    queue.put({"type": "start"})
    queue.put_delta("text_delta", 0, "a")
    queue.close({"type": "done"})
    taken = [await queue.next() for _ in range(3)]
    assert [e["type"] for e in taken] == ["start", "text_delta", "done"]
    assert queue.taken == 3


async def test_a_closed_reader_drops_what_waits_and_releases_the_producer():
    queue = EventQueue(throttle_ms=0, max_pending_bytes=100)
    for _ in range(10):
        queue.put_delta("text_delta", 0, "x" * 50)
    assert queue.congested
    queue.close_reader()
    await queue.wait_drained()  # returns at once: nobody reads
    queue.put_delta("text_delta", 0, "more")
    assert queue.pending_bytes == 0 and not queue.congested
