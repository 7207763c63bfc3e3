"""The event store of resumable streams (`app/resume/`) against the machine's Redis, with Redis calls that
time out on purpose (issue 24 item 6): a stall is ridden out, not taken for the end of a resumption.

`Stalls` makes chosen round trips to Redis time out, deterministically: the Nth round trip that carries a
given command fails as a call bounded by `asyncio.wait_for` fails, either before Redis ran it or after (the
answer lost). A resumption on another replica then still gets every event once, the grace monitor still
sees its reader, and the mirror writes a batch whose write failed with the next try, neither lost nor
written twice; a stall longer than `StallRetry.give_up_s` ends the resumption as documented."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from itertools import islice
from types import SimpleNamespace
from typing import Any, Awaitable, Callable

import pytest
from redis.exceptions import ResponseError

from app.contract.refusals import EventsLost, EventStoreUnavailable
from app.resume.frames import Frame, LocalStream
from app.resume.hub import ResumeHub
from app.resume.mirror import Mirror
from app.resume.redis_store import RedisEvents
from app.resume.stall import StallRetry, StoreStalled, through_stall
from tests.conftest import REDIS_URL

KEY = "tenant"
RIDE_OUT = StallRetry(first_s=0.001, max_s=0.01, give_up_s=30)  # retries quickly and never gives up in a test
GIVE_UP = StallRetry(first_s=0.001, max_s=0.005, give_up_s=0.05)
FOREVER = 10**9  # stall every round trip that carries the command


pytestmark = pytest.mark.usefixtures("shared_redis")  # skipped when the shared Redis does not answer


@dataclass
class Stall:
    """Round trips carrying `command` time out: the `nth` of them (from 1) and the `times - 1` after it.
    `ran`: Redis ran the round trip, only its answer is lost. `hit` is set at the first one."""

    command: str
    nth: int = 1
    times: int = 1
    ran: bool = False
    seen: int = 0
    stalled: int = 0
    hit: asyncio.Event = field(default_factory=asyncio.Event)


class _SilentWatchConnection:
    """The StreamWatch's connection in these tests: its blocking read never answers, so readers fetch every
    frame themselves and each test's numbering of round trips is fixed."""

    async def xread(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        pass


class Stalls:
    """Installs `stalls` on a real client: every round trip (a command, a pipeline's execute, a command
    while a pipeline WATCHes) is matched by the commands it carries."""

    def __init__(self, client, *stalls: Stall) -> None:
        self.stalls = stalls
        command = client.execute_command
        client.execute_command = lambda *args, **options: self._round_trip([args[0]], lambda: command(*args, **options))
        client.client = _SilentWatchConnection
        pipeline = client.pipeline

        def stalling_pipeline(transaction: bool = True, shard_hint: Any = None):
            pipe = pipeline(transaction, shard_hint)
            execute, immediate = pipe.execute, pipe.immediate_execute_command
            pipe.execute = lambda raise_on_error=True: self._round_trip(
                [args[0] for args, _ in pipe.command_stack], lambda: execute(raise_on_error)
            )
            pipe.immediate_execute_command = lambda *args, **options: self._round_trip(
                [args[0]], lambda: immediate(*args, **options)
            )
            return pipe

        client.pipeline = stalling_pipeline

    async def _round_trip(self, commands: list[Any], run: Callable[[], Awaitable[Any]]) -> Any:
        names = {str(command).upper() for command in commands}
        for stall in self.stalls:
            if stall.command in names:
                stall.seen += 1
                if stall.nth <= stall.seen < stall.nth + stall.times:
                    stall.stalled += 1
                    if stall.ran:
                        await run()
                    stall.hit.set()
                    raise TimeoutError()  # what asyncio.wait_for raises when the call's bound ran out
        return await run()


@pytest.fixture
async def store():
    """A key prefix of this test's own on the machine's Redis, and a plain client to look at it."""
    from app.redis_client import redis_client

    prefix = f"gwtest-{uuid.uuid4().hex[:12]}"
    plain = redis_client(REDIS_URL, 2.0, decode=False)
    opened: list[ResumeHub] = []

    def hub(*stalls: Stall, stall: StallRetry = RIDE_OUT, cap: int = 10_000) -> ResumeHub:
        client = redis_client(REDIS_URL, 2.0, decode=False)
        Stalls(client, *stalls)
        made = ResumeHub(grace_s=30, ttl_s=60, cap=cap, redis=RedisEvents(client, prefix, 60), timeout=2.0, stall=stall)
        opened.append(made)
        return made

    yield SimpleNamespace(prefix=prefix, plain=plain, events=RedisEvents(plain, prefix, 60), hub=hub)
    for made in opened:
        await made.aclose()
    keys = [key async for key in plain.scan_iter(f"{prefix}:*")]
    if keys:
        await plain.delete(*keys)
    await plain.aclose()


def _frames(count: int) -> list[Frame]:
    """`count` frames, the last one terminal."""
    body = [Frame(seq, b"text_delta", b"id: %d\ndata: {}\n\n" % seq) for seq in range(1, count)]
    return body + [Frame(count, b"done", b"id: %d\ndata: {}\n\n" % count)]


async def _finished_turn(store, count: int) -> str:
    """A finished turn of `count` events in Redis, as its origin's mirror leaves it."""
    request_id = f"req_{uuid.uuid4().hex[:12]}"
    await store.events.create(request_id, KEY)
    await store.events.append(request_id, _frames(count), True, 1, 0)
    return request_id


async def _resume(hub: ResumeHub, request_id: str, after: int = 0) -> tuple[list[int], EventsLost | None]:
    """Resume through `hub` (as another replica): the seqs it got, and how it ended if not at the terminal."""
    found = await hub.find(request_id, KEY, after)
    assert found is not None and found.local is None
    got: list[int] = []
    try:
        async for frame in await hub.open(found, after):
            got.append(frame.seq)
    except EventsLost as lost:
        return got, lost
    return got, None


async def _kept(store, request_id: str) -> tuple[list[int], dict[bytes, bytes], bool]:
    """(the seqs of the request's stream in Redis, its meta hash, the origin lease exists)."""
    key = f"{store.prefix}:resume:{request_id}"
    entries = await store.plain.xrange(f"{key}:events")
    seqs = [int(entry_id.split(b"-")[0]) for entry_id, _ in entries]
    return seqs, await store.plain.hgetall(key), bool(await store.plain.exists(f"{key}:origin"))


# ------------------------------------------------------------------ the retry itself


def test_the_pauses_double_from_50_ms_up_to_1_s():
    assert list(islice(StallRetry().pauses(), 8)) == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert StallRetry().give_up_s == 5.0


async def test_a_call_that_stalls_is_tried_again_and_any_other_failure_is_not():
    tries: list[str] = []

    async def stalls_twice() -> str:
        tries.append("try")
        if len(tries) <= 2:
            raise TimeoutError()
        return "answer"

    assert await through_stall(stalls_twice, 1.0, RIDE_OUT) == "answer" and len(tries) == 3

    async def refused() -> None:
        tries.append("refused")
        raise ResponseError("WRONGTYPE")

    with pytest.raises(ResponseError):
        await through_stall(refused, 1.0, RIDE_OUT)
    assert tries.count("refused") == 1


async def test_a_call_that_keeps_stalling_gives_up_after_give_up_s():
    async def never() -> None:
        raise TimeoutError()

    with pytest.raises(StoreStalled) as stalled:
        await through_stall(never, 1.0, GIVE_UP)
    assert stalled.value.cause is TimeoutError and stalled.value.waited_s >= GIVE_UP.give_up_s


# ------------------------------------------------------------------ a resumption on another replica


async def test_a_read_that_times_out_does_not_cut_the_resumption(store, monkeypatch):
    """The cause of the truncated resumptions: one read (of the second batch) timing out ended the response."""
    monkeypatch.setattr("app.resume.redis_store.FETCH_COUNT", 5)
    request_id = await _finished_turn(store, 12)
    read = Stall("XRANGE", nth=3)  # 1: finding the turn's bounds, 2: events 1-5, 3: events 6-10
    got, lost = await _resume(store.hub(read), request_id)
    assert lost is None and got == list(range(1, 13)) and read.stalled == 1


async def test_reads_that_ran_but_lost_their_answer_several_times_in_a_row_are_tried_again(store, monkeypatch):
    monkeypatch.setattr("app.resume.redis_store.FETCH_COUNT", 5)
    request_id = await _finished_turn(store, 12)
    read = Stall("XRANGE", nth=2, times=4, ran=True)
    got, lost = await _resume(store.hub(read), request_id, after=3)
    assert lost is None and got == list(range(4, 13)) and read.stalled == 4


async def test_a_stall_longer_than_the_retries_ends_the_resumption_saying_so(store, monkeypatch):
    monkeypatch.setattr("app.resume.redis_store.FETCH_COUNT", 5)
    request_id = await _finished_turn(store, 12)
    got, lost = await _resume(store.hub(Stall("XRANGE", nth=3, times=FOREVER), stall=GIVE_UP), request_id)
    assert got == [1, 2, 3, 4, 5]  # what came before, without a gap; no terminal
    assert lost is not None and "did not answer (TimeoutError, tried again for" in lost.message


async def test_finding_and_opening_ride_out_a_stall(store):
    """Before: a single timeout of these calls answered 503 (seen with 100 resumptions opened at once)."""
    request_id = await _finished_turn(store, 3)
    owner, bounds, attach = Stall("HGET", nth=1), Stall("XRANGE", nth=1, ran=True), Stall("HINCRBY", nth=1)
    got, lost = await _resume(store.hub(owner, bounds, attach), request_id)
    assert lost is None and got == [1, 2, 3]
    assert (owner.stalled, bounds.stalled, attach.stalled) == (1, 1, 1)
    assert (await _kept(store, request_id))[1][b"resumes"] == b"1"  # attach did not run twice


async def test_finding_gives_up_with_503_when_the_stall_outlasts_the_retries(store):
    request_id = await _finished_turn(store, 3)
    hub = store.hub(Stall("HGET", times=FOREVER), stall=GIVE_UP)
    with pytest.raises(EventStoreUnavailable) as unavailable:
        await hub.find(request_id, KEY, 0)
    assert "tried again for" in unavailable.value.message


async def test_the_grace_monitor_still_sees_a_reader_when_its_status_check_times_out(store):
    """A status check that timed out used to count as "no reader on another replica" (the grace window ran)."""
    request_id = await _finished_turn(store, 3)
    await store.events.attach(request_id)
    status = Stall("EXISTS", nth=1)
    job = _Job(turn=SimpleNamespace(request_id=request_id))
    hub = store.hub(status)
    assert await hub._refresh_resumed(job) is True
    assert hub.times_resumed(job) == 1 and status.stalled == 1


async def test_closing_the_hub_ends_the_watch_when_its_lease_renewal_drops_the_cancellation(store):
    """redis-py bounds its socket writes with `asyncio.wait_for`, which on Python 3.11 drops a cancellation that
    arrives as the write completes. Before: the watch went on to its next blocking read, and closing the hub (a
    replica's shutdown, this suite's teardown: CI waited there until it was stopped) waited for ever."""
    hub = store.hub()
    renewing, answer = asyncio.Event(), asyncio.get_running_loop().create_future()

    async def still_reading(request_ids: list[str]) -> None:
        renewing.set()
        try:
            await answer
        except asyncio.CancelledError:
            pass  # dropped, as such a write drops it

    hub.redis.still_reading = still_reading
    hub.watch.follow(f"req_{uuid.uuid4().hex[:12]}", 0)
    await renewing.wait()
    answer.set_result(None)  # the renewal answers, and in the same step of the loop the hub closes
    async with asyncio.timeout(5):
        await hub.aclose()
    assert hub.watch._task.cancelled()


async def test_a_resumption_cancelled_as_its_owner_lookup_drops_the_cancellation_ends_and_reads_nothing(store):
    """The client of a resumption on another replica leaves as Redis answers the request's owner, and the call
    drops the cancellation (redis-py on Python 3.11: `app.redis_client.raise_dropped_cancellation`). Before:
    the handler went on, counted a resumption for nobody and read the whole stream; now it ends there."""
    request_id = await _finished_turn(store, 3)
    hub = store.hub()
    asked, answer = asyncio.Event(), asyncio.get_running_loop().create_future()
    owner = hub.redis.owner

    async def dropping_owner(request_id: str) -> str | None:
        asked.set()
        try:
            await answer
        except asyncio.CancelledError:
            pass  # dropped, as such a write drops it
        return await owner(request_id)

    hub.redis.owner = dropping_owner
    resumption = asyncio.create_task(_resume(hub, request_id))
    await asked.wait()
    answer.set_result(None)  # Redis answers, and in the same step of the loop the client leaves
    resumption.cancel()
    with pytest.raises(asyncio.CancelledError):
        await resumption
    assert b"resumes" in (await _kept(store, request_id))[1]
    assert (await _kept(store, request_id))[1][b"resumes"] == b"0", "no resumption was counted for nobody"


# ------------------------------------------------------------------ the mirror (origin side)


def _origin(hub: ResumeHub, request_id: str) -> tuple[LocalStream, Mirror]:
    stream = LocalStream(request_id, KEY, hub.cap)
    return stream, Mirror(hub, stream)


def _add(stream: LocalStream, mirror: Mirror, frames: list[Frame]) -> None:
    for frame in frames:  # as the tee does
        stream.append(frame)
        mirror.add(frame)


def _finish(stream: LocalStream, mirror: Mirror) -> None:
    stream.finish()
    mirror.finish()


@pytest.mark.parametrize("ran", [False, True], ids=["not-run", "ran-answer-lost"])
async def test_a_batch_whose_write_timed_out_is_written_with_the_next_once(store, ran):
    """Before: the batch was dropped (a gap in Redis: the resumption on another replica was cut at it)."""
    request_id = f"req_{uuid.uuid4().hex[:12]}"
    write = Stall("XADD", nth=1, ran=ran)
    stream, mirror = _origin(store.hub(write), request_id)
    frames = _frames(21)
    _add(stream, mirror, frames[:10])
    await asyncio.wait_for(write.hit.wait(), 30)  # the write of events 1-10 timed out
    _add(stream, mirror, frames[10:])
    _finish(stream, mirror)
    await asyncio.wait_for(mirror.done(), 30)
    seqs, meta, origin = await _kept(store, request_id)
    assert seqs == list(range(1, 22))  # each once, in order
    assert meta[b"last"] == b"21" and meta[b"end"] == b"21" and meta[b"key"] == KEY.encode() and not origin
    assert mirror.failed


async def test_the_finishing_write_is_tried_again_until_redis_answers(store):
    request_id = f"req_{uuid.uuid4().hex[:12]}"
    write = Stall("XADD", nth=1, times=3)
    stream, mirror = _origin(store.hub(write), request_id)
    _add(stream, mirror, _frames(5))
    _finish(stream, mirror)
    await asyncio.wait_for(mirror.done(), 30)
    seqs, meta, origin = await _kept(store, request_id)
    assert seqs == [1, 2, 3, 4, 5] and meta[b"end"] == b"5" and not origin and write.stalled == 3
    got, lost = await _resume(store.hub(), request_id, after=2)
    assert lost is None and got == [3, 4, 5]


async def test_a_retried_batch_keeps_only_what_the_origin_still_keeps(store):
    """Frames the origin dropped (its cap) while the write was failing are not written: Redis keeps what the
    origin keeps, and a resumption before them is told they are lost."""
    request_id = f"req_{uuid.uuid4().hex[:12]}"
    write = Stall("XADD", nth=1)
    stream, mirror = _origin(store.hub(write, cap=4), request_id)
    frames = _frames(10)
    _add(stream, mirror, frames[:3])
    await asyncio.wait_for(write.hit.wait(), 30)
    _add(stream, mirror, frames[3:])
    _finish(stream, mirror)
    await asyncio.wait_for(mirror.done(), 30)
    assert stream.first_seq == 7 and (await _kept(store, request_id))[0] == [7, 8, 9, 10]
    with pytest.raises(EventsLost):
        await store.hub().find(request_id, KEY, 3)


async def test_the_mirror_of_a_finished_turn_gives_up_after_the_retries(store):
    request_id = f"req_{uuid.uuid4().hex[:12]}"
    write = Stall("XADD", times=FOREVER)
    stream, mirror = _origin(store.hub(write, stall=GIVE_UP), request_id)
    _add(stream, mirror, _frames(5))
    _finish(stream, mirror)
    await asyncio.wait_for(mirror.done(), 30)  # it ends: the tee waits for it before the turn's record
    assert (await _kept(store, request_id))[0] == [] and write.stalled >= 2


class _Job:
    """A `TurnJob` stand-in the hub can count resumptions of (it keys them by job, weakly)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class _Turn:
    """A turn of the given events (as `TurnJob.turn` gives them to the tee)."""

    def __init__(self, request_id: str, events: list[dict]) -> None:
        self.request_id = request_id
        self.events = list(events)
        self.settled = False

    async def next_event(self) -> dict | None:
        return self.events.pop(0) if self.events else None

    def close_reader(self) -> None:
        self.settled = True


class _Encoder:
    def encode(self, event: dict) -> bytes:
        return b"data: %s\n\n" % event["type"].encode()


async def test_the_first_event_goes_out_once_redis_knows_the_request(store):
    """A client resuming on another replica right after its first events used to find the turn's record
    (written when it starts) but not yet its events: 410, seen under load."""
    request_id = f"req_{uuid.uuid4().hex[:12]}"
    hub = store.hub()
    job = _Job(turn=_Turn(request_id, [{"type": "start"}, {"type": "done"}]), request=SimpleNamespace(api_key_id=KEY))
    stream = hub.track(job, _Encoder())
    async for _frame in stream.follow(0):
        assert await store.events.owner(request_id) == KEY  # known to Redis before the first event
        break
