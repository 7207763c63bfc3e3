"""The resumable turns this replica runs and their resumption (`ResumeHub`): the tee that keeps a turn's
events, the bounds on what is kept, the grace window, and finding and reading a kept stream, here or through
Redis."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Callable

from app.contract.failures import Interrupt
from app.contract.refusals import EventsLost, EventStoreUnavailable
from app.core.job import TurnJob
from app.doors.base import EventEncoder
from app.redis_client import bounded
from app.resume.frames import Frame, KeptBytes, LocalStream
from app.resume.mirror import Mirror
from app.resume.redis_store import RedisEvents
from app.resume.stall import StallRetry, StoreStalled, through_stall
from app.resume.watch import StreamWatch

if TYPE_CHECKING:
    from app.telemetry.metrics import Metrics

log = logging.getLogger("gateway.resume")


@dataclass(frozen=True, slots=True)
class Found:
    """A kept stream a resumption may read: on this replica (`local`) or in Redis; `running`: its turn still
    runs (and holds a concurrency lease of its own)."""

    request_id: str
    local: "LocalStream | None"
    running: bool


class StreamEnded(Exception):
    """`Last-Event-ID` names the terminal event: nothing follows (answered 204, so an EventSource stops
    reconnecting)."""


class NotInStore(EventsLost):
    """The event store does not know the request: never resumable, another replica's without Redis, expired,
    or lost with a Redis restart (the HTTP layer asks the ledger which)."""


def _failure(exc: BaseException) -> str:
    """What failed, for a message: the last try's exception type when a call gave up after a stall."""
    return str(exc) if isinstance(exc, StoreStalled) else type(exc).__name__


class ResumeHub:
    """The resumable turns this replica runs, and resumption from here or (through Redis) from anywhere."""

    def __init__(
        self,
        *,
        grace_s: float,
        ttl_s: float,
        cap: int,
        max_turn_bytes: int = 1 << 62,
        max_bytes: int = 1 << 62,
        redis: RedisEvents | None = None,
        timeout: float = 0.25,
        metrics: "Metrics | None" = None,
        stall: StallRetry = StallRetry(),
    ) -> None:
        self.grace_s = grace_s
        self.ttl_s = ttl_s
        self.cap = cap
        self.max_turn_bytes = max_turn_bytes
        self.kept = KeptBytes(max_bytes)
        self.redis = redis
        self.timeout = timeout
        self.metrics = metrics
        self.stall = stall  # how a call of a resumption, a status check or a mirror write rides out a Redis stall
        self.local: dict[str, LocalStream] = {}
        self.jobs: dict[str, TurnJob] = {}  # the running resumable turns of this replica
        # How many times each turn was resumed while it ran (`times_resumed`); kept as long as the turn is.
        self._resumptions: weakref.WeakKeyDictionary[TurnJob, int] = weakref.WeakKeyDictionary()
        self._finished: OrderedDict[str, LocalStream] = OrderedDict()  # still keeping frames, earliest finished first
        self.watch = StreamWatch(redis, self._spawn, timeout) if redis is not None else None
        self.on_resumed_late: Callable[[TurnJob], None] | None = None  # resumptions seen after the record was written
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ the origin side

    def track(
        self, job: TurnJob, encoder: EventEncoder, *, first: dict | None = None, add_ids: bool = False
    ) -> LocalStream:
        """Start keeping a resumable turn's events, as `encoder` (the door's) writes them, and return its
        local stream. `first`: an event already taken from the turn; `add_ids`: prefix each non-empty frame
        with `id: <seq>` (for doors whose frames have no id of their own)."""
        turn = job.turn
        stream = LocalStream(turn.request_id, job.request.api_key_id, self.cap, self.max_turn_bytes, self.kept)
        self.local[turn.request_id] = stream
        self.jobs[turn.request_id] = job
        self._spawn(self._tee(job, stream, encoder, first, add_ids), f"resume-tee-{turn.request_id}")
        return stream

    async def _tee(
        self, job: TurnJob, stream: LocalStream, encoder: EventEncoder, first: dict | None, add_ids: bool
    ) -> None:
        turn = job.turn
        mirror = Mirror(self, stream) if self.redis is not None else None
        seq = 0
        event = first
        try:
            if mirror is not None:
                # The client sees no event before Redis knows the request (one try): otherwise resuming on
                # another replica right after the first events finds the turn's record but not its events (410).
                await mirror.known(self.timeout)
            while event is not None or (event := await turn.next_event()) is not None:
                current, event = event, None
                try:
                    data = encoder.encode(current)
                except Exception:
                    log.exception("turn %s: %s event could not be encoded", turn.request_id, current.get("type"))
                    job.interrupt(Interrupt.WRITER)  # the turn settles as an internal error
                    continue
                seq += 1
                if add_ids and data:
                    data = b"id: %d\n" % seq + data
                frame = Frame(seq, current["type"].encode(), data)
                stream.append(frame)
                if self.kept.excess > 0:
                    self._keep_within_bound(stream)
                if mirror is not None:
                    mirror.add(frame)
        finally:
            turn.close_reader()
            stream.finish()
            if mirror is not None:
                mirror.finish()
            self._forget_later(stream)
            self.jobs.pop(turn.request_id, None)
        if mirror is not None:
            await mirror.done()  # before it may be dropped: its last frames must not reach Redis after the drop
        if self.local.get(stream.request_id) is stream and stream.frames:
            self._finished[stream.request_id] = stream
            if self.kept.excess > 0:
                self._keep_within_bound(None)
        if mirror is not None:
            await self._refresh_resumed(job, final=True)

    def _keep_within_bound(self, growing: LocalStream | None) -> None:
        """Over `GATEWAY_RESUME_MAX_BYTES`: drop the frames of the turns that finished first, then the oldest
        frames of the turn that grows (its newest frame stays)."""
        while self.kept.excess > 0 and self._finished:
            _, oldest = self._finished.popitem(last=False)
            log.info("turn %s: kept events dropped (replica bound of %d bytes)", oldest.request_id, self.kept.limit)
            self._drop(oldest)
        if self.kept.excess > 0 and growing is not None:
            growing.drop_oldest(self.kept.excess)

    def _drop(self, stream: LocalStream) -> None:
        stream.drop_all()
        if self.redis is not None:
            self._spawn(self._quietly(self.redis.drop(stream.request_id)), f"resume-drop-{stream.request_id}")

    def reader_left(self, job: TurnJob, stream: LocalStream, draining: bool) -> None:
        """A reader of a local stream went away: when it was the last one and the turn still runs, the turn
        gets the grace window instead of being cancelled (while draining, it stops as any other)."""
        stream.readers -= 1
        if job.turn.settled or stream.readers > 0:
            return
        if draining:
            job.interrupt(Interrupt.SHUTDOWN)
            return
        self._spawn(self._grace(job, stream), f"resume-grace-{stream.request_id}")

    async def _grace(self, job: TurnJob, stream: LocalStream) -> None:
        loop = asyncio.get_running_loop()
        last_reader = loop.time()
        poll = min(0.25, self.grace_s / 4) if self.grace_s > 0 else 0
        while not job.turn.settled and (job.task is None or not job.task.done()):
            remote = await self._refresh_resumed(job)
            if stream.readers > 0 or remote:
                if stream.readers > 0 and not remote:
                    return  # a local reader took over; it starts its own grace when it leaves
                last_reader = loop.time()
            elif loop.time() - last_reader >= self.grace_s:
                log.info("turn %s: nobody resumed within %gs, cancelling", stream.request_id, self.grace_s)
                job.interrupt(Interrupt.CLIENT)
                return
            await asyncio.sleep(poll)

    async def _refresh_resumed(self, job: TurnJob, final: bool = False) -> bool:
        """Update `times_resumed` from Redis; True when a reader on another replica is attached."""
        redis = self.redis
        if redis is None:
            return False
        request_id = job.turn.request_id
        try:
            resumes, reader = await through_stall(lambda: redis.status(request_id), self.timeout, self.stall)
        except Exception as exc:  # polled several times a second: the mirror already logged that Redis fails
            log.debug("resume status of %s unavailable (%s)", job.turn.request_id, type(exc).__name__)
            return False
        changed = resumes > self.times_resumed(job)
        if changed:
            self._resumptions[job] = resumes
        if final and changed and self.on_resumed_late is not None:
            self.on_resumed_late(job)
        return reader

    def times_resumed(self, job: TurnJob) -> int:
        """How many times `job`'s stream was resumed while the turn ran, here or (with Redis) on any replica
        (the record's `resumed`)."""
        return self._resumptions.get(job, 0)

    def _forget_later(self, stream: LocalStream) -> None:
        asyncio.get_running_loop().call_later(self.ttl_s, self._forget, stream)

    def _forget(self, stream: LocalStream) -> None:
        if self.local.get(stream.request_id) is stream:
            del self.local[stream.request_id]
            self._finished.pop(stream.request_id, None)
            stream.drop_all()

    def _spawn(self, coro, name: str) -> asyncio.Task:
        """A background task of the hub (cancelled by `aclose`)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ resuming

    async def find(self, request_id: str, key_id: str | None, after: int) -> "Found | None":
        """The kept stream a resumption after `after` reads, for the key that made the request; None when
        there is no such request for this key (404). Raises StreamEnded (204), EventsLost (410; NotInStore:
        the event store does not know it) or EventStoreUnavailable (503)."""
        stream = self.local.get(request_id)
        if stream is not None:
            if key_id is not None and stream.key_id != key_id:
                return None
            if stream.terminal_seq is not None and after >= stream.terminal_seq:
                raise StreamEnded()
            if after + 1 < stream.first_seq:
                raise EventsLost(f"events after {after} are no longer kept (the kept events are bounded)")
            job = self.jobs.get(request_id)
            return Found(request_id, stream, job is not None and not job.turn.settled)
        if self.redis is None:
            return None
        redis = self.redis
        try:
            owner = await through_stall(lambda: redis.owner(request_id), self.timeout, self.stall)
            if owner is None:
                raise NotInStore("its events are not in the event store (expired, or lost when Redis restarted)")
            if key_id is not None and owner != key_id:
                return None
            kept = await through_stall(lambda: redis.bounds(request_id), self.timeout, self.stall)
            if kept.terminal is not None and after >= kept.terminal:
                raise StreamEnded()
            if (kept.first is None and not kept.running) or (kept.first is not None and kept.first > after + 1):
                raise EventsLost(f"events after {after} are no longer kept")
        except (EventsLost, StreamEnded):
            raise
        except Exception as exc:
            raise EventStoreUnavailable(f"the event store did not answer ({_failure(exc)})") from None
        return Found(request_id, None, kept.running)

    async def open(self, found: "Found", after: int) -> AsyncIterator[Frame]:
        """Start reading a found stream after `after` (counted as a resumption). Raises EventStoreUnavailable."""
        request_id = found.request_id
        stream = found.local
        if stream is not None:
            stream.resumes += 1
            job = self.jobs.get(request_id)
            if job is not None and not job.turn.settled:
                self._resumptions[job] = self.times_resumed(job) + 1
            if self.redis is not None:
                await self._quietly(self.redis.attach(request_id))
            self._resumed()
            stream.readers += 1  # now: the grace monitor must see this reader before the response starts
            return self._local_frames(stream, after)
        redis = self.redis
        assert redis is not None
        try:
            await through_stall(lambda: redis.attach(request_id), self.timeout, self.stall)
        except Exception as exc:
            raise EventStoreUnavailable(f"the event store did not answer ({_failure(exc)})") from None
        self._resumed()
        return self._remote_frames(request_id, after)

    def known_locally(self, request_id: str) -> bool:
        return request_id in self.local

    async def _local_frames(self, stream: LocalStream, after: int) -> AsyncIterator[Frame]:
        try:
            async for frame in stream.follow(after):
                yield frame
        finally:
            job = self.jobs.get(stream.request_id)
            if job is not None:
                self.reader_left(job, stream, draining=False)
            else:
                stream.readers -= 1

    async def _remote_frames(self, request_id: str, after: int) -> AsyncIterator[Frame]:
        """A turn kept in Redis, read without a connection of its own: the watch's latest entries when this
        reader is caught up, else a short fetch; between, a wait on the watch."""
        redis = self.redis
        assert redis is not None and self.watch is not None
        watched = self.watch.follow(request_id, after)
        position = after
        try:
            while True:
                frames, origin = watched.recent_after(position), True
                if not frames:
                    try:
                        frames, known, origin = await through_stall(
                            lambda: redis.read(request_id, position), self.timeout, self.stall
                        )
                    except Exception as exc:
                        raise EventsLost(f"the event store did not answer ({_failure(exc)})") from None
                    if not known:
                        raise EventsLost("the event store lost this request's events while it was being resumed")
                for frame in frames:
                    if frame.seq != position + 1:
                        raise EventsLost(f"event {position + 1} is no longer in the event store")
                    yield frame
                    position = frame.seq
                    if frame.terminal:
                        return
                if not frames:
                    if not origin:
                        raise EventsLost("the replica running this turn stopped before it ended")
                    await watched.wait(position)
        finally:
            self.watch.leave(watched)

    async def _quietly(self, awaitable) -> None:
        try:
            await bounded(awaitable, self.timeout)
        except Exception as exc:
            log.warning("resume store call failed (%s)", type(exc).__name__)

    def _resumed(self) -> None:
        if self.metrics is not None:
            self.metrics.resumptions.inc()

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.redis is not None:
            await self.redis.redis.aclose()
