"""The origin's copy of a resumable turn's frames to Redis (`Mirror`), off the tee's path."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Iterator

from app.redis_client import raise_dropped_cancellation
from app.resume.frames import Frame, LocalStream
from app.resume.redis_store import ORIGIN_LEASE_MS

if TYPE_CHECKING:
    from app.resume.hub import ResumeHub

log = logging.getLogger("gateway.resume")


class Mirror:
    """Copies a local stream's frames to Redis in order, in batches, off the tee's path. A batch whose write
    failed is kept and written with the next try (after a backoff pause, `hub.stall`), so Redis never misses
    frames the origin still keeps: while the turn runs, it is tried until Redis answers; once the turn
    finished, for at most `hub.stall.give_up_s` of failing writes."""

    def __init__(self, hub: ResumeHub, stream: LocalStream) -> None:
        self.hub = hub
        self.stream = stream
        self.pending: list[Frame] = []
        self.finished = False
        self.wakeup = asyncio.Event()
        self.failed = False
        self.created = asyncio.Event()  # Redis knows the request (its owner, the origin lease)
        self.task = hub._spawn(self._run(), f"resume-mirror-{stream.request_id}")

    def add(self, frame: Frame) -> None:
        self.pending.append(frame)
        self.wakeup.set()

    def finish(self) -> None:
        self.finished = True
        self.wakeup.set()

    async def done(self) -> None:
        await asyncio.gather(self.task, return_exceptions=True)

    async def known(self, timeout: float) -> None:
        """Until Redis knows the request, at most `timeout` (a stall: the mirror goes on trying)."""
        try:
            async with asyncio.timeout(timeout):
                await self.created.wait()
        except (TimeoutError, asyncio.TimeoutError):
            pass

    async def _run(self) -> None:
        redis = self.hub.redis
        assert redis is not None
        request_id = self.stream.request_id
        created = False
        written: int | None = 0  # the newest seq Redis has; None after a write whose answer was lost
        started = time.monotonic()
        failing_since: float | None = None  # the first failure of the writes failing now
        pauses: Iterator[float] = iter(())
        first = True
        while True:
            raise_dropped_cancellation()
            if failing_since is not None:
                await asyncio.sleep(next(pauses))  # frames added meanwhile join the batch kept
            elif not first:
                try:
                    async with asyncio.timeout(ORIGIN_LEASE_MS / 3000):
                        await self.wakeup.wait()
                except (TimeoutError, asyncio.TimeoutError):
                    pass
            first = False
            self.wakeup.clear()
            finished = self.finished
            first_kept = self.stream.first_seq
            # What the origin no longer keeps is not written (the write's XTRIM would drop it at once).
            batch = [frame for frame in self.pending if frame.seq >= first_kept]
            self.pending = []
            try:
                if not created:
                    async with asyncio.timeout(self.hub.timeout):
                        await redis.create(request_id, self.stream.key_id)
                    created = True
                    self.created.set()
                if batch or finished:
                    async with asyncio.timeout(self.hub.timeout * 4):
                        written = await redis.append(request_id, batch, finished, first_kept, written)
                else:
                    async with asyncio.timeout(self.hub.timeout):
                        await redis.origin_alive(request_id)
            except Exception as exc:
                self.pending[:0] = batch  # kept, before the frames added since: written with the next try
                written = None
                self._failed(exc)
                now = time.monotonic()
                if failing_since is None:
                    failing_since, pauses = now, self.hub.stall.pauses()
                if finished and now - failing_since >= self.hub.stall.give_up_s:
                    log.warning(
                        "turn %s: gave up copying its last events to Redis after %.1fs (%s); resuming it on another "
                        "replica will say they are lost",
                        request_id,
                        now - failing_since,
                        type(exc).__name__,
                    )
                    return
                continue
            failing_since = None
            if finished:
                log.debug("turn %s mirrored to Redis in %.3fs", request_id, time.monotonic() - started)
                return

    def _failed(self, exc: BaseException) -> None:
        if not self.failed:
            self.failed = True
            log.warning(
                "turn %s: copying events to Redis failed (%s); trying again (their resumption on another replica "
                "waits for them)",
                self.stream.request_id,
                type(exc).__name__,
            )
        if self.hub.metrics is not None:
            self.hub.metrics.limit_store_error("resume")
