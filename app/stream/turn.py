"""The event stream of one turn (docs/api.md §5–§6, docs/internals.md): a message builder and its event queue.

A `Turn` sits between the producer (the dispatcher, feeding adapter events) and one consumer (a door's
writer, the resumable stream's tee, or `/v1/complete`, which reads no events). It composes two parts:

- `MessageBuilder` (`app.stream.message`): block order, `contentIndex`, the `AssistantMessage`, strict tool
  arguments, valid text, and the settle guard (exactly one terminal outcome);
- `EventQueue` (`app.stream.queue`): delta coalescing and the memory bound for slow readers (TCP
  back-pressure on the upstream).

The producer calls `prepare`, `apply` (or `apply_until_finish`), `set_usage`, `settle_done` /
`settle_error`, and waits on `wait_drained` when `congested`; the consumer calls `next_event` until None, or
`close_reader` when it stops reading.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Coroutine, Mapping

from app.contract.catalog_entries import Pricing
from app.contract.adapter_events import AdapterEvent
from app.stream.message import ARGUMENTS_CUT_OFF, ContractViolation, MessageBuilder, ToolArgumentsError
from app.stream.queue import EventQueue

__all__ = ["ARGUMENTS_CUT_OFF", "ContractViolation", "ToolArgumentsError", "Turn"]


class Turn:
    def __init__(
        self,
        request_id: str,
        *,
        throttle_ms: int = 50,
        max_pending_bytes: int = 256 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request_id = request_id
        self.queue = EventQueue(throttle_ms=throttle_ms, max_pending_bytes=max_pending_bytes, clock=clock)
        self.builder = MessageBuilder(request_id, self.queue, clock=clock)

    # ----------------------------------------------------------------- producer side (the message builder)

    def prepare(self, provider: str, api: str, model: str, pricing: Pricing | None) -> None:
        """Name the provider and model of the next attempt. Nothing is sent until its first content event."""
        self.builder.prepare(provider, api, model, pricing)

    def apply(self, event: AdapterEvent) -> None:
        """Take one adapter event (`app.contract.adapter_events`) and turn it into public events."""
        self.builder.apply(event)

    def apply_until_finish(self, events: list[AdapterEvent]) -> str | None:
        """Take one frame's adapter events in order up to a `finish`: its stop reason (the producer settles the
        turn with it), or None when there is none. One call per frame instead of one `apply` per event."""
        apply = self.builder.apply
        for event in events:
            if event["type"] == "finish":
                return event["reason"]
            apply(event)
        return None

    def set_usage(self, tokens: Mapping[str, Any]) -> None:
        self.builder.set_usage(tokens)

    def settle_done(self, reason: str) -> bool:
        """Settle as `done`; False when the turn had already settled (see `MessageBuilder.settle_done`)."""
        return self.builder.settle_done(reason)

    def settle_error(self, message: str, *, aborted: bool = False) -> bool:
        """Settle as `error` (reason `aborted` or `error`), keeping the partial content; False when settled."""
        return self.builder.settle_error(message, aborted=aborted)

    @property
    def congested(self) -> bool:
        """True when the reader is far enough behind that the producer should wait (`wait_drained`)."""
        return self.queue.congested

    def wait_drained(self) -> Coroutine[Any, Any, None]:
        return self.queue.wait_drained()

    # ----------------------------------------------------------------- consumer side (the event queue)

    def next_event(self) -> Coroutine[Any, Any, dict[str, Any] | None]:
        """The next event to send, or None once the terminal event has been taken (to await).

        The queue's own coroutine, not one wrapping it: a waiting reader holds one frame less."""
        return self.queue.next()

    def next_ready(self) -> dict[str, Any] | None:
        """The next event if one is ready now, else None (see `EventQueue.next_ready`)."""
        return self.queue.next_ready()

    def close_reader(self) -> None:
        """No one reads the events (any more): stop queueing them and release a producer waiting on the reader."""
        self.queue.close_reader()

    # ----------------------------------------------------------------- state (read by observers and doors)

    @property
    def message(self) -> dict[str, Any]:
        """The `AssistantMessage` as built so far (the live dict: final once settled)."""
        return self.builder.message

    @property
    def pricing(self) -> Pricing | None:
        return self.builder.pricing

    @property
    def started(self) -> bool:
        """`start` was sent: the provider and model that serve the turn are fixed."""
        return self.builder.started

    @property
    def settled(self) -> bool:
        return self.builder.settled

    @property
    def terminal(self) -> dict[str, Any] | None:
        return self.builder.terminal

    @property
    def outcome(self) -> str | None:
        """done | error | aborted, once settled."""
        return self.builder.outcome

    @property
    def tool_calls(self) -> int:
        return self.builder.tool_calls

    @property
    def late_frames(self) -> int:
        """Adapter events (and upstream frames) that arrived after settlement and were dropped."""
        return self.builder.late_frames

    @late_frames.setter
    def late_frames(self, value: int) -> None:
        self.builder.late_frames = value

    @property
    def first_content_at(self) -> float | None:
        return self.builder.first_content_at

    @property
    def created_at(self) -> float:
        return self.builder.created_at

    @property
    def events_sent(self) -> int:
        """Events handed to the reader."""
        return self.queue.taken
