"""The one way the gateway connects to Redis (`GATEWAY_REDIS_URL`): the limit store (`app.policy.redis_store`)
and the event store of resumable streams (`app.resume.redis_store`) both get their client here."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, TypeVar

if TYPE_CHECKING:  # redis-py is imported by `redis_client`: a gateway without Redis never imports it
    from redis.asyncio import Redis

T = TypeVar("T")


def redis_client(
    url: str,
    timeout: float,
    decode: bool = True,
    *,
    max_connections: int | None = None,
    pool_timeout: float | None = None,
) -> Redis:
    """An asyncio client whose calls give up after `timeout` seconds. One immediate retry, so a pooled connection
    that a Redis restart closed is replaced instead of failing the call. With `max_connections`, a call that
    finds every connection in use waits for one (at most `pool_timeout`, default `timeout`) instead of failing
    at once."""
    from redis.asyncio import BlockingConnectionPool, Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    options: dict[str, Any] = dict(
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
        decode_responses=decode,
    )
    if max_connections is None:
        return Redis.from_url(url, **options)
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout if pool_timeout is None else pool_timeout, **options
    )
    return Redis.from_pool(pool)


def raise_dropped_cancellation() -> None:
    """Raise again a cancellation of the current task that a Redis call dropped. redis-py bounds its socket
    writes with `asyncio.wait_for`, which on Python 3.11 returns the write's result and drops a cancellation
    that arrives as the write completes; the request stays counted on the task (`Task.cancelling()`). A loop
    that runs until it is cancelled calls this after its Redis calls, so that it still ends; every other Redis
    call goes through `bounded`, which calls it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


async def bounded(call: Awaitable[T], timeout: float) -> T:
    """One Redis call, given up after `timeout` seconds, and a cancellation it dropped
    (`raise_dropped_cancellation`) raised again. Every Redis call on a request path goes through here: the
    limit store's (`app.policy.limits.Limits._bounded`), the event store's (`app.resume.stall.through_stall`,
    the resume hub's), the pool state's but its lease-taking `acquire` (`app.pools.redis_store` says why); so a
    request whose client left while Redis answered ends there instead of going on for nobody (an admission
    taken, a resumption counted and read)."""
    async with asyncio.timeout(timeout):
        result = await call
    raise_dropped_cancellation()
    return result
