"""One blocking read per replica (`StreamWatch`) that the readers of turns kept in Redis wait on."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from app.redis_client import raise_dropped_cancellation
from app.resume.frames import Frame
from app.resume.redis_store import BLOCK_MS, FETCH_COUNT, READER_LEASE_MS, RedisEvents, frames_of

log = logging.getLogger("gateway.resume")

IDLE_CHECK_S = 2 * BLOCK_MS / 1000  # a waiting reader checks that the turn still runs (or is still known) this often


@dataclass(eq=False)
class _Watched:
    """A turn that readers on this replica follow in Redis: the newest entry the watch knows of (`tail`), the
    entries it read last (contiguous), and a wake-up for the readers waiting for more."""

    request_id: str
    tail: int
    readers: int = 0
    recent: list[Frame] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def recent_after(self, position: int) -> list[Frame]:
        recent = self.recent
        if not recent or not recent[0].seq <= position + 1 <= recent[-1].seq:
            return []
        return recent[position + 1 - recent[0].seq :]

    def got(self, frames: list[Frame]) -> None:
        self.tail = max(self.tail, frames[-1].seq)
        contiguous = frames[-1].seq - frames[0].seq + 1 == len(frames)
        self.recent = frames if contiguous else []
        self.wake()

    def wake(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait(self, position: int) -> None:
        """Until the watch knows of an entry after `position`, or IDLE_CHECK_S passed."""
        if self.tail > position:
            return
        try:
            async with asyncio.timeout(IDLE_CHECK_S):
                await self.changed.wait()
        except (TimeoutError, asyncio.TimeoutError):
            pass


class StreamWatch:
    """Waits, for every reader on this replica of a turn kept in Redis, for the turn's new entries: one task,
    one connection, one blocking `XREAD` over all followed turns (plus a wake-up stream of its own, written
    when a turn joins so the read in progress returns). The entries it read go to the readers that are
    caught up; the reader leases of the followed turns are renewed here."""

    def __init__(self, events: RedisEvents, spawn: Callable[..., asyncio.Task], timeout: float) -> None:
        self.events = events
        self.timeout = timeout
        self.turns: dict[str, _Watched] = {}
        self.wake_key = f"{events.prefix}:resume:wake:{uuid.uuid4().hex}"
        self._spawn = spawn
        self._joined = asyncio.Event()
        self._task: asyncio.Task | None = None

    def follow(self, request_id: str, after: int) -> _Watched:
        watched = self.turns.get(request_id)
        if watched is None:
            watched = self.turns[request_id] = _Watched(request_id, after)
            self._joined.set()
            self._spawn(self._poke(), f"resume-watch-poke-{request_id}")
        watched.readers += 1
        if self._task is None or self._task.done():
            self._task = self._spawn(self._run(), "resume-watch")
        return watched

    def leave(self, watched: _Watched) -> None:
        watched.readers -= 1
        if watched.readers <= 0 and self.turns.get(watched.request_id) is watched:
            del self.turns[watched.request_id]

    async def _poke(self) -> None:
        try:
            async with self.events.redis.pipeline(transaction=False) as pipe:
                pipe.xadd(self.wake_key, {"j": 1}, maxlen=1)
                pipe.pexpire(self.wake_key, 60_000)
                async with asyncio.timeout(self.timeout):
                    await pipe.execute()
        except Exception as exc:  # the turn joins at the next read instead (within BLOCK_MS)
            log.debug("resume watch wake-up failed (%s)", type(exc).__name__)

    async def _run(self) -> None:
        client = self.events.redis.client()  # holds one pooled connection for the blocking reads
        wake_id: bytes | str = "0-0"
        leases_renewed = 0.0
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not self.turns:
                    self._joined.clear()
                    await self._joined.wait()
                    continue
                try:
                    if loop.time() - leases_renewed >= READER_LEASE_MS / 3000:
                        async with asyncio.timeout(self.timeout):
                            await self.events.still_reading(list(self.turns))
                        leases_renewed = loop.time()
                    streams: dict[Any, Any] = {  # redis-py's own types for XREAD's streams are narrower
                        self.events.events_key(request_id): f"{watched.tail}-1"
                        for request_id, watched in self.turns.items()
                    }
                    streams[self.wake_key] = wake_id
                    raise_dropped_cancellation()  # before a read that blocks up to BLOCK_MS
                    answer: Any = await client.xread(streams, count=FETCH_COUNT, block=BLOCK_MS)
                except Exception as exc:  # the readers' own reads say what failed
                    log.debug("resume watch read failed (%s)", type(exc).__name__)
                    for watched in self.turns.values():
                        watched.wake()
                    await asyncio.sleep(BLOCK_MS / 1000)  # retry pace while Redis fails
                    continue
                for key, entries in answer or []:
                    if key.decode() == self.wake_key:
                        wake_id = entries[-1][0]
                        continue
                    reader = self.turns.get(self.events.request_of(key))
                    if reader is not None and entries:
                        reader.got(frames_of(entries))
        finally:
            await client.aclose()
