"""The events of resumable turns in Redis (`RedisEvents`), for resumptions on other replicas, and the event
store's client (`events_client`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.redis_client import redis_client
from app.resume.frames import Frame

if TYPE_CHECKING:  # redis-py is imported by `redis_client`, when Redis is configured
    from redis.asyncio import Redis

READER_LEASE_MS = 3000  # a reader on another replica renews its presence this often (well within)
ORIGIN_LEASE_MS = 5000  # the origin replica renews "the turn is running here" this often (well within)
BLOCK_MS = 1000  # one blocking read of the Redis streams (StreamWatch)
POOL_SIZE = 16  # connections of a replica's event store client; a call waits (within the timeout) for a free one
FETCH_COUNT = 500  # entries per read


def events_client(url: str, timeout: float) -> Redis:
    """The event store's client (`app.redis_client`): a socket timeout that leaves room for the watch's
    blocking read, and a pool of POOL_SIZE connections whose callers wait up to `timeout` for a free one
    instead of failing."""
    return redis_client(url, timeout + BLOCK_MS / 1000, decode=False, max_connections=POOL_SIZE, pool_timeout=timeout)


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
                newest: Any = await pipe.xrevrange(events, count=1)
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
        value: Any = await self.redis.hget(self._key(request_id), "key")  # bytes (the client does not decode)
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
        return frames_of(entries), bool(known), bool(origin)

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


def frames_of(entries) -> list[Frame]:
    """The frames of stream entries Redis answered (`XRANGE`, `XREAD`)."""
    return [Frame(_seq(entry_id), fields[b"t"], fields[b"d"]) for entry_id, fields in entries]


@dataclass(frozen=True, slots=True)
class StoredBounds:
    """What Redis keeps of a turn: the seq of its first kept event (None: none kept), of its terminal (None:
    not reached yet), and whether the origin replica still runs it."""

    first: int | None
    terminal: int | None
    running: bool


def _seq(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[0])
