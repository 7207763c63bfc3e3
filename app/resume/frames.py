"""A resumable turn's numbered events (`Frame`) and what its origin replica keeps of them in memory: the turn's
`LocalStream`, bounded per turn, counted in the replica's `KeptBytes`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import AsyncIterator

from app.contract.refusals import EventsLost

TERMINAL_TYPES = (b"done", b"error")


@dataclass(frozen=True, slots=True)
class Frame:
    """One numbered event: its type and the frame the door's encoder wrote for it (`id: <seq>` …)."""

    seq: int
    type: bytes
    data: bytes

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_TYPES


class KeptBytes:
    """The bytes of frames all resumable turns of a replica keep, and their bound (`GATEWAY_RESUME_MAX_BYTES`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bytes = 0

    @property
    def excess(self) -> int:
        return self.bytes - self.limit


@dataclass(eq=False)
class LocalStream:
    """The kept events of one resumable turn on its origin replica: at most `cap` frames and `max_bytes` bytes
    of them (the oldest dropped first; the newest is always kept), counted in the replica's `kept`."""

    request_id: str
    key_id: str | None
    cap: int
    max_bytes: int = 1 << 62
    kept: KeptBytes = field(default_factory=lambda: KeptBytes(1 << 62))
    frames: list[Frame] = field(default_factory=list)
    first_seq: int = 1  # seq of frames[0] (older ones dropped by a bound)
    bytes: int = 0  # of the kept frames' data
    terminal_seq: int | None = None
    done: bool = False
    readers: int = 0
    resumes: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.frames) - 1

    def append(self, frame: Frame) -> None:
        self.frames.append(frame)
        self._count(len(frame.data))
        if frame.terminal:
            self.terminal_seq = frame.seq
        self.drop_oldest(0)
        self._wake()

    def drop_oldest(self, at_least: int) -> None:
        """Drop the oldest frames until within `cap` and `max_bytes` and `at_least` bytes are freed, always
        keeping the newest frame (the one a caught-up reader is about to send)."""
        frames = self.frames
        drop = freed = 0
        while drop < len(frames) - 1 and (
            len(frames) - drop > self.cap or self.bytes - freed > self.max_bytes or freed < at_least
        ):
            freed += len(frames[drop].data)
            drop += 1
        if drop:
            del frames[:drop]
            self.first_seq += drop
            self._count(-freed)

    def drop_all(self) -> None:
        """Keep nothing (the replica's bound, or the TTL): a resumption then gets 410, past the end 204."""
        self.first_seq = self.last_seq + 1
        self.frames = []
        self._count(-self.bytes)

    def _count(self, delta: int) -> None:
        self.bytes += delta
        self.kept.bytes += delta

    def finish(self) -> None:
        self.done = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, after: int) -> AsyncIterator[Frame]:
        """Every kept frame after `after`, then each new one until the terminal. Raises EventsLost when the
        frames after `after` were trimmed."""
        position = after
        while True:
            if position + 1 < self.first_seq:
                raise EventsLost(f"events after {position} are no longer kept (the kept events are bounded)")
            batch = self.frames[position + 1 - self.first_seq :]
            for frame in batch:
                yield frame
                position = frame.seq
                if frame.terminal:
                    return
            if not batch:
                if self.done:
                    return
                await self._changed.wait()
