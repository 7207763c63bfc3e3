"""The coalescing, back-pressured queue of one turn's public events (docs/api.md §6, docs/internals.md).

The message builder (`app.stream.message`) puts events in; one reader (a door's writer, the resumable
stream's tee) takes them out with `next()`. The queue

- merges deltas inside the coalescing window: the first delta of a window goes out at once (no added time to
  first token), later deltas of the same block within the window are held and merged, any other event
  flushes what is held first;
- merges a delta into the previous one while the reader has not taken it yet (a slow reader gets bigger
  deltas, not more of them);
- bounds what waits for the reader: past `max_pending_bytes` it is `congested`, and the producer waits in
  `wait_drained` until half of it has been taken, which stops it reading the upstream socket (TCP
  back-pressure);
- once closed (the terminal event is in), hands out what is left and then None.

It knows nothing of blocks, messages or settlement. All mutation happens on the event loop thread.

Every open stream holds its queue, so the queue holds little while idle: the waiting side's future exists only
while it waits (an `asyncio.Event` holds a 760-byte deque of waiters from birth), the coalescing timer is a
timer handle rather than an `asyncio.timeout` context, and the ready events are in a list (a deque is 760
bytes even when empty).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

EVENT_OVERHEAD = 64  # bytes charged to the memory bound for any queued event besides its text


class _PendingDelta:
    """A delta waiting to be sent; later deltas of the same block append to it instead of queueing."""

    __slots__ = ("type", "index", "parts", "size")

    def __init__(self, type_: str, index: int, text: str) -> None:
        self.type = type_
        self.index = index
        self.parts = [text]
        self.size = len(text)

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def event(self) -> dict[str, Any]:
        parts = self.parts
        return {"type": self.type, "contentIndex": self.index, "delta": parts[0] if len(parts) == 1 else "".join(parts)}


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


COMPACT_AFTER = 64  # taken items at the head of `_ready` before the list is compacted


class EventQueue:
    __slots__ = (
        "_throttle",
        "_max_pending",
        "_clock",
        "_ready",
        "_head",
        "_held",
        "_held_until",
        "_window_key",
        "_window_end",
        "pending_bytes",
        "_reader",
        "_producer",
        "_closed",
        "reading",
        "taken",
    )

    def __init__(
        self,
        *,
        throttle_ms: int = 50,
        max_pending_bytes: int = 256 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._throttle = throttle_ms / 1000.0
        self._max_pending = max_pending_bytes
        self._clock = clock
        self._ready: list[Any] = []  # events and `_PendingDelta`s, taken from `_head` on (None once taken)
        self._head = 0
        self._held: _PendingDelta | None = None  # a delta inside the coalescing window, out when it ends
        self._held_until = 0.0
        self._window_key: tuple[str, int] | None = None
        self._window_end = 0.0
        self.pending_bytes = 0
        self._reader: asyncio.Future[None] | None = None  # while the reader waits for an event
        self._producer: asyncio.Future[None] | None = None  # while the producer waits in `wait_drained`
        self._closed = False  # nothing more will be put
        self.reading = True  # False once the reader is gone (or never wanted events, as /v1/complete)
        self.taken = 0  # events handed to the reader

    # ----------------------------------------------------------------- producer side

    def put(self, event: dict[str, Any]) -> None:
        """Queue a non-delta event; a held delta goes first."""
        if not self.reading:
            return
        if self._held is not None:
            self._release_held(by_timer=False)
        self.pending_bytes += EVENT_OVERHEAD
        self._ready.append(event)
        _wake(self._reader)

    def put_delta(self, type_: str, index: int, text: str) -> None:
        """Queue a delta of block `index`, merging it where the window or a slow reader allows."""
        if not self.reading:
            return
        self.pending_bytes += len(text)
        held = self._held
        if held is not None:
            if held.type == type_ and held.index == index:
                held.add(text)
                return
            self._release_held(by_timer=False)
        if self._throttle > 0:
            tail = self._ready[-1] if self._ready else None  # never a taken (None) item: see `_take`
            if isinstance(tail, _PendingDelta) and tail.type == type_ and tail.index == index:
                tail.add(text)  # the reader has not taken the previous delta yet: merge, do not queue
                return
            key = (type_, index)
            now = self._clock()
            if key == self._window_key and now < self._window_end:
                self._held = _PendingDelta(type_, index, text)
                self.pending_bytes += EVENT_OVERHEAD
                self._held_until = self._window_end
                _wake(self._reader)
                return
            self._window_key = key
            self._window_end = now + self._throttle
        self.pending_bytes += EVENT_OVERHEAD
        self._ready.append(_PendingDelta(type_, index, text))
        reader = self._reader  # `_wake(self._reader)`, inline: once per token
        if reader is not None and not reader.done():
            reader.set_result(None)

    def close(self, last: dict[str, Any]) -> None:
        """Queue the terminal event `last` (after anything held) and take nothing more."""
        if self._held is not None:
            self._release_held(by_timer=False)
        self.put(last)
        self._closed = True
        _wake(self._reader)

    @property
    def congested(self) -> bool:
        """True when the reader is far enough behind that the producer should wait (`wait_drained`)."""
        return self.pending_bytes > self._max_pending

    async def wait_drained(self) -> None:
        """Wait until the reader has taken half of the bound back (or is gone)."""
        while self.pending_bytes > self._max_pending // 2 and self.reading:
            self._producer = asyncio.get_running_loop().create_future()
            try:
                await self._producer
            finally:
                self._producer = None

    # ----------------------------------------------------------------- reader side

    async def next(self) -> dict[str, Any] | None:
        """The next event, or None once the queue is closed and empty."""
        while True:
            if self._ready:
                return self._take()
            timeout = None
            if self._held is not None:
                timeout = self._held_until - self._clock()
                if timeout <= 0:
                    self._release_held(by_timer=True)
                    continue
            elif self._closed:
                _wake(self._producer)
                return None
            loop = asyncio.get_running_loop()
            waiter = self._reader = loop.create_future()
            # The held delta's window ends: wake up then (its release happens above, in this task).
            timer = None if timeout is None else loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                self._reader = None
                if timer is not None:
                    timer.cancel()

    def next_ready(self) -> dict[str, Any] | None:
        """The next event if one is ready now, else None (a held delta waits for its window). Lets a reader
        that was woken take what the producer queued meanwhile in one go, without awaiting."""
        return self._take() if self._ready else None

    def close_reader(self) -> None:
        """No one reads the events (any more): drop what waits and release a producer waiting on the reader."""
        self.reading = False
        self._ready.clear()
        self._head = 0
        self._held = None
        self.pending_bytes = 0
        _wake(self._producer)

    def take_now(self) -> list[dict[str, Any]]:
        """Everything queued, the held delta included, without waiting (a reader with nothing to wait for)."""
        if self._held is not None:
            self._release_held(by_timer=True)
        return [self._take() for _ in range(len(self._ready) - self._head)]

    # ----------------------------------------------------------------- internals

    def _take(self) -> dict[str, Any]:
        ready, head = self._ready, self._head
        item = ready[head]
        if head + 1 == len(ready):  # all taken: the list frees its array
            ready.clear()
            self._head = 0
        elif head + 1 >= COMPACT_AFTER and 2 * (head + 1) >= len(ready):
            del ready[: head + 1]
            self._head = 0
        else:
            ready[head] = None
            self._head = head + 1
        if type(item) is _PendingDelta:
            self.pending_bytes -= item.size + EVENT_OVERHEAD
            event = item.event()
        else:
            self.pending_bytes -= EVENT_OVERHEAD
            event = item
        producer = self._producer  # `_wake(self._producer)` once half the bound is free, inline: once per event
        if producer is not None and self.pending_bytes <= self._max_pending // 2 and not producer.done():
            producer.set_result(None)
        self.taken += 1
        return event

    def _release_held(self, *, by_timer: bool) -> None:
        held = self._held
        self._held = None
        if held is None:
            return
        self._ready.append(held)
        if by_timer:
            self._window_end = self._clock() + self._throttle
        _wake(self._reader)
