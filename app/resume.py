"""Resumable streams (`options.resumable: true`): the turn's events are kept, a client that disconnects may
continue with `GET /v1/stream/{requestId}` and `Last-Event-ID`, on this replica or (with Redis) any other.

How it works, for a resumable turn on the replica that runs it (the origin):

- a tee task reads the turn's events (`turn.next_event()`), numbers them 1, 2, 3 … and appends each to a
  `LocalStream` in memory and, with `GATEWAY_REDIS_URL`, to a Redis stream (a writer task per turn, in
  order, in pipelined batches; kept `GATEWAY_RESUME_TTL` seconds);
- what is kept is bounded: per turn by `GATEWAY_RESUME_MAX_EVENTS` and `GATEWAY_RESUME_MAX_TURN_BYTES` (its
  oldest frames dropped), per replica by `GATEWAY_RESUME_MAX_BYTES` (the frames of the turns that finished
  first are dropped, then the oldest frames of the turn that grows); Redis keeps what the origin keeps;
- every SSE response for the turn — the original one and each resumption — reads from the kept events, so
  a reader never holds the upstream back (the turn is buffered up to the cap instead of back-pressured);
- when the last reader goes away before the terminal event, the turn is not cancelled: a grace monitor
  waits until `GATEWAY_RESUME_GRACE` seconds pass with no reader on any replica (readers on other replicas
  hold a short lease in Redis), then interrupts the turn as a client disconnect (it settles `aborted`).

A resumption on another replica reads the Redis stream without holding a connection of its own: a caught-up
reader waits for a `StreamWatch`, one task per replica that waits for new entries of every followed turn
with one blocking `XREAD` on one connection and hands the entries it read to the readers; a reader that is
behind fetches with short non-blocking calls through a bounded pool (`events_client`). A resumption counts
against the key's concurrent streams and the replica's stream limits (`Gateway.admit_resumption`). Only the key that made the request may resume it
(another key: 404). When the kept events do not reach back to `Last-Event-ID` (dropped by a bound, expired,
or lost with a Redis restart) the answer is 410 `resume_unavailable`; if events go missing while a
resumption is being served, that response ends without a terminal event (and says why in an SSE comment),
never with a silent gap.

A Redis stall is ridden out, not taken for the end: a call of a resumption (finding the turn, attaching,
each read) and the grace monitor's status check that times out or loses its connection is tried again with
a backoff (`StallRetry`: 50 ms doubling up to 1 s, for at most 5 s); only then does the resumption end as
described (503 before the response starts, a cut response after). The mirror keeps a batch whose write
failed and writes it with the next one; each write is one MULTI/EXEC that also records the last sequence
number written (`last`), so a write that ran although its answer was lost is not written twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable, Iterator, TypeVar

from app.contract.failures import Interrupt
from app.core.job import TurnJob
from app.doors.base import EventEncoder
from app.contract.refusals import EventsLost, EventStoreUnavailable

from app.redis_client import raise_dropped_cancellation, redis_client
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

if TYPE_CHECKING:

    from app.telemetry.metrics import Metrics

log = logging.getLogger("gateway.resume")

TERMINAL_TYPES = (b"done", b"error")
READER_LEASE_MS = 3000  # a reader on another replica renews its presence this often (well within)
ORIGIN_LEASE_MS = 5000  # the origin replica renews "the turn is running here" this often (well within)
BLOCK_MS = 1000  # one blocking read of the Redis streams (StreamWatch)
POOL_SIZE = 16  # connections of a replica's event store client; a call waits (within the timeout) for a free one
FETCH_COUNT = 500  # entries per read
IDLE_CHECK_S = 2 * BLOCK_MS / 1000  # a waiting reader checks that the turn still runs (or is still known) this often

T = TypeVar("T")

# What a stalled Redis looks like to a call: our bound on it ran out (asyncio's TimeoutError), the socket timed
# out, or the connection failed (none free in the pool in time, reset, refused while Redis restarts).
STALLS: tuple[type[BaseException], ...] = (TimeoutError, asyncio.TimeoutError, RedisTimeoutError, RedisConnectionError)


@dataclass(frozen=True, slots=True)
class StallRetry:
    """How a call to the event store that stalls (one of STALLS) is tried again: after `first_s`, each pause
    twice the one before up to `max_s`, until `give_up_s` have passed since the first try (then the call's
    own failure stands: 503 before a resumption's response starts, a cut response after)."""

    first_s: float = 0.05
    max_s: float = 1.0
    give_up_s: float = 5.0

    def pauses(self) -> Iterator[float]:
        """The pauses between tries, forever (the caller stops at `give_up_s`)."""
        pause = self.first_s
        while True:
            yield pause
            pause = min(pause * 2, self.max_s)


class StoreStalled(Exception):
    """The event store did not answer a call tried again for `waited_s` seconds; `cause`: the last try's
    exception type."""

    def __init__(self, cause: type[BaseException], waited_s: float) -> None:
        super().__init__(f"{cause.__name__}, tried again for {waited_s:.1f}s")
        self.cause = cause
        self.waited_s = waited_s


async def through_stall(call: Callable[[], Awaitable[T]], timeout: float, retry: StallRetry) -> T:
    """`call()` bounded by `timeout` per try, tried again after each stall as `retry` says. Raises
    StoreStalled when it gave up; any other failure at once."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + retry.give_up_s
    pauses = retry.pauses()
    while True:
        try:
            async with asyncio.timeout(timeout):
                return await call()
        except STALLS as exc:
            left = deadline - loop.time()
            if left <= 0:
                raise StoreStalled(type(exc), loop.time() - started) from exc
            pause = min(next(pauses), left)
            log.debug("event store stalled (%s), trying again in %.2fs", type(exc).__name__, pause)
            await asyncio.sleep(pause)


def events_client(url: str, timeout: float) -> Redis:
    """The event store's client (`app.redis_client`): a socket timeout that leaves room for the watch's
    blocking read, and a pool of POOL_SIZE connections whose callers wait up to `timeout` for a free one
    instead of failing."""
    return redis_client(url, timeout + BLOCK_MS / 1000, decode=False, max_connections=POOL_SIZE, pool_timeout=timeout)


@dataclass(frozen=True, slots=True)
class Frame:
    """One numbered event: its type and the frame the door's encoder wrote for it (`id: <seq>` …)."""

    seq: int
    type: bytes
    data: bytes

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_TYPES


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


class RedisEvents:
    """The events of resumable turns in Redis, for resumptions on other replicas.

    Keys: `<p>:resume:<id>` hash (`key`: the owner's key id, `resumes`: count, `end`: seq of the terminal,
    `last`: the newest seq written),
    `<p>:resume:<id>:events` the stream (entry ids `<seq>-1`, field `t` type, `d` the frame; it keeps what the
    origin keeps, trimmed by `XTRIM MINID` to the origin's first kept frame), `<p>:resume:<id>:origin` present while the
    origin replica runs the turn, `<p>:resume:<id>:reader` present while a reader on another replica reads.
    """

    def __init__(self, client: "Redis", prefix: str, ttl_s: float) -> None:
        self.redis = client
        self.prefix = prefix
        self.ttl_ms = int(ttl_s * 1000)

    def _key(self, request_id: str, suffix: str = "") -> str:
        return f"{self.prefix}:resume:{request_id}{suffix}"

    async def create(self, request_id: str, key_id: str | None) -> None:
        meta = self._key(request_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(meta, "key", key_id or "")
            pipe.hsetnx(meta, "resumes", 0)  # a retried create keeps the resumptions counted meanwhile
            pipe.pexpire(meta, self.ttl_ms)
            pipe.set(self._key(request_id, ":origin"), 1, px=ORIGIN_LEASE_MS)
            await pipe.execute()

    async def append(
        self, request_id: str, frames: list[Frame], finished: bool, first_kept: int, written: int | None
    ) -> int:
        """Add the `frames` after `written` and drop those before `first_kept` (what the origin no longer keeps
        either), in one MULTI/EXEC that also sets `last` (the newest seq written); returns it. `written`: the
        newest seq the writer knows Redis has (its writes so far were answered); None after a write whose
        answer was lost (it may have run): then `last` (or the stream's newest entry) is read first, WATCHing
        the stream, so a batch tried again is written once. Raises WatchError when a write of this turn landed
        meanwhile (try again)."""
        meta, events = self._key(request_id), self._key(request_id, ":events")
        async with self.redis.pipeline(transaction=True) as pipe:
            if written is None:
                await pipe.watch(events)
                recorded = await pipe.hget(meta, "last")
                newest = await pipe.xrevrange(events, count=1)
                written = max(int(recorded or 0), _seq(newest[0][0]) if newest else 0)
                pipe.multi()
            for frame in frames:
                if frame.seq > written:
                    pipe.xadd(events, {"t": frame.type, "d": frame.data}, id=f"{frame.seq}-1")
            if frames and frames[-1].seq > written:
                written = frames[-1].seq
                pipe.hset(meta, "last", written)
            if first_kept > 1:
                pipe.xtrim(events, minid=f"{first_kept}-1", approximate=False)
            pipe.pexpire(events, self.ttl_ms)
            pipe.pexpire(self._key(request_id), self.ttl_ms)
            if finished:
                if frames and frames[-1].terminal:
                    pipe.hset(self._key(request_id), "end", frames[-1].seq)
                pipe.delete(self._key(request_id, ":origin"))
            else:
                pipe.set(self._key(request_id, ":origin"), 1, px=ORIGIN_LEASE_MS)
            await pipe.execute()
        return written

    async def drop(self, request_id: str) -> None:
        """Drop a turn's events (the origin dropped them to stay within the replica's bound); the request
        stays known, so a resumption gets 410."""
        await self.redis.delete(self._key(request_id, ":events"))

    async def origin_alive(self, request_id: str) -> None:
        await self.redis.set(self._key(request_id, ":origin"), 1, px=ORIGIN_LEASE_MS)

    async def owner(self, request_id: str) -> str | None:
        """The key id that made the request ('' when auth was off); None when Redis does not know it."""
        value = await self.redis.hget(self._key(request_id), "key")
        return None if value is None else value.decode()

    async def attach(self, request_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(self._key(request_id), "resumes", 1)
            pipe.set(self._key(request_id, ":reader"), 1, px=READER_LEASE_MS)
            await pipe.execute()

    async def reading(self, request_id: str) -> None:
        await self.redis.set(self._key(request_id, ":reader"), 1, px=READER_LEASE_MS)

    async def status(self, request_id: str) -> tuple[int, bool]:
        """(resumptions counted in Redis, a reader on another replica is attached)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self._key(request_id), "resumes")
            pipe.exists(self._key(request_id, ":reader"))
            resumes, reader = await pipe.execute()
        return int(resumes or 0), bool(reader)

    async def bounds(self, request_id: str) -> "StoredBounds":
        events = self._key(request_id, ":events")
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xrange(events, count=1)
            pipe.hget(self._key(request_id), "end")
            pipe.exists(self._key(request_id, ":origin"))
            first, end, origin = await pipe.execute()
        return StoredBounds(_seq(first[0][0]) if first else None, None if end is None else int(end), bool(origin))

    async def read(self, request_id: str, after: int) -> tuple[list[Frame], bool, bool]:
        """(frames after `after`, the request is still known to Redis, the origin still ran the turn before
        they were read: when it did not and nothing came, nothing will); never blocks. Renews the reader lease."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.exists(self._key(request_id))
            pipe.exists(self._key(request_id, ":origin"))
            pipe.set(self._key(request_id, ":reader"), 1, px=READER_LEASE_MS)
            pipe.xrange(self._key(request_id, ":events"), min=f"{after + 1}-0", count=FETCH_COUNT)
            known, origin, _, entries = await pipe.execute()
        return _frames(entries), bool(known), bool(origin)

    async def still_reading(self, request_ids: list[str]) -> None:
        """Renew the reader lease of turns read here (the origin's grace window sees them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for request_id in request_ids:
                pipe.set(self._key(request_id, ":reader"), 1, px=READER_LEASE_MS)
            await pipe.execute()

    def events_key(self, request_id: str) -> str:
        return self._key(request_id, ":events")

    def request_of(self, events_key: bytes) -> str:
        return events_key.decode()[len(self.prefix) + len(":resume:") : -len(":events")]


def _frames(entries) -> list[Frame]:
    return [Frame(_seq(entry_id), fields[b"t"], fields[b"d"]) for entry_id, fields in entries]


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
                    streams: dict[str, bytes | str] = {
                        self.events.events_key(request_id): f"{watched.tail}-1" for request_id, watched in self.turns.items()
                    }
                    streams[self.wake_key] = wake_id
                    raise_dropped_cancellation()  # before a read that blocks up to BLOCK_MS
                    answer = await client.xread(streams, count=FETCH_COUNT, block=BLOCK_MS)
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
                    watched = self.turns.get(self.events.request_of(key))
                    if watched is not None and entries:
                        watched.got(_frames(entries))
        finally:
            await client.aclose()


@dataclass(frozen=True, slots=True)
class StoredBounds:
    """What Redis keeps of a turn: the seq of its first kept event (None: none kept), of its terminal (None:
    not reached yet), and whether the origin replica still runs it."""

    first: int | None
    terminal: int | None
    running: bool


def _failure(exc: BaseException) -> str:
    """What failed, for a message: the last try's exception type when a call gave up after a stall."""
    return str(exc) if isinstance(exc, StoreStalled) else type(exc).__name__


def _seq(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[0])


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
        stream = LocalStream(turn.request_id, job.api_key_id, self.cap, self.max_turn_bytes, self.kept)
        self.local[turn.request_id] = stream
        self.jobs[turn.request_id] = job
        self._spawn(self._tee(job, stream, encoder, first, add_ids), f"resume-tee-{turn.request_id}")
        return stream

    async def _tee(
        self, job: TurnJob, stream: LocalStream, encoder: EventEncoder, first: dict | None, add_ids: bool
    ) -> None:
        turn = job.turn
        mirror = _Mirror(self, stream) if self.redis is not None else None
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
        """Update `job.resumed` from Redis; True when a reader on another replica is attached."""
        if self.redis is None:
            return False
        request_id = job.turn.request_id
        try:
            resumes, reader = await through_stall(lambda: self.redis.status(request_id), self.timeout, self.stall)
        except Exception as exc:  # polled several times a second: the mirror already logged that Redis fails
            log.debug("resume status of %s unavailable (%s)", job.turn.request_id, type(exc).__name__)
            return False
        changed = resumes > job.resumed
        job.resumed = max(job.resumed, resumes)
        if final and changed and self.on_resumed_late is not None:
            self.on_resumed_late(job)
        return reader

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
                job.resumed += 1
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
            async with asyncio.timeout(self.timeout):
                await awaitable
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


class _Mirror:
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
