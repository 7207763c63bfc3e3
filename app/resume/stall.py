"""A Redis stall ridden out, not taken for the end: a call of the event store that times out or loses its
connection is tried again with a backoff (`StallRetry`), and only then fails (`StoreStalled`)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterator, TypeVar


from app.redis_client import bounded

log = logging.getLogger("gateway.resume")

T = TypeVar("T")


def stalls() -> tuple[type[BaseException], ...]:
    """What a stalled Redis looks like to a call: our bound on it ran out (asyncio's TimeoutError), the socket timed
    out, or the connection failed (none free in the pool in time, reset, refused while Redis restarts). redis-py is
    imported here, not with the module: only a gateway with `GATEWAY_REDIS_URL` calls the event store (start-up
    time, docs/performance.md)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (TimeoutError, asyncio.TimeoutError, RedisTimeoutError, RedisConnectionError)


@dataclass(frozen=True, slots=True)
class StallRetry:
    """How a call to the event store that stalls (one of `stalls()`) is tried again: after `first_s`, each pause
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
    """`call()` bounded by `timeout` per try (`app.redis_client.bounded`: a cancellation it dropped is raised
    again), tried again after each stall as `retry` says. Raises StoreStalled when it gave up; any other
    failure at once."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + retry.give_up_s
    pauses = retry.pauses()
    while True:
        try:
            return await bounded(call(), timeout)
        except stalls() as exc:
            left = deadline - loop.time()
            if left <= 0:
                raise StoreStalled(type(exc), loop.time() - started) from exc
            pause = min(next(pauses), left)
            log.debug("event store stalled (%s), trying again in %.2fs", type(exc).__name__, pause)
            await asyncio.sleep(pause)
